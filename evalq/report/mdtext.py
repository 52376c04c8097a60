"""Text that is not evalq's own, made inert in the Markdown report.

A model name read off the wire, a stop reason, a stderr tail, a grader's evidence, a condition
or task name: any of them may carry Markdown or HTML (`<script>`, `[x](javascript:…)`, a pipe
that splits a table cell, a newline that starts a line of its choosing). Backslash escapes are
not enough for every viewer (GitHub links `a\\@b.com` as an e-mail address all the same), so
such text is kept as it is only when it is plainly inert (words, numbers and a few harmless
signs); anything else goes in a code span, which every Markdown viewer shows literally. In a
table, the span's pipes are escaped, as GitHub's tables and markdown-it read them.
"""

from __future__ import annotations

import re
from typing import Optional

from evalq.plaintext import one_line

#: letters, digits, spaces and signs that form no Markdown, HTML or link on their own
_ALLOWED = re.compile(r"[\w ,;()'\"%=+\-/?:.…×]+")
#: what would still start markup or a link: '_' not inside a word (emphasis), '.' before a
#: letter (a domain a viewer links), ':' before anything but a space (a scheme), '//', and
#: a start that is not a letter or digit, or that reads as a list item ('1. ', '2) ')
_UNSAFE = re.compile(r"(?<![^\W_])_|_(?![^\W_])|\.(?=[^\d\s])|:(?=\S)|//|^[\W_]|^\d+[.)](?:\s|$)")


def inert(text: Optional[str], limit: Optional[int] = None, table: bool = True) -> str:
    """`text` on one line, at most `limit` characters, shown literally by any Markdown viewer:
    as it is when plainly inert, else in a code span. `table`: it goes in a table cell (a
    pipe is escaped there; outside a table the escape would show). '' for no text."""
    flat = one_line(text, limit)
    if not flat:
        return ""
    if _ALLOWED.fullmatch(flat) and not _UNSAFE.search(flat):
        return flat
    return code_span(flat, table)


def code_span(flat: str, table: bool = True) -> str:
    """One line of text as a code span: fenced by more backticks than it holds in a row,
    padded when it starts or ends with a backtick (or a space, which a span would eat)."""
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    if flat[0] in "` " or flat[-1] in "` ":
        flat = f" {flat} "
    if table:
        flat = flat.replace("|", "\\|")
    return f"{fence}{flat}{fence}"
