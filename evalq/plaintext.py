"""Text that an agent may have written, made safe to show on one line of a report or terminal.

A failure's reason or a run's stop reason can carry the agent's own words (its output, a test
name it printed). Shown raw, a newline would start a line of the Markdown report of the
agent's choosing (a heading, a claims line, a table row), an escape sequence would rewrite the
operator's terminal, and a bidirectional override would make the text read other than it is.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

#: Unicode's bidirectional controls (embeddings, overrides, isolates and marks)
_BIDI = dict.fromkeys(map(ord, "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                "\u2066\u2067\u2068\u2069"), " ")
_SPACE = re.compile(r"\s+")


def one_line(text: Optional[str], limit: Optional[int] = None) -> str:
    """`text` on one line: every control or format character (C0, C1, DEL, bidi) a space,
    runs of white space one space, cut to `limit` characters with an ellipsis."""
    if not text:
        return ""
    cleaned = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf") else ch
                      for ch in str(text).translate(_BIDI))
    flat = _SPACE.sub(" ", cleaned).strip()
    if limit is not None and len(flat) > limit:
        return flat[:limit - 1] + "…"
    return flat


def _escape_char(ch: str) -> str:
    """A character as it shows in an escaped name: itself, or a backslash escape."""
    if ch == "\\":
        return "\\\\"
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
            else f"\\U{code:08x}"
    return ch


def escaped_name(name: str) -> str:
    """A file name an agent chose, as valid UTF-8 on one line: bytes that are not UTF-8 and
    control, format (bidi) and line-separator characters as backslash escapes, a backslash
    doubled (so the escaped form names one file only). Names come from the file system with
    undecodable bytes as lone surrogates, which no UTF-8 encoder or JSON database accepts."""
    if name.isascii() and name.isprintable() and "\\" not in name:
        return name
    return "".join(map(_escape_char, name))


def valid_text(text: str) -> str:
    """`text` with every lone surrogate (a JSON \\udcff escape an agent wrote, a file name's
    undecodable byte) as a visible escape, so it encodes as UTF-8 and any JSON parser, or
    PostgreSQL, accepts it."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def terminal_text(text: Optional[str]) -> str:
    """`text` safe to print on a terminal, its lines kept: every control or format character
    but newline and tab (an escape sequence, a carriage return that overwrites the line, a
    bidi override) shown as a visible escape such as \\x1b instead of acting."""
    if not text:
        return ""
    return "".join(ch if ch in "\n\t\\" else _escape_char(ch) for ch in str(text))
