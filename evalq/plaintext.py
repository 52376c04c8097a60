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


def terminal_text(text: Optional[str]) -> str:
    """`text` safe to print on a terminal, its lines kept: every control or format character
    but newline and tab (an escape sequence, a carriage return that overwrites the line, a
    bidi override) shown as a visible escape such as \\x1b instead of acting."""
    if not text:
        return ""
    return "".join(ch if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf")
                   else (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
                   for ch in str(text))
