"""The judge's bounds on what it makes of the subject's answers: explanations and report texts.

When an assert fails, pytest explains it in the judge: it NFD-normalises two strings (quadratic
in a run of combining marks), line-diffs them with ndiff, pretty-prints and diffs containers.
Those operands are what the subject answered, so a wrong answer shaped for that (a long run of
combining marks, millions of short lines, a huge container of near-equal items) would keep the
judge busy past its time or memory limit: a grading_failure instead of `incorrect`. A
comparison with an operand past small sizes, or of a kind pytest's explanation is not known to
handle cheaply, is explained here instead, in a few lines (types, sizes, the first difference
with a little context, digests), by steps linear in the operands and mostly done in C.

Imported by the judge's boot once pytest is importable; nothing here imports pytest itself.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import fractions
import hashlib
import itertools
import pathlib
import reprlib
import unicodedata

#: A failed check's report text (traceback, assertion explanation, the subject's exception
#: message) is cut to this many characters, head and tail kept: it holds what the subject sent,
#: and the report file and the judge's output have caps past which the grade is a failure.
REPORT_TEXT_CHARS = 4000
#: Past any of these, an operand gets the judge's summary rather than pytest's explanation
#: (pytest's work under them, at up to -v, is a few milliseconds at worst).
MAX_CHARS = 2000  # characters (or bytes) of one string, and...
MAX_TOTAL_CHARS = 10_000  # ...of all the strings in one operand
MAX_LINES = 64  # lines of one string
MAX_MARK_RUN = 16  # combining marks in a row (NFD sorts each run by insertion)
MAX_VALUES = 200  # values in one operand, counted through nested containers, keys included
MAX_DEPTH = 8  # containers within containers
#: Verbosity the judge's pytest runs at, at most: -vv turns off pytest's repr limits and its
#: truncation of explanations and of locals.
MAX_VERBOSITY = 1
#: characters of context either side of a first difference, and of one summary line
CONTEXT = 24
LINE_CHARS = 240
#: examples shown of the keys or items only one side has
EXAMPLES = 3

#: plain values whose repr pytest bounds (and whose comparison is cheap)
SCALARS = (type(None), bool, int, float, complex, decimal.Decimal, fractions.Fraction,
           datetime.date, datetime.time, datetime.timedelta, pathlib.PurePath)
CONTAINERS = (list, tuple, set, frozenset, dict)
TEXT = (str, bytes, bytearray)

_short_repr = reprlib.Repr()
_short_repr.maxstring = _short_repr.maxother = 60
_short_repr.maxlist = _short_repr.maxtuple = _short_repr.maxset = _short_repr.maxdict = 4
_short_repr.maxlevel = 3


def cut(text: str, limit: int = REPORT_TEXT_CHARS) -> str:
    """`text` cut to about `limit` characters, its head and tail kept."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def why_summarised(value) -> str | None:
    """Why pytest's own explanation of `value` might not be cheap (None: it is). Looks at no
    more than MAX_VALUES values, however large `value` is."""
    stack, seen, chars = [(value, 0)], 0, 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if isinstance(item, TEXT):
            chars += len(item)
            if len(item) > MAX_CHARS or chars > MAX_TOTAL_CHARS:
                return "long text"
            if item.count("\n" if isinstance(item, str) else b"\n") > MAX_LINES:
                return "text of many lines"
            if isinstance(item, str) and _longest_mark_run(item) > MAX_MARK_RUN:
                return "a long run of combining marks"
        elif isinstance(item, SCALARS):
            continue
        elif isinstance(item, CONTAINERS) or _is_dataclass(item):
            children = _children(item)
            if depth >= MAX_DEPTH:
                return "deep nesting"
            if children is None or seen + len(children) > MAX_VALUES:
                return f"over {MAX_VALUES} values"
            stack.extend((child, depth + 1) for child in children)
        else:
            return f"a value of type {type(item).__name__}"
    return None


def _is_dataclass(item) -> bool:
    return dataclasses.is_dataclass(item) and not isinstance(item, type)


def _children(item) -> list | None:
    """The values directly inside a container or dataclass; None when there are too many."""
    if _is_dataclass(item):
        return [getattr(item, f.name, None) for f in dataclasses.fields(item)]
    if len(item) > MAX_VALUES:
        return None
    if isinstance(item, dict):
        return [v for pair in item.items() for v in pair]
    return list(item)


