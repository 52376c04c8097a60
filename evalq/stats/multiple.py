"""Holm-Bonferroni adjusted p-values for the family of primary hypotheses."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence


def holm_adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values in input order: monotone, capped at 1; ``None`` passes through.

    ``None`` (a test that could not be run) is not counted in the family size m.
    """
    indexed: list[tuple[float, int]] = []
    for i, p in enumerate(p_values):
        if p is None:
            continue
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or math.isnan(p) or not 0.0 <= p <= 1.0:
            raise ValueError(f"p-value #{i} = {p!r} is not a probability in [0, 1]; pass None for a missing test")
        indexed.append((float(p), i))
    m = len(indexed)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(indexed)):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def holm_reject(p_values: Sequence[float | None], alpha: float = 0.05) -> list[bool | None]:
    """Which hypotheses Holm rejects at family-wise level alpha; ``None`` where the p-value is missing."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha={alpha!r} must lie strictly between 0 and 1, e.g. 0.05")
    return [None if a is None else a <= alpha for a in holm_adjust(p_values)]
