"""The power_warning precision check: too few tasks, too few runs, or too wide a primary CI."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MIN_TASKS = 30
MIN_RUNS_PER_CELL = 3
MAX_CI_HALF_WIDTH = 0.15


def ci_half_width(low: float | None, high: float | None) -> float | None:
    """Half of high - low; ``None`` when either end is missing."""
    if low is None or high is None:
        return None
    return (high - low) / 2.0


def power_warning(n_tasks: int,
                  runs_per_cell: int | Iterable[int],
                  primary_half_widths: Mapping[str, float | None] | Iterable[float | None],
                  ) -> tuple[bool, list[str]]:
    """(warn, reasons): warn when tasks < 30, runs per (task, condition) < 3, or a primary CI half-width > 0.15.

    ``runs_per_cell`` may be one number or every cell's count (the smallest is checked).
    A ``None`` half-width cannot be checked: it adds a "note:" reason but does not warn.
    """
    reasons: list[str] = []
    warn = False
    if n_tasks < MIN_TASKS:
        warn = True
        reasons.append(f"{n_tasks} tasks per condition, fewer than {MIN_TASKS}")
    cells = [runs_per_cell] if isinstance(runs_per_cell, int) else list(runs_per_cell)
    if not cells:
        warn = True
        reasons.append("no (task, condition) cell has any run")
    elif min(cells) < MIN_RUNS_PER_CELL:
        warn = True
        reasons.append(f"a (task, condition) cell has {min(cells)} runs, fewer than {MIN_RUNS_PER_CELL}")
    if isinstance(primary_half_widths, Mapping):
        named = list(primary_half_widths.items())
    else:
        named = [(f"primary #{i + 1}", hw) for i, hw in enumerate(primary_half_widths)]
    for name, hw in named:
        if hw is None:
            reasons.append(f"note: CI half-width for {name} is unavailable and was not checked")
        elif hw > MAX_CI_HALF_WIDTH:
            warn = True
            reasons.append(f"95% CI half-width for {name} is {hw:.3f}, above {MAX_CI_HALF_WIDTH}")
    return warn, reasons
