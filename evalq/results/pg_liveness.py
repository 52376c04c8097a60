"""Keep a lost host's PostgreSQL connection from holding rows for hours.

A worker whose machine drops off the network in the middle of a transaction (a lease renewal
sent its UPDATE, the COMMIT never arrived) leaves the server with a session idle in
transaction and the row locked. Nothing ends that session until the operating system's TCP
keepalive gives up, two hours by default; meanwhile the worker that takes the trial over
blocks on the same row and the study never finishes. Both ends therefore probe a silent peer
after seconds: the server (per session settings, so no server configuration is needed) ends
the dead session and releases its locks; the client (libpq options) errors instead of
waiting for ever on a link that is gone.
"""

from __future__ import annotations

#: seconds of silence before the first probe, seconds between probes, probes before giving up
IDLE_SECONDS, INTERVAL_SECONDS, PROBES = 10, 5, 3
#: milliseconds sent data may stay unacknowledged (keepalive does not cover a pending send)
USER_TIMEOUT_MS = (IDLE_SECONDS + INTERVAL_SECONDS * PROBES) * 1000

#: libpq connection parameters (psycopg2 passes them through)
CLIENT_ARGS = {"keepalives": 1, "keepalives_idle": IDLE_SECONDS,
               "keepalives_interval": INTERVAL_SECONDS, "keepalives_count": PROBES,
               "tcp_user_timeout": USER_TIMEOUT_MS}



def client_args(url: str) -> dict:
    """CLIENT_ARGS less any the database URL sets itself (the user's choice wins)."""
    from sqlalchemy.engine import make_url

    chosen = make_url(url).query
    return {name: value for name, value in CLIENT_ARGS.items() if name not in chosen}


#: the server side of the same, settable by any user for its own session (ignored on a
#: Unix socket)
SERVER_SETTINGS = {"tcp_keepalives_idle": IDLE_SECONDS,
                   "tcp_keepalives_interval": INTERVAL_SECONDS,
                   "tcp_keepalives_count": PROBES, "tcp_user_timeout": USER_TIMEOUT_MS}


def apply_server_settings(dbapi_connection, _record=None) -> None:
    """SQLAlchemy `connect` listener: set the server's probes for this new session.

    SET is sent as statements rather than a startup `options` string, which connection
    poolers such as PgBouncer refuse."""
    cursor = dbapi_connection.cursor()
    try:
        for name, value in SERVER_SETTINGS.items():
            cursor.execute(f"SET {name} = {int(value)}")
    finally:
        cursor.close()
    dbapi_connection.commit()
