"""Number formatting shared by the Markdown and HTML reports: a missing number reads 'unavailable'."""

from __future__ import annotations

from typing import Any, Optional

UNAVAILABLE = "unavailable"


def rate(value: Optional[float]) -> str:
    return UNAVAILABLE if value is None else f"{value:.1%}"


def number(value: Optional[float], digits: int = 3) -> str:
    return UNAVAILABLE if value is None else f"{value:.{digits}f}"


def count(value: Optional[int]) -> str:
    return UNAVAILABLE if value is None else f"{value:,}"


def usd(value: Optional[float]) -> str:
    return UNAVAILABLE if value is None else f"${value:,.4f}"


def signed(value: Optional[float]) -> str:
    return UNAVAILABLE if value is None else f"{value:+.3f}"


def interval(low: Optional[float], high: Optional[float], signed_values: bool = False) -> str:
    if low is None or high is None:
        return UNAVAILABLE
    f = signed if signed_values else number
    return f"[{f(low)}, {f(high)}]"


def estimate(metric: dict[str, Any]) -> str:
    """'0.667 [0.333, 1.000]' or 'unavailable (reason)'."""
    if metric.get("estimate") is None:
        reason = metric.get("reason")
        return f"{UNAVAILABLE} ({reason})" if reason else UNAVAILABLE
    return f"{number(metric['estimate'])} {interval(metric['ci_low'], metric['ci_high'])}"


def with_reason(text: str, reason: Optional[str]) -> str:
    return f"{text} ({reason})" if text == UNAVAILABLE and reason else text


def yes_no(value: Optional[bool]) -> str:
    return UNAVAILABLE if value is None else ("yes" if value else "no")
