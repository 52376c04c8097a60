"""Number formatting shared by the Markdown and HTML reports: a missing number reads 'unavailable'."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

UNAVAILABLE = "unavailable"


def utc_iso(stamp: Optional[float]) -> Optional[str]:
    """A Unix time as UTC ISO 8601 to the second (`2026-12-04T18:45:00Z`); None stays None."""
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _unsigned_zero(value: float, digits: int) -> float:
    """A value that rounds to zero prints as 0, never '-0.000': a bootstrap bound of -1e-17 is
    zero to the reader, and a minus sign there reads as a (tiny) negative effect."""
    rounded = round(value, digits)
    return 0.0 if rounded == 0 else rounded


def rate(value: Optional[float]) -> str:
    return UNAVAILABLE if value is None else f"{_unsigned_zero(value, 3):.1%}"


def percent(value: Optional[float]) -> str:
    """Whole percent, for chart cells with little room."""
    return UNAVAILABLE if value is None else f"{_unsigned_zero(value, 2):.0%}"


def number(value: Optional[float], digits: int = 3) -> str:
    return UNAVAILABLE if value is None else f"{_unsigned_zero(value, digits):.{digits}f}"


def count(value: Optional[int]) -> str:
    return UNAVAILABLE if value is None else f"{value:,}"


def usd(value: Optional[float]) -> str:
    return UNAVAILABLE if value is None else f"${value:,.4f}"


def signed(value: Optional[float], digits: int = 3) -> str:
    """'+0.125' / '-0.125'; zero carries no sign ('0.000'), as it is neither gain nor loss."""
    if value is None:
        return UNAVAILABLE
    value = _unsigned_zero(value, digits)
    return f"{value:.{digits}f}" if value == 0 else f"{value:+.{digits}f}"


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
