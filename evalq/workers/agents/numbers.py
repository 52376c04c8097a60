"""Numbers an agent reported, kept only when they are numbers: counts and costs, checked.

An agent's usage file or event stream can say anything: NaN, -5, 10**30, "12", true. A count
is a non-negative whole number under MAX_COUNT, a cost a finite non-negative number under
MAX_COST_USD; anything else is unavailable (None) with the reason kept in the run's
`unreported`, never stored as given (NaN is not JSON; a negative count would lower a mean;
a count past 64 bits is refused by the database).
"""

from __future__ import annotations

import math
from typing import Any, Optional

from evalq.models import RunMetrics
from evalq.plaintext import valid_text

#: more tokens or calls than any run could make (a million requests of a million tokens)
MAX_COUNT = 10**12
#: more dollars than any single run could spend
MAX_COST_USD = 1e6
#: the most entries a per-request list of counts keeps
MAX_LIST = 100_000
#: the longest text field of a run's metrics, and the most reasons and models kept
MAX_TEXT = 4000
MAX_ITEMS = 100

#: counts that may be negative: the exit status (a killing signal is -N)
SIGNED = frozenset({"exit_code"})
COUNT_LISTS = ("request_prompt_tokens", "estimated_context_tokens")
MONEY = frozenset({"cost_usd", "reported_cost_usd", "wire_cost_usd"})


def _whole(value: Any) -> tuple[Optional[int], Optional[str]]:
    """A whole number from an int or an integral finite float, else why not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"not a number ({type(value).__name__})"
    if isinstance(value, float):
        if not math.isfinite(value):
            return None, f"not a finite number ({value})"
        if not value.is_integer():
            return None, f"not a whole number ({value:g})"
        if abs(value) > MAX_COUNT:  # before int(): 1e308 would make a 300-digit int
            return None, f"over {MAX_COUNT:.0e}"
        value = int(value)
    return value, None


def count_or_reason(value: Any, signed: bool = False) -> tuple[Optional[int], Optional[str]]:
    """(the count, None), or (None, why it is not one); (None, None) for a missing value."""
    if value is None:
        return None, None
    number, why = _whole(value)
    if number is None:
        return None, why
    if number < 0 and not signed:
        return None, f"negative ({number})"
    if abs(number) > MAX_COUNT:
        return None, f"over {MAX_COUNT:.0e}"
    return number, None


def cost_or_reason(value: Any) -> tuple[Optional[float], Optional[str]]:
    """(the cost in dollars, None), or (None, why it is not one); (None, None) if missing."""
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"not a number ({type(value).__name__})"
    if isinstance(value, int) and abs(value) > MAX_COST_USD:
        return None, f"over ${MAX_COST_USD:g}"
    value = float(value)
    if not math.isfinite(value):
        return None, f"not a finite number ({value})"
    if value < 0:
        return None, f"negative ({value:g})"
    if value > MAX_COST_USD:
        return None, f"over ${MAX_COST_USD:g}"
    return value, None


def set_counts(metrics: RunMetrics, usage: dict, keys, source: str) -> dict[str, str]:
    """Set each count of `keys` that `usage` gives on `metrics` (None where it is no count);
    returns why each one given is not kept, as "SOURCE is WHY"."""
    reasons = {}
    for key in keys:
        value, why = count_or_reason(usage.get(key))
        setattr(metrics, key, value)
        if why:
            reasons[key] = f"{source} is {why}"
    return reasons


def count(value: Any) -> Optional[int]:
    """The count, or None for anything that is not one."""
    return count_or_reason(value)[0]


def _text(value: Any) -> Optional[str]:
    if value is None:
        return None
    text = valid_text(str(value))
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def sane_metrics(metrics: RunMetrics) -> RunMetrics:
    """The metrics with every number checked (counts, lists of counts, costs and durations)
    and every text valid UTF-8 and bounded; what fails is None, its reason in `unreported`."""
    reasons = dict(metrics.unreported or {})
    values = metrics.model_dump()
    for name, value in values.items():
        if value is None or name in ("unreported", "skill_loaded", "cost_source"):
            continue
        why = None
        if name in COUNT_LISTS:
            if not isinstance(value, list) or len(value) > MAX_LIST:
                why = f"not a list of at most {MAX_LIST} counts"
            else:
                checked = [count_or_reason(v) for v in value]
                why = next((f"an entry is {w}" for _, w in checked if w), None)
        elif name in MONEY or name == "duration_seconds":
            number, why = cost_or_reason(value)
            if why is None:
                values[name] = number
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            number, why = count_or_reason(value, signed=name in SIGNED)
            if why is None:
                values[name] = number
        elif isinstance(value, str):
            values[name] = _text(value)
        elif isinstance(value, list):
            values[name] = [_text(v) for v in value[:MAX_ITEMS]]
        if why is not None:
            values[name] = None
            reasons[name] = f"the reported value is {why}"
    kept = {_text(k)[:200]: _text(v) for k, v in list(reasons.items())[:MAX_ITEMS]}
    values["unreported"] = kept or None
    return type(metrics).model_validate(values)
