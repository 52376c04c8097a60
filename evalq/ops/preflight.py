"""Checks made before `evalq run` writes anything: the database, the broker, the artifact store.

A study whose broker is down must not leave a lock, planned rows or "queued" attempts behind, so
every server is reached (and every path found writable) first; each failure is one line.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from evalq.config import Settings
from evalq.errors import UserError

CONNECT_SECONDS = 5


def check_database(url: str) -> None:
    """PostgreSQL answers; a SQLite file's folder can be made and written."""
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        if path and path != ":memory:":
            require_writable(Path(path).parent, "EVALQ_DATABASE_URL")
        return
    from sqlalchemy.exc import DBAPIError

    from evalq.results.store import get_engine

    try:
        with get_engine(url).connect():
            pass
    except DBAPIError as exc:
        first = (str(exc.orig).strip().splitlines() or ["refused"])[0]
        raise UserError(f"cannot reach the results database: {first}",
                        field="EVALQ_DATABASE_URL",
                        fix="start the database server or correct the URL") from None


def check_broker(url: str | None) -> None:
    """Redis answers PING on the named database (the embedded default needs no server)."""
    if not url or url.startswith("filesystem://"):
        return
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=CONNECT_SECONDS,
                                  socket_timeout=CONNECT_SECONDS)
    try:
        client.ping()
    except redis.ResponseError as exc:  # e.g. "DB index is out of range"
        raise UserError(f"the broker refused the connection: {exc}", field="EVALQ_BROKER_URL",
                        fix="use a database number the Redis server has (/0 is always there)"
                        ) from None
    except redis.AuthenticationError as exc:
        raise UserError(f"the broker refused the password: {exc}", field="EVALQ_BROKER_URL",
                        fix="put the right password in the URL (redis://:PASSWORD@host:6379/0)"
                        ) from None
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        raise UserError(f"cannot reach the broker: {exc}", field="EVALQ_BROKER_URL",
                        fix="start Redis, or correct EVALQ_BROKER_URL (unset it for the "
                            "embedded default)") from None
    finally:
        client.close()


def check_artifacts(url: str) -> None:
    """A local artifact store must be a folder evalq can write (object stores are checked on use)."""
    if "://" in url and not url.startswith("file://"):
        return
    require_writable(Path(url.removeprefix("file://")), "EVALQ_ARTIFACTS_URL")


def require_writable(folder: Path, setting: str) -> None:
    """`folder`, or the nearest part of it that exists, is a folder this process may write."""
    probe = folder.expanduser().resolve()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"{probe} is not a folder", field=setting,
                        fix="point it at a folder (or a path inside one)")
    try:  # a real write, since root passes every os.access check: made and removed at once
        os.rmdir(tempfile.mkdtemp(prefix=".evalq-write-check-", dir=probe))
    except OSError as exc:
        raise UserError(f"cannot write in {probe}: {exc.strerror or exc}", field=setting,
                        fix="choose a folder this user can write, or fix its permissions"
                        ) from None


def check_servers(settings: Settings) -> None:
    """Everything `evalq run` will write to, reached before anything is written."""
    require_writable(settings.home, "EVALQ_HOME")
    check_database(settings.database_url)
    check_broker(settings.broker_url)
    check_artifacts(settings.artifacts_url)
