"""Reading JSON Lines input with one-line errors naming the file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from evalq.errors import UserError
from evalq.fileio import read_text


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; anything but a JSON object is refused."""
    path = Path(path)
    text = read_text(path, "give the path of an existing JSON Lines file")
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"line {number} is not JSON ({exc.msg})", file=path,
                            fix="write one JSON object per line") from None
        if not isinstance(row, dict):
            raise UserError(f"line {number} is not a JSON object", file=path,
                            fix="write one JSON object per line")
        yield number, row


def require(row: dict, key: str, kinds: tuple[type, ...], path: Path, number: int,
            nullable: bool = False) -> Any:
    """row[key] if present and of the given type (bool is never taken for int)."""
    if key not in row:
        raise UserError(f"line {number} has no '{key}'", file=path, field=key,
                        fix=f"add \"{key}\" to every row (seed 003 result schema)")
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
    write_text_atomic(Path(path), "".join(json.dumps(r, sort_keys=False) + "\n" for r in rows))
    return len(rows)