def _longest_mark_run(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if unicodedata.combining(char) else 0
        longest = max(longest, run)
    return longest


def _is_approx(value) -> bool:
    return type(value).__module__ == "_pytest.python_api" and hasattr(value, "expected")


def summary(op: str, left, right) -> list[str] | None:
    """The judge's own explanation of `left op right` having failed, when either operand is
    one pytest's explanation might not handle cheaply; None otherwise."""
    try:
        reasons = [why_summarised(side) for side in (left, right) if not _is_approx(side)]
    except Exception as exc:  # noqa: BLE001 - a value that cannot be measured is not small
        reasons = [f"a value that could not be measured ({type(exc).__name__})"]
    reason = next((why for why in reasons if why), None)
    if reason is None:
        return None
    lines = [f"{op} failed on {reason}; the judge explains it in short:",
             f"left:  {describe(left)}", f"right: {describe(right)}"]
    try:
        lines += difference(op, left, right)
    except Exception as exc:  # noqa: BLE001 - a comparison that raises: say so, still fail
        lines.append(f"(finding the difference raised {type(exc).__name__})")
    return [_line(line) for line in lines]


def describe(value) -> str:
    """Type, size, digest (of text) and the start of `value`, in one line."""
    kind = type(value).__name__
    if isinstance(value, str):
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return (f"{kind} of {_count(len(value), 'character')} in "
                f"{_count(value.count(chr(10)) + 1, 'line')}, "
                f"sha256 {digest}…, starting {ascii(value[:CONTEXT])}")
    if isinstance(value, (bytes, bytearray)):
        digest = hashlib.sha256(value).hexdigest()[:16]
        return (f"{kind} of {_count(len(value), 'byte')}, sha256 {digest}…, "
                f"starting {bytes(value[:CONTEXT])!r}")
    if isinstance(value, CONTAINERS):
        return f"{kind} of {_count(len(value), 'item')}: {preview(value)}"
    return f"{kind}: {short(value)}"


def preview(value) -> str:
    """The first few items of a container, in its own order (reprlib would sort a whole set
    or dict first)."""
    pairs = isinstance(value, dict)
    first = itertools.islice(value.items() if pairs else value, EXAMPLES)
    parts = [f"{short(k)}: {short(v)}" for k, v in first] if pairs else [short(v) for v in first]
    more = ", …" if len(value) > EXAMPLES else ""
    return f"{', '.join(parts)}{more}"


def short(value) -> str:
    """A repr of at most about LINE_CHARS characters (reprlib's limits), never raising."""
    try:
        text = _short_repr.repr(value)
    except Exception as exc:  # noqa: BLE001 - a repr that fails says so
        text = f"<{type(value).__name__}: repr raised {type(exc).__name__}>"
    return text if len(text) <= LINE_CHARS // 2 else f"{text[:LINE_CHARS // 2]}…"


def difference(op: str, left, right) -> list[str]:
    """Where the two sides differ: the first differing index of two texts or sequences, the
    keys or items only one side has; each found by one linear pass."""
    texts = (isinstance(left, str) and isinstance(right, str)) or (
        isinstance(left, (bytes, bytearray)) and isinstance(right, (bytes, bytearray)))
    if texts:
        if op in ("in", "not in"):
            at = right.find(left)
            return [f"left found in right at index {at}" if at >= 0 else "left not in right"]
        return _text_difference(left, right)
    if op not in ("==", "!="):
        return []
    if isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
        return _sequence_difference(left, right)
    if isinstance(left, dict) and isinstance(right, dict):
        return _dict_difference(left, right)
    if isinstance(left, (set, frozenset)) and isinstance(right, (set, frozenset)):
        return _only_in(left - right, right - left, "item")
    return []


def first_difference(left, right) -> int | None:
    """The first index where two texts differ (None if equal), compared 4096 at a time."""
    end, step, at = min(len(left), len(right)), 4096, 0
    while at < end and left[at:at + step] == right[at:at + step]:
        at += step
    at = min(at, end)
    while at < end and left[at] == right[at]:
        at += 1
    return None if at == end and len(left) == len(right) else at


def _text_difference(left, right) -> list[str]:
    at = first_difference(left, right)
    if at is None:
        return ["the two are equal"]
    start = max(at - CONTEXT, 0)
    show = ascii if isinstance(left, str) else (lambda part: repr(bytes(part)))
    return [f"first difference at index {at} (shown from index {start}):",
            f"  left:  {show(left[start:at + CONTEXT])}",
            f"  right: {show(right[start:at + CONTEXT])}"]


def _sequence_difference(left, right) -> list[str]:
    for at, (one, other) in enumerate(zip(left, right)):
        if one != other:
            return [f"first difference at index {at}: {short(one)} != {short(other)}"]
    if len(left) == len(right):
        return ["no item differs"]
    longer, name = (left, "left") if len(left) > len(right) else (right, "right")
    shorter = min(len(left), len(right))
    return [f"{name} has {_count(len(longer) - shorter, 'more item')}, the first: "
            f"{short(longer[shorter])}"]


def _dict_difference(left: dict, right: dict) -> list[str]:
    lines = _only_in(left.keys() - right.keys(), right.keys() - left.keys(), "key")
    differing = (k for k in left.keys() & right.keys() if left[k] != right[k])
    first = next(differing, None)
    if first is not None:
        lines.append(f"{_count(1 + sum(1 for _ in differing), 'key')} with different values, e.g. "
                     f"{short(first)}: {short(left[first])} != {short(right[first])}")
    return lines


def _only_in(left_only, right_only, what: str) -> list[str]:
    lines = []
    for name, only in (("left", left_only), ("right", right_only)):
        if only:
            examples = ", ".join(short(v) for v in itertools.islice(only, EXAMPLES))
            lines.append(f"{_count(len(only), what)} only on the {name}, e.g. {examples}")
    return lines


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _line(text: str) -> str:
    return text if len(text) <= LINE_CHARS else f"{text[:LINE_CHARS]}…"


class BoundedCompare:
    """A pytest plugin (the judge's boot registers it): failed comparisons on long or unusual
    operands get `summary`; the judge's verbosity is capped; a custom assertion message is cut.

    Its pytest_assertrepr_compare comes first among the hook's implementations, so its summary
    is the one shown. pluggy still calls every implementation of that hook, pytest's own too, so
    the plugin also wraps the function pytest's rewritten asserts call for an explanation
    (`_reprcompare`, set per test): for such operands, no other implementation runs at all.
    """

    def __init__(self, pytest):
        self.pytest_configure = pytest.hookimpl(trylast=True)(self._configure)
        self.pytest_assertrepr_compare = pytest.hookimpl(tryfirst=True)(self._assertrepr)
        # inside pytest's own wrapper (tryfirst), which sets `_reprcompare` for each test
        self.pytest_runtest_protocol = pytest.hookimpl(hookwrapper=True, trylast=True)(
            self._protocol)

    @staticmethod
    def _configure(config) -> None:
        config.option.verbose = min(config.option.verbose, MAX_VERBOSITY)
        from _pytest.assertion import rewrite

        full = rewrite._format_assertmsg
        rewrite._format_assertmsg = lambda obj: full(cut(obj) if isinstance(obj, str) else obj)

    @staticmethod
    def _assertrepr(config, op, left, right):
        return summary(op, left, right)

    @staticmethod
    def _protocol(item, nextitem):
        from _pytest.assertion import util

        full = util._reprcompare
        if full is not None:
            rewrite_mode = item.config.getvalue("assertmode") == "rewrite"

            def gate(op, left, right):
                lines = summary(op, left, right)
                if lines is None:
                    return full(op, left, right)
                text = "\n~".join(line.replace("\n", "\\n") for line in lines)
                return text.replace("%", "%%") if rewrite_mode else text

            util._reprcompare = gate
        yield
        util._reprcompare = full


class BoundedReports:
    """A pytest plugin that cuts each failed check's report text (see REPORT_TEXT_CHARS)."""

    def __init__(self, pytest):
        self.pytest_runtest_makereport = pytest.hookimpl(hookwrapper=True)(self._makereport)

    @staticmethod
    def _makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        if report.longrepr is not None and not isinstance(report.longrepr, tuple):
            text = str(report.longrepr)
            if len(text) > REPORT_TEXT_CHARS:
                report.longrepr = cut(text)
