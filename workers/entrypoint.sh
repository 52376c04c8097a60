#!/bin/sh
# Entry point of the evalq worker image: check the settings, wait for the broker and the
# database (bounded), then run `evalq "$@"` as PID 1's child (tini reaps and forwards signals).
set -eu

say() { echo "evalq-entrypoint: $*" >&2; }

case "${1:-}" in
    worker|flower)
        if [ -z "${EVALQ_BROKER_URL:-}" ]; then
            say "EVALQ_BROKER_URL is not set: set it to the Redis URL (redis://:PASSWORD@HOST:6379/0)"
            exit 2
        fi ;;
esac
if [ "${1:-}" = worker ] && [ -z "${EVALQ_DATABASE_URL:-}" ]; then
    say "EVALQ_DATABASE_URL is not set: workers on several machines need the shared PostgreSQL"
    exit 2
fi

# Wait up to EVALQ_WAIT_SECONDS for the servers, so `compose up` order does not matter.
python - <<'PY'
import os, sys, time
deadline = time.monotonic() + float(os.environ.get("EVALQ_WAIT_SECONDS", "60"))
def ready():
    try:
        if os.environ.get("EVALQ_BROKER_URL", "").startswith(("redis://", "rediss://")):
            import redis
            redis.Redis.from_url(os.environ["EVALQ_BROKER_URL"], socket_timeout=2).ping()
        url = os.environ.get("EVALQ_DATABASE_URL", "")
        if url.startswith("postgresql"):
            import sqlalchemy
            with sqlalchemy.create_engine(url).connect():
                pass
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
        return exc
while (problem := ready()) is not None:
    if time.monotonic() > deadline:
        sys.exit(f"evalq-entrypoint: servers not reachable: {problem}")
    time.sleep(1)
PY

exec evalq "$@"
