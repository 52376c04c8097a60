"""Reading TOML, YAML and JSON documents with one-line errors; writing files atomically."""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Iterable

import yaml

from evalq.report.json_text import dumps
from evalq.errors import UserError


def read_text(path: Path, fix: str = "check the path") -> str:
    """A user's text file as str; missing, unreadable or non-UTF-8 is one line, not a traceback."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UserError("file not found", file=path, fix=fix) from None
    except OSError as exc:
        raise UserError(f"cannot read it: {exc.strerror or exc}", file=path, fix=fix) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start} cannot be decoded: a binary file?)",
                        file=path, fix="give a UTF-8 text file") from None


def read_json_object(path: Path, what: str, fix: str) -> dict[str, Any]:
    """A JSON file that must hold one object (a lock, a report): anything else is refused."""
    try:
        data = json.loads(read_text(path, fix))
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} is not valid JSON ({exc.msg}, line {exc.lineno})", file=path,
                        fix=fix) from None
    if not isinstance(data, dict):
        raise UserError(f"{what} must be a JSON object, not {type(data).__name__}", file=path,
                        fix=fix)
    return data


def load_document(path: Path) -> dict[str, Any]:
    """Parse a .toml, .yaml/.yml or .json file; syntax errors name the file and the line."""
    if not path.is_file():
        raise UserError("file not found", file=path, fix="check the path")
    text = read_text(path)
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise UserError(f"unknown file type '{suffix}'", file=path,
                            fix="use .toml, .yaml, .yml or .json")
    except (tomllib.TOMLDecodeError, yaml.YAMLError, json.JSONDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"cannot parse: {first}", file=path, fix="correct the syntax") from None
    if not isinstance(data, dict):
        raise UserError("the document must be a table/mapping at the top level", file=path)
    return data


def validation_error(exc, path: Path) -> UserError:
    """Turn the first pydantic error into one line with the field path and a hint."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or None
    kind = err.get("type", "")
    fix = {
        "missing": "add this field",
        "extra_forbidden": "remove this field or check its spelling",
    }.get(kind, "see the documented format")
    return UserError(err.get("msg", "invalid value"), file=path, field=loc, fix=fix)


def write_text_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write `text` to `path` so a reader sees the old file or the new one, never half of it.

    `text` may come in pieces (a 100 MiB report), written as they come."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # an agent's text may hold a lone surrogate (a name's byte that is not UTF-8): it is
        # written as its escape, so every file evalq writes is valid UTF-8
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.writelines([text] if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Bytes to `path`, atomically as write_text_atomic does (an artifact fetched to a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any, *, sort_keys: bool = False) -> None:
    """Indented JSON with a final newline, written atomically (locks, reports)."""
    write_text_atomic(path, dumps(data, indent=2, sort_keys=sort_keys) + "\n")
