"""Reading JSON Lines input with one-line errors naming the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from evalq.report.json_text import dumps
from evalq.errors import UserError


def _refuse_constant(name: str):
    raise json.JSONDecodeError(f"{name} is not a JSON number", name, 0)


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any] | UserError]]:
    """(line number, object or the error for that line), read line by line so a 100,000-row
    file is never held whole; a caller collecting every bad row keeps going past an error."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UserError(f"cannot read it: {exc.strerror}", file=path,
                        fix="give the path of an existing JSON Lines file") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line, parse_constant=_refuse_constant)
            except json.JSONDecodeError as exc:
                yield number, UserError(f"line {number} is not JSON ({exc.msg})", file=path,
                                        fix="write one JSON object per line")
                continue
            except UnicodeDecodeError:
                yield number, UserError(f"line {number} is not UTF-8", file=path,
                                        fix="write the file as UTF-8")
                continue
            if not isinstance(row, dict):
                yield number, UserError(f"line {number} is not a JSON object", file=path,
                                        fix="write one JSON object per line")
                continue
            yield number, row


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; the first bad line is raised."""
    for number, row in iter_jsonl(path):
        if isinstance(row, UserError):
            raise row
        yield number, row


def require(row: dict, key: str, kinds: tuple[type, ...], path: Path, number: int,
            nullable: bool = False) -> Any:
    """row[key] if present and of the given type (bool is never taken for int)."""
    if key not in row:
        raise UserError(f"line {number} has no '{key}'", file=path, field=key,
                        fix=f"add \"{key}\" to every row (the adjudicated result row)")
    value = row[key]
    if value is None and nullable:
        return None
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        names = " or ".join(k.__name__ for k in kinds) + (" or null" if nullable else "")
        raise UserError(f"line {number}: '{key}' is {value!r}, not {names}", file=path,
                        field=key, fix=f"give {key} as {names}")
    return value


def write_jsonl(rows, path: str | Path) -> int:
    """Write rows atomically; returns how many."""
    from evalq.fileio import write_text_atomic

    rows = list(rows)
    write_text_atomic(Path(path), "".join(dumps(r, sort_keys=False) + "\n" for r in rows))
    return len(rows)
