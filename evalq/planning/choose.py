"""Which design to recommend: the cheapest one that meets the power target and the protocol's floors.

Ranking by trials alone always favours one repetition, which the rated-study protocol forbids (k >= 3, and
at least 30 tasks, whatever the power). Designs below the floors are still simulated and shown,
but are recommended only when the user lowers the floors explicitly (--min-tasks,
--min-repetitions). Eligible designs are ranked by the forecast expected cost, then the wall
time at the median run, then trials; where the pilot cannot price a design the ranking falls
back to wall time, then to trials, and says so. More tasks wins a tie (tasks generalise, runs
only sharpen each task's rate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from evalq.errors import UserError
from evalq.stats.power import MIN_RUNS_PER_CELL, MIN_TASKS

PROTOCOL = "rated-study protocol: at least 30 tasks, k >= 3 runs per (task, condition)"


@dataclass(frozen=True)
class Floors:
    """The smallest design a plan may recommend; the protocol's unless lowered on the command line."""

    min_tasks: int = MIN_TASKS
    min_repetitions: int = MIN_RUNS_PER_CELL

    def check(self) -> None:
        for flag, value in (("--min-tasks", self.min_tasks),
                            ("--min-repetitions", self.min_repetitions)):
            if value < 1:
                raise UserError(f"{flag} {value} must be at least 1", field=flag,
                                fix=f"give a positive whole number ({PROTOCOL})")

    @property
    def lowered(self) -> bool:
        return self.min_tasks < MIN_TASKS or self.min_repetitions < MIN_RUNS_PER_CELL

    def admits(self, tasks: int, repetitions: int) -> bool:
        return tasks >= self.min_tasks and repetitions >= self.min_repetitions

    def as_dict(self) -> dict[str, Any]:
        return {"min_tasks": self.min_tasks, "min_repetitions": self.min_repetitions,
                "protocol": {"min_tasks": MIN_TASKS, "min_repetitions": MIN_RUNS_PER_CELL},
                "lowered": self.lowered,
                "source": ("lowered on the command line (--min-tasks/--min-repetitions); designs "
                           "below the protocol's floors carry power_warning and cannot support "
                           "primary claims" if self.lowered else PROTOCOL)}


def ranking_basis(rows: list[dict[str, Any]], partial_cost: bool = False) -> dict[str, Any]:
    """What designs are ranked by: cost where every row has one, else wall time, else trials."""
    if rows and all(r["forecast_cost_usd"] is not None for r in rows):
        return {"by": "expected cost",
                "note": ("the cost forecast is partial (not every pilot attempt reports a cost): "
                         "the ranking assumes the unpriced attempts cost like the priced ones")
                if partial_cost else None}
    if rows and all(r["forecast_wall_seconds"] is not None for r in rows):
        return {"by": "wall time", "note": "the forecast cost is unavailable, so designs are "
                                           "ranked by forecast wall time, then trials"}
    return {"by": "trials", "note": "the forecast cost and wall time are unavailable, so "
                                    "designs are ranked by trials"}


def _key(row: dict[str, Any], by: str) -> tuple:
    wall = row["forecast_wall_seconds"]
    tail = (row["trials"], -row["tasks"])
    if by == "expected cost":
        return (row["forecast_cost_usd"], math.inf if wall is None else wall, *tail)
    if by == "wall time":
        return (wall, *tail)
    return tail


def recommend(rows: list[dict[str, Any]], floors: Floors, target_power: float,
              partial_cost: bool = False) -> tuple[Optional[dict[str, Any]], Optional[str], dict[str, Any]]:
    """(chosen row or None, why none, ranking basis) over grid rows carrying meets_target,
    trials and the forecast_cost_usd / forecast_wall_seconds of each design."""
    eligible = [r for r in rows if r["meets_target"] and floors.admits(r["tasks"], r["repetitions"])]
    basis = ranking_basis(rows, partial_cost)
    if eligible:
        return min(eligible, key=lambda r: _key(r, basis["by"])), None, basis
    below = [r for r in rows if r["meets_target"]]
    if below:
        small = min(below, key=lambda r: _key(r, "trials"))
        return None, (f"only designs below the floors (≥ {floors.min_tasks} tasks, k ≥ "
                      f"{floors.min_repetitions}) reach power {target_power}, e.g. "
                      f"{small['tasks']} tasks × {small['repetitions']}; widen the grid with "
                      "--tasks/--repetitions, or lower the floors explicitly with "
                      "--min-tasks/--min-repetitions"), basis
    best = {}
    for r in rows:
        for metric, result in (r.get("metrics") or {}).items():
            if metric not in best or result["power"] > best[metric][0]:
                best[metric] = (result["power"], r["tasks"], r["repetitions"])
    shortfall = "; ".join(f"{m} at best {p:.3f} ({n} tasks × {k})" for m, (p, n, k) in best.items()
                          if p < target_power)
    return None, (f"no design in the grid reaches power {target_power} on every planned "
                  "metric" + (f" ({shortfall})" if shortfall else "")
                  + "; widen it with --tasks/--repetitions or plan for a larger effect"), basis
