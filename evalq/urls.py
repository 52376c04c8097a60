"""The two server URLs evalq takes (results database, broker): parsed and checked up front.

A URL evalq cannot use is refused with one line naming the setting and the fix, before any
connection is tried; the supported forms are few, so they are listed in the message. Nothing
evalq prints or logs shows a URL's password: `masked` replaces it with ***, and
`mask_log_records` applies it to every log record of the process.
"""

from __future__ import annotations

import logging
import re
import threading
from urllib.parse import urlsplit

from evalq.errors import UserError

DATABASE_FORMS = "sqlite:///path/to/evalq.db or postgresql://user@host/db"
BROKER_FORMS = "redis://host:6379/0 or rediss://host:6380/0 (unset it for the embedded default)"

#: scheme://user:PASSWORD@ (user may be empty, as in redis://:PASSWORD@host)
_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)[^\s@]+@")
MASK = "***"


def masked(text: str) -> str:
    """`text` with the password of every URL in it replaced by ***."""
    return _PASSWORD.sub(lambda m: f"{m.group(1)}{MASK}@", text) if "://" in text else text


_factory_lock = threading.Lock()


def mask_log_records() -> None:
    """Every log record this process makes from now on has its URLs' passwords masked
    (its message is formatted once, here). Installed once however often it is asked for."""
    with _factory_lock:
        make = logging.getLogRecordFactory()
        if getattr(make, "evalq_masks_urls", False):
            return

        def record(*args, **kwargs) -> logging.LogRecord:
            made = make(*args, **kwargs)
            try:
                message = made.getMessage()
            except Exception:  # noqa: BLE001 - a bad format string: logging reports it itself
                return made
            if "://" in message:
                made.msg, made.args = masked(message), None
            return made

        record.evalq_masks_urls = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(record)


def normalized_database_url(url: str) -> str:
    """The URL SQLAlchemy should open: plain postgresql:// and postgres:// use psycopg2, the
    driver evalq ships (SQLAlchemy 2.1 would otherwise pick psycopg 3)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise UserError(f"{masked(url)!r} is not a database URL", field="EVALQ_DATABASE_URL",
                        fix=f"use {DATABASE_FORMS}")
    scheme = scheme.lower()
    if scheme in ("postgresql", "postgres", "postgresql+psycopg2"):
        return f"postgresql+psycopg2://{rest}"
    if scheme in ("sqlite", "sqlite+pysqlite"):
        return f"sqlite://{rest}"
    raise UserError(f"database '{scheme}' is not supported", field="EVALQ_DATABASE_URL",
                    fix=f"use {DATABASE_FORMS}")


def check_broker_url(url: str) -> str:
    """A broker URL evalq can use: Redis (TLS or not), or the embedded filesystem transport."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "filesystem":
        return url
    if scheme not in ("redis", "rediss"):
        raise UserError(f"broker '{scheme or masked(url)}' is not supported",
                        field="EVALQ_BROKER_URL",
                        fix=f"use {BROKER_FORMS}")
    if not parts.hostname:
        raise UserError(f"{masked(url)!r} names no host", field="EVALQ_BROKER_URL",
                        fix=f"use {BROKER_FORMS}")
    database = parts.path.strip("/")
    if database and not database.isdigit():
        raise UserError(f"'{database}' is not a Redis database number", field="EVALQ_BROKER_URL",
                        fix="end the URL with /0 (or another database number)")
    return url
