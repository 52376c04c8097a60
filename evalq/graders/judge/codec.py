"""The data-only wire format between judge and subject: JSON lines, values tagged by kind.

Only data crosses: None, bools, numbers, strings, lists, and tagged tuples, dicts, sets,
bytes, paths, dates and opaque handles. Nothing is unpickled and no code is ever sent, so a
subject can answer only with values the judge then compares in its own process. Both sides
import this one module (the subject gets a read-only copy from evalq's installed package).
"""

import base64
import datetime
import json
import pathlib

#: The longest line either side accepts; a subject sending more is treated as broken.
MAX_LINE = 16 * 1024 * 1024
#: Distinct numbers or tuples of one answer that may share one hash: ints are hashed by value
#: (multiples of 2**61 - 1 all hash to 0), and a set or dict of many values of one hash takes
#: quadratic time to build, in the decoding here or in a hidden test's own set(answer).
MAX_SAME_HASH = 64


class Unencodable(Exception):
    """A value with no data form; the subject keeps it and sends a handle instead."""


def encode(value, to_handle=None):
    """A JSON-ready form of value; `to_handle(obj)` -> handle id for objects that are not data."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value if type(value) in (int, float) else to_handle_or_fail(value, to_handle)
    kind = type(value)
    if kind is list:
        return [encode(v, to_handle) for v in value]
    if kind is tuple:
        return {"$t": [encode(v, to_handle) for v in value]}
    if kind in (set, frozenset):
        return {"$s": [encode(v, to_handle) for v in value]}
    if kind is dict:
        return {"$d": [[encode(k, to_handle), encode(v, to_handle)] for k, v in value.items()]}
    if kind is bytes:
        return {"$b": base64.b64encode(value).decode("ascii")}
    if kind is datetime.datetime:
        return {"$dt": value.isoformat()}
    if kind is datetime.date:
        return {"$date": value.isoformat()}
    if kind is datetime.timedelta:
        return {"$td": value.total_seconds()}
    if isinstance(value, pathlib.PurePath):
        return {"$p": str(value)}
    return to_handle_or_fail(value, to_handle)


def to_handle_or_fail(value, to_handle):
    if to_handle is None:
        raise Unencodable(f"{type(value).__name__} cannot cross as data")
    return {"$h": to_handle(value), "type": type(value).__name__}


class HashGuard:
    """Refuses an answer with over MAX_SAME_HASH distinct numbers or tuples of one hash; sees
    each value before any set or dict holds it (decode builds the inner values first)."""

    def __init__(self, limit: int = MAX_SAME_HASH):
        self.limit = limit
        self.by_hash: dict = {}  # hash -> the one value seen with it, or a list of them

    def __call__(self, value):
        if type(value) in (int, float, tuple):
            key = hash(value)
            seen = self.by_hash.get(key, _NONE)
            if seen is _NONE:
                self.by_hash[key] = value
            elif type(seen) is not list:
                if seen != value:
                    self.by_hash[key] = [seen, value]
            elif value not in seen:
                if len(seen) >= self.limit:
                    raise ValueError(f"over {self.limit} distinct values share one hash")
                seen.append(value)
        return value


_NONE = object()


def decode(data, from_handle, path=pathlib.PurePosixPath, guard=lambda value: value):
    """The value of an encoded form; `from_handle(id, type_name)` makes a handle's stand-in;
    `guard` sees every value made (a HashGuard on the judge's side) and returns it."""
    if isinstance(data, list):
        return [decode(v, from_handle, path, guard) for v in data]
    if not isinstance(data, dict):
        return guard(data)
    if "$h" in data:
        return from_handle(data["$h"], data.get("type", "object"))
    (tag, body), = data.items()
    if tag == "$t":
        return guard(tuple(decode(v, from_handle, path, guard) for v in body))
    if tag == "$s":
        return {decode(v, from_handle, path, guard) for v in body}
    if tag == "$d":
        return {guard(_key(decode(k, from_handle, path, guard))):
                decode(v, from_handle, path, guard) for k, v in body}
    if tag == "$b":
        return base64.b64decode(body)
    if tag == "$dt":
        return datetime.datetime.fromisoformat(body)
    if tag == "$date":
        return datetime.date.fromisoformat(body)
    if tag == "$td":
        return datetime.timedelta(seconds=body)
    if tag == "$num":  # NaN and the infinities, from a subject whose JSON has none
        return guard(float(body))
    if tag == "$p":
        return path(body)
    raise ValueError(f"unknown tag {tag!r}")


def _key(value):
    return tuple(value) if isinstance(value, list) else value


def connect(spec: str):
    """The channel socket named by the grader: "fd:N" (inherited) or "unix:PATH"."""
    import socket

    kind, _, where = spec.partition(":")
    if kind == "fd":
        return socket.socket(fileno=int(where))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(where)
    return sock


def dumps(message) -> bytes:
    return json.dumps(message, separators=(",", ":"), allow_nan=True).encode("utf-8") + b"\n"


def loads(line: bytes):
    return json.loads(line.decode("utf-8"))
