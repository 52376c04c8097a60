"""Bring an existing results database up to the current tables, in place.

`create_all` makes missing tables but leaves existing ones as they are, so a database made by an
earlier evalq lacks the columns and indexes added since (attempts.updated_at, say) and every
write that sets them fails. Columns evalq adds are nullable or carry a default, so adding them
never rewrites data; nothing is ever dropped or altered.
"""

from __future__ import annotations

from sqlalchemy import Column, inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateIndex, MetaData


def add_missing(engine: Engine, metadata: MetaData) -> list[str]:
    """Add what `metadata` has and the database lacks; returns what was added ("table.column")."""
    added: list[str] = []
    with engine.begin() as conn:
        present = inspect(conn)
        tables = set(present.get_table_names())
        for table in metadata.sorted_tables:
            if table.name not in tables:
                continue  # create_all makes it whole
            have = _column_names(conn, present, table.name)
            for column in table.columns:
                if column.name not in have:
                    conn.execute(text(_add_column_sql(conn, table.name, column)))
                    added.append(f"{table.name}.{column.name}")
            indexed = {i["name"] for i in present.get_indexes(table.name)}
            for index in table.indexes:
                if index.name not in indexed:
                    conn.execute(CreateIndex(index, if_not_exists=True))
                    added.append(f"{table.name}:{index.name}")
    return added


def _column_names(conn: Connection, present, table: str) -> set[str]:
    """The table's columns. On PostgreSQL from information_schema: the inspector's query waits
    for any lock on the table, and a worker starting while another session holds one (a
    migration, a long transaction) must not hang in its start-up check."""
    if conn.dialect.name == "postgresql":
        rows = conn.execute(text("SELECT column_name FROM information_schema.columns WHERE "
                                 "table_schema = current_schema() AND table_name = :t"),
                            {"t": table})
        return {row[0] for row in rows}
    return {c["name"] for c in present.get_columns(table)}


def _add_column_sql(conn: Connection, table: str, column: Column) -> str:
    kind = column.type.compile(dialect=conn.dialect)
    quote = conn.dialect.identifier_preparer.quote
    sql = f"ALTER TABLE {quote(table)} ADD COLUMN {quote(column.name)} {kind}"
    default = column.default.arg if column.default is not None and column.default.is_scalar \
        else None
    if default is not None:  # a NOT NULL column needs a value for the rows already there
        literal = ("TRUE" if default else "FALSE") if isinstance(default, bool) else repr(default)
        sql += f" DEFAULT {literal}" + ("" if column.nullable else " NOT NULL")
    return sql
