"""Every JSON text evalq writes, strict: `dumps`, and `json.dumps(obj, indent=2)` byte for byte
at the C encoder's speed (`indented_pieces`).

Strict means any parser reads it: NaN and the infinities are refused (ValueError) rather than
written as the bare words no JSON parser but Python's accepts, and a lone surrogate (an agent's
file name with a byte that is not UTF-8, a \\udcff escape in its own JSON) is written as the
visible text \\udcff, since a strict parser or PostgreSQL refuses it as an escape.

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
import math
import re
from itertools import chain
from typing import Any, Iterator, Optional

try:
    from _json import make_encoder as c_make_encoder
except ImportError:  # pragma: no cover - CPython always has _json
    c_make_encoder = None
try:
    import orjson
except ImportError:  # pragma: no cover - a dependency; without it rows take the C encoder
    orjson = None

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
                                        None, ": ", ",\n" + " " * key, False, False, False)
    return _encoders[key]


def _flat(values) -> bool:
    """No value is a container; by exact type first (C speed), isinstance only for others."""
    types = set(map(type, values))
    return types <= _PLAIN or not any(isinstance(v, _CONTAINERS) for v in values)


def _flat_rows(rows) -> Optional[set]:
    """The types of the values if every row is a non-empty dict of plain values, else None."""
    if not all(type(row) is dict and row for row in rows):
        return None
    kinds = set(map(type, chain.from_iterable(map(dict.values, rows))))
    if kinds <= _PLAIN or all(_flat(row.values()) for row in rows):
        return kinds
    return None


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
        elif (kinds := _flat_rows(obj)) is not None:
            yield from _rows(obj, level, indent, kinds)
        else:
            yield "["
            for i, value in enumerate(obj):
                yield ("\n" if i == 0 else ",\n") + inner
                yield from _encode(value, level + 1, indent)
            yield "\n" + pad + "]"
    else:
        yield "".join(_c_encoder(0, indent)([obj], 0))[1:-1]


def _rows(rows: list[dict], level: int, indent: int, kinds: set) -> Iterator[str]:
    """A list of non-empty flat dicts holding values of `kinds`, ROWS_PER_PIECE rows a piece,
    each piece by orjson where it gives json.dumps's very text (_orjson_rows), else by the C
    encoder."""
    fast = orjson is not None and indent == 2 and kinds <= _ORJSON_PLAIN | {float}
    yield "["
    for at in range(0, len(rows), ROWS_PER_PIECE):
        chunk = rows[at:at + ROWS_PER_PIECE]
        text = _orjson_rows(chunk, level, float in kinds) if fast else None
        yield ("\n" if at == 0 else ",\n") + (text or _c_rows(chunk, level, indent))
    yield "\n" + " " * (level * indent) + "]"


def _c_rows(rows: list[dict], level: int, indent: int) -> str:
    """The rows as json.dumps would indent them inside a list at `level`, brackets left out,
    by one C call: encoded with the dicts' item separator, a separator followed by '{' can
    only sit between two rows (a row's items start with '"', and a raw newline never occurs
    inside encoded text), so one replace re-indents."""
    row_pad = " " * ((level + 1) * indent)
    item_pad = " " * ((level + 2) * indent)
    between = "\n" + row_pad + "},\n" + row_pad + "{\n" + item_pad
    text = "".join(_c_encoder(level + 2, indent)(rows, 0))
    return (row_pad + "{\n" + item_pad + text[2:-2].replace("},\n" + item_pad + "{", between)
            + "\n" + row_pad + "}")


_ORJSON_PLAIN = {str, int, bool, type(None)}  # exact types orjson writes as json.dumps does


def _orjson_rows(rows: list[dict], level: int, floats: bool) -> Optional[str]:
    """What _c_rows gives at indent 2, several times faster, or None where orjson's text
    would differ.

    Where orjson writes a value otherwise than json.dumps, the piece goes to the C encoder:
    NaN and the infinities (orjson: null), floats under 1e-4 (1e-05 as 0.00001), non-ASCII
    characters and DEL (unescaped), keys that are not str and ints past 64 bits (refused).
    The caller has checked the values' types; the floats are checked here one by one, the
    text by two byte scans. The rows are wrapped in `level` lists so that orjson indents
    them where they sit, and the wrapping is cut off the text.
    tests/report/test_json_text.py compares both paths with json.dumps.
    """
    if floats and not all(v == 0.0 or 1e-4 <= abs(v) < _INF
                          for v in chain.from_iterable(map(dict.values, rows))
                          if type(v) is float):
        return None  # NaN fails every comparison; small floats and infinities fail the range
    wrapped: Any = rows
    for _ in range(level):
        wrapped = [wrapped]
    try:
        data = orjson.dumps(wrapped, option=orjson.OPT_INDENT_2)
    except (TypeError, orjson.JSONEncodeError):  # a key that is not str, an int past 64 bits
        return None
    if not data.isascii() or b"\x7f" in data:
        return None
    cut = sum(2 * depth + 2 for depth in range(level + 1))  # "[\n", "  [\n" ... at the head,
    return data[cut:len(data) - cut].decode("ascii")  # ... "\n  ]", "\n]" at the tail


_INF = float("inf")


#: a backslash escape of JSON text: a surrogate pair (kept), a lone surrogate, any other
_ESCAPE = re.compile(r"\\(?:ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|u(d[89a-f][0-9a-f]{2})|.)")


def _lone_as_text(match: re.Match) -> str:
    return match.group(0) if match.group(1) is None else "\\\\u" + match.group(1)


def valid_escapes(text: str) -> str:
    """ASCII JSON text with every lone-surrogate escape made the literal text it showed
    (the escaped backslashes before it are consumed as escapes of their own)."""
    return _ESCAPE.sub(_lone_as_text, text) if "\\ud" in text else text


def finite(value: Any) -> Any:
    """A copy of JSON-like data read from an agent, NaN and the infinities (which Python's
    parser accepts) made None, so that strict dumps can write it; iterative, as agent data
    may nest as deep as its parser allowed."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        item, parent, key = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            item = None
        elif isinstance(item, dict):
            copy: Any = dict.fromkeys(item)  # the keys in their order, filled below
            stack.extend((v, copy, k) for k, v in item.items())
            item = copy
        elif isinstance(item, (list, tuple)):
            copy = [None] * len(item)
            stack.extend((v, copy, i) for i, v in enumerate(item))
            item = copy
        parent[key] = item
    return root[0]


def dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps, strict: ASCII, NaN and infinities refused, lone surrogates as text."""
    kwargs.pop("ensure_ascii", None)
    return valid_escapes(json.dumps(obj, allow_nan=False, **kwargs))


def indented_pieces(obj: Any, indent: int = 2) -> Iterator[str]:
    """dumps(obj, indent=indent) as consecutive pieces of text (each whole JSON tokens, so
    an escape is never cut between two)."""
    if c_make_encoder is None:
        yield dumps(obj, indent=indent)
        return
    for piece in _encode(obj, 0, indent):
        yield valid_escapes(piece)


def dumps_indented(obj: Any, indent: int = 2) -> str:
    """Exactly dumps(obj, indent=indent) (ensure_ascii, NaN refused, insertion order)."""
    return "".join(indented_pieces(obj, indent))
