"""Inserting many new rows at once, skipping those already there.

A study of 100,000 trials inserts 100,000 trial rows and as many attempt rows before its first
message goes out. On PostgreSQL, batched INSERT statements spend most of that time parsing and
planning; COPY is several times faster (bench/). The rows are usually all new (a study's first
launch), so they are COPied straight into the table inside a savepoint; if any already exists,
the savepoint is rolled back and they go through a temporary table and one INSERT ... SELECT
... ON CONFLICT DO NOTHING instead. Other databases get batched INSERT ... ON CONFLICT DO
NOTHING. `copy_rows` is the straight COPY, for append-only tables (events).
"""

from __future__ import annotations

import io
import uuid
from typing import Any, Sequence

from sqlalchemy import Table
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection
from evalq.report.json_text import dumps

CHUNK = 5000


def insert_missing(conn: Connection, table: Table, rows: Sequence[dict[str, Any]],
                   conflict: Sequence[str] | None = None) -> None:
    """Insert `rows` (plain dicts, same keys) in the caller's transaction; existing keys are kept.

    `conflict` names the unique columns that identify an existing row (the primary key if None).
    """
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        from psycopg2.errors import UniqueViolation

        try:
            with conn.begin_nested():
                copy_rows(conn, table, rows)
            return
        except UniqueViolation:  # some exist: the savepoint is undone, insert what is missing
            pass
        _copy_then_insert(conn, table, rows, conflict)
        return
    statement = sqlite.insert(table).on_conflict_do_nothing(index_elements=conflict)
    for start in range(0, len(rows), CHUNK):
        conn.execute(statement, list(rows[start:start + CHUNK]))


def copy_rows(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """COPY `rows` (plain dicts, same keys) into `table` on PostgreSQL, in the caller's
    transaction; a duplicate key fails the COPY as an INSERT would."""
    if rows:
        _copy(conn, table.name, rows)


def _copy(conn: Connection, into: str, rows: Sequence[dict[str, Any]]) -> None:
    columns = list(rows[0])
    names = ", ".join(f'"{c}"' for c in columns)
    texts = [_column_text([row[c] for row in rows]) for c in columns]
    # bytes, not StringIO: that keeps 4 bytes a character, and JSON columns make chunks large
    data = ("\n".join(map("\t".join, zip(*texts))) + "\n").encode()
    del texts
    cursor = conn.connection.cursor()
    try:  # read in one piece: each read takes the GIL, which a launch's other thread holds
        # for up to 5 ms at a time while it builds messages (bench/ scale)
        cursor.copy_expert(f'COPY "{into}" ({names}) FROM STDIN', io.BytesIO(data),
                           size=max(8192, len(data)))
    finally:
        cursor.close()


def _copy_then_insert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]],
                      conflict: Sequence[str] | None) -> None:
    columns = list(rows[0])
    staging = f"evalq_staging_{uuid.uuid4().hex[:12]}"
    names = ", ".join(f'"{c}"' for c in columns)
    target = ", ".join(f'"{c}"' for c in conflict) if conflict else \
        ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
    cursor = conn.connection.cursor()
    try:
        cursor.execute(f'CREATE TEMP TABLE "{staging}" (LIKE "{table.name}" INCLUDING DEFAULTS)')
        _copy(conn, staging, rows)
        cursor.execute(f'INSERT INTO "{table.name}" ({names}) SELECT {names} FROM "{staging}" '
                       f"ON CONFLICT ({target}) DO NOTHING")
        cursor.execute(f'DROP TABLE "{staging}"')
    finally:
        cursor.close()


def _column_text(values: list[Any]) -> list[str]:
    """One column in COPY's text format, converted a column at a time: most columns are plain
    text or numbers throughout, and a call per field costs more than the COPY (bench/)."""
    kinds = set(map(type, values))
    if kinds <= {str}:
        joined = "".join(values)
        if not any(ch in joined for ch in "\\\t\n\r"):
            return values
    if kinds <= {int, float}:
        return list(map(repr, values))
    return [_copy_text(v) for v in values]


def _copy_text(value: Any) -> str:
    """One field in COPY's text format: NULL as \\N, JSON as its text, and backslash, tab and
    newlines escaped."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (dict, list)):  # a JSON column; COPY parses its text
        value = dumps(value)
    if not isinstance(value, str):
        raise TypeError(f"bulk insert takes str, int, float, bool, None or JSON (dict, list), "
                        f"not {type(value)}")
    return (value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r"))
