"""`json.dumps(obj, indent=2)`, byte for byte, at the C encoder's speed.

With an indent, the standard library falls back to its pure-Python encoder: for a report of
100,000 trial rows that is most of the report's time, and its list of millions of text pieces
most of its memory (bench/ report). Containers of plain values (the trial rows, each a flat
dict) are encoded by the C encoder with the indented item separator; only the few containers
that hold containers go through Python. The text comes in pieces (`indented_pieces`), a few
thousand rows each, so a writer need not hold 100 MiB of report at once.
tests/report/test_json_text.py compares the two.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

try:
    from _json import make_encoder as c_make_encoder
except ImportError:  # pragma: no cover - CPython always has _json
    c_make_encoder = None

_CONTAINERS = (dict, list, tuple)
_PLAIN = {str, int, float, bool, type(None)}  # exact types: a subclass may be a container
_default = json.JSONEncoder().default  # raises TypeError for what JSON cannot hold
_encoders: dict[int, Any] = {}
ROWS_PER_PIECE = 2000


def _c_encoder(level: int, indent: int):
    """A C encoder whose item separator is a newline and the indent of items at `level`."""
    key = level * indent
    if key not in _encoders:
        _encoders[key] = c_make_encoder(None, _default, json.encoder.encode_basestring_ascii,
                                        None, ": ", ",\n" + " " * key, False, False, True)
    return _encoders[key]


def _flat(values) -> bool:
    """No value is a container; by exact type first (C speed), isinstance only for others."""
    types = set(map(type, values))
    return types <= _PLAIN or not any(isinstance(v, _CONTAINERS) for v in values)


def _flat_rows(rows) -> bool:
    """Every row is a non-empty dict of plain values."""
    if not all(type(row) is dict and row for row in rows):
        return False
    types: set = set()
    for row in rows:
        types.update(map(type, row.values()))
    return types <= _PLAIN or all(_flat(row.values()) for row in rows)


def _encode(obj: Any, level: int, indent: int) -> Iterator[str]:
    pad, inner = " " * (level * indent), " " * ((level + 1) * indent)
    if isinstance(obj, dict):
        if not obj:
            yield "{}"
        elif _flat(obj.values()):
            text = "".join(_c_encoder(level + 1, indent)(obj, 0))
            yield "{\n" + inner + text[1:-1] + "\n" + pad + "}"
        else:
            yield "{"
            first = True
            for key, value in obj.items():
                yield ("\n" if first else ",\n") + inner
                first = False
                yield "".join(_c_encoder(0, indent)({key: 0}, 0))[1:-4] + ": "
                yield from _encode(value, level + 1, indent)
            yield "\n" + pad + "}"
    elif isinstance(obj, (list, tuple)):
        if not obj:
            yield "[]"
        elif _flat(obj):
            text = "".join(_c_encoder(level + 1, indent)(obj, 0))
            yield "[\n" + inner + text[1:-1] + "\n" + pad + "]"
        elif _flat_rows(obj):
            yield from _rows(obj, level, indent)
        else:
            yield "["
            for i, value in enumerate(obj):
                yield ("\n" if i == 0 else ",\n") + inner
                yield from _encode(value, level + 1, indent)
            yield "\n" + pad + "]"
    else:
        yield "".join(_c_encoder(0, indent)([obj], 0))[1:-1]


def _rows(rows: list[dict], level: int, indent: int) -> Iterator[str]:
    """A list of non-empty flat dicts, one C call a piece: encoded with the dicts' item
    separator, a separator followed by '{' can only sit between two rows (a row's items start
    with '"', and a raw newline never occurs inside encoded text), so one replace re-indents."""
    pad, row_pad = " " * (level * indent), " " * ((level + 1) * indent)
    item_pad = " " * ((level + 2) * indent)
    between = "\n" + row_pad + "},\n" + row_pad + "{\n" + item_pad
    yield "[\n" + row_pad + "{\n" + item_pad
    for at in range(0, len(rows), ROWS_PER_PIECE):
        text = "".join(_c_encoder(level + 2, indent)(rows[at:at + ROWS_PER_PIECE], 0))
        yield (between if at else "") + text[2:-2].replace("},\n" + item_pad + "{", between)
    yield "\n" + row_pad + "}\n" + pad + "]"


def indented_pieces(obj: Any, indent: int = 2) -> Iterator[str]:
    """json.dumps(obj, indent=indent) as consecutive pieces of text."""
    if c_make_encoder is None:
        yield json.dumps(obj, indent=indent)
        return
    yield from _encode(obj, 0, indent)


def dumps_indented(obj: Any, indent: int = 2) -> str:
    """Exactly json.dumps(obj, indent=indent) (ensure_ascii, NaN allowed, insertion order)."""
    return "".join(indented_pieces(obj, indent))
