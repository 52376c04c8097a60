"""Cost and wall-time forecast of a design from the pilot's per-run cost and duration distributions.

Each total is given at the pilot's per-run median and 90th percentile (numpy's linear
interpolation), and cost also at the mean (the expected total). Every attempt is a run: the
pilot's attempts per trial scale the number of runs, so retries are paid for. Anything the
pilot cannot say is None with a reason, never 0. When only some pilot attempts report a
quantity, its totals extrapolate from those and are marked partial with the coverage, not
available.

Wall time comes from the pilot's per-phase times, since the agent's time alone leaves out
what a run costs around it (a forecast from it once came out 10x low): each run holds a
worker slot for its agent time and its grading time (agent end to grade), the runs go out in
waves of ``workers`` slots, and the study waits once for the workers to start, taken as the
pilot's shortest queue wait (enqueued to started). So wall = start-up + waves × (agent +
grading), at the per-run median and 90th percentile of agent + grading. A pilot without
those timestamps (an imported one) falls back to waves × agent time, marked as leaving
grading and start-up out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Optional

import numpy as np

from evalq.planning.pilot import Pilot


@dataclass(frozen=True)
class Distribution:
    """A per-run quantity's median, 90th percentile and mean over the runs that reported it."""

    median: Optional[float]
    p90: Optional[float]
    mean: Optional[float]
    runs_with_value: int
    runs_without_value: int
    unavailable_reason: Optional[str] = None

    @classmethod
    def of(cls, values: list[Optional[float]], what: str, field: str) -> "Distribution":
        known = [float(v) for v in values if v is not None]
        missing = len(values) - len(known)
        if not values:
            return cls(None, None, None, 0, 0, "the pilot has no finished attempt")
        if not known:
            return cls(None, None, None, 0, missing,
                       f"none of the pilot's {missing} attempts reports {what} ({field}: null)")
        arr = np.asarray(known)
        return cls(float(np.median(arr)), float(np.quantile(arr, 0.9)), float(arr.mean()),
                   len(known), missing)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def partial(self) -> bool:
        return self.unavailable_reason is None and self.runs_without_value > 0

    def coverage(self) -> dict[str, Any]:
        total = self.runs_with_value + self.runs_without_value
        return {"attempts_with_value": self.runs_with_value, "attempts": total,
                "share": self.runs_with_value / total if total else None}

    def status(self, what: str) -> dict[str, Any]:
        """available (every attempt reports it), partial (some do: with a note) or neither."""
        note = None
        if self.partial:
            cov = self.coverage()
            note = (f"partial: {cov['attempts_with_value']} of {cov['attempts']} pilot attempts "
                    f"report {what} ({cov['share']:.0%}); the forecast assumes the other "
                    f"{self.runs_without_value} are like them")
        return {"available": self.unavailable_reason is None and not self.partial,
                "partial": self.partial, "coverage": self.coverage(), "note": note}


#: a plan recorded before the phases were read has none: its forecast says so
_NO_PHASES = Distribution(None, None, None, 0, 0, "the plan was made before evalq read "
                                                  "per-phase times: run `evalq plan` again")


@dataclass(frozen=True)
class RunDistributions:
    """What the forecast needs from a pilot; stored in the study lock so `evalq run` can reuse it.

    ``duration_seconds`` is the agent's time per attempt; ``queue_wait_seconds`` and
    ``grading_seconds`` the other two phases; ``slot_seconds`` agent + grading of each attempt
    that has both (what a run holds a worker for); ``startup_seconds`` the shortest queue wait.
    """

    cost_usd: Distribution
    duration_seconds: Distribution
    attempts_per_trial: Optional[float]
    queue_wait_seconds: Distribution = _NO_PHASES
    grading_seconds: Distribution = _NO_PHASES
    slot_seconds: Distribution = _NO_PHASES
    startup_seconds: Optional[float] = None

    def as_dict(self) -> dict[str, Any]:
        return {"cost_usd": self.cost_usd.as_dict(),
                "duration_seconds": self.duration_seconds.as_dict(),
                "attempts_per_trial": self.attempts_per_trial,
                "queue_wait_seconds": self.queue_wait_seconds.as_dict(),
                "grading_seconds": self.grading_seconds.as_dict(),
                "slot_seconds": self.slot_seconds.as_dict(),
                "startup_seconds": self.startup_seconds}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunDistributions":
        def phase(name: str) -> Distribution:
            return Distribution(**data[name]) if isinstance(data.get(name), dict) else _NO_PHASES

        return cls(cost_usd=Distribution(**data["cost_usd"]),
                   duration_seconds=Distribution(**data["duration_seconds"]),
                   attempts_per_trial=data.get("attempts_per_trial"),
                   queue_wait_seconds=phase("queue_wait_seconds"),
                   grading_seconds=phase("grading_seconds"), slot_seconds=phase("slot_seconds"),
                   startup_seconds=data.get("startup_seconds"))


def _sum_known(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None else a + b


def run_distributions(pilot: Pilot) -> RunDistributions:
    costs = [c for r in pilot.runs for c in r.cost_usd]
    durations = [d for r in pilot.runs for d in r.duration_seconds]
    waits = [q for r in pilot.runs for q in r.queue_seconds]
    gradings = [g for r in pilot.runs for g in r.grading_seconds]
    slots = [_sum_known(a, g) for r in pilot.runs if r.grading_seconds
             for a, g in zip(r.duration_seconds, r.grading_seconds)]
    known_waits = [q for q in waits if q is not None]
    with_attempts = [r for r in pilot.runs if r.attempts]
    per_trial = (sum(r.attempts for r in with_attempts) / len(with_attempts)) if with_attempts else None
    return RunDistributions(cost_usd=Distribution.of(costs, "a cost",
                                                     "metrics.cost_usd and metrics.reported_cost_usd"),
                            duration_seconds=Distribution.of(durations, "a duration",
                                                             "metrics.duration_seconds"),
                            attempts_per_trial=per_trial,
                            queue_wait_seconds=_phase(waits, "a queue wait",
                                                      "enqueued_at and started_at"),
                            grading_seconds=_phase(gradings, "a grading time",
                                                   "agent_finished_at and graded_at"),
                            slot_seconds=_phase(slots, "both an agent and a grading time",
                                                "started_at, agent_finished_at and graded_at"),
                            startup_seconds=min(known_waits) if known_waits else None)


def _phase(values: list[Optional[float]], what: str, fields: str) -> Distribution:
    """A phase's distribution; a pilot given as rows (no timestamps) says so."""
    if not values:
        return Distribution(None, None, None, 0, 0, f"the pilot's runs carry no {fields} "
                                                    "timestamps (an imported or hand-made pilot)")
    return Distribution.of(values, what, fields)


def _times(n: Optional[float], value: Optional[float]) -> Optional[float]:
    return None if n is None or value is None else n * value


def _wall_model(dists: RunDistributions) -> tuple[Distribution, float, str, Optional[str]]:
    """(per-run distribution, start-up seconds, method, caveat) of the wall-time forecast."""
    slot = dists.slot_seconds
    if slot.unavailable_reason is None:
        if dists.startup_seconds is None:
            return slot, 0.0, "waves × (agent + grading)", \
                "no queue wait recorded: the workers' start-up is left out"
        return slot, dists.startup_seconds, "start-up + waves × (agent + grading)", None
    return dists.duration_seconds, 0.0, "waves × agent time", \
        (f"agent time only, grading and start-up left out ({slot.unavailable_reason}): "
         "likely low")


def forecast(dists: RunDistributions, trials: int, workers: Optional[int]) -> dict[str, Any]:
    """Totals for ``trials`` trials on ``workers`` worker slots, as plain data for JSON and text."""
    runs = None if dists.attempts_per_trial is None else trials * dists.attempts_per_trial
    cost = dists.cost_usd
    dur, startup, method, caveat = _wall_model(dists)
    waves = None if runs is None or not workers else math.ceil(runs / workers - 1e-9)
    wall_reason = dur.unavailable_reason
    if wall_reason is None and not workers:
        wall_reason = "the number of agent workers is not known (pass --workers)"
    if wall_reason is None and runs is None:
        wall_reason = "the pilot has no finished attempt"
    status = dur.status("agent and grading times" if dur is dists.slot_seconds
                        else "a duration")
    note = "; ".join(n for n in (status["note"], caveat) if n) or None
    return {
        "trials": trials,
        "runs": runs,
        "attempts_per_trial": dists.attempts_per_trial,
        "workers": workers,
        "cost_usd": {
            **cost.status("a cost"),
            "reason": cost.unavailable_reason,
            "per_run": {"median": cost.median, "p90": cost.p90, "mean": cost.mean},
            "total_at_median": _times(runs, cost.median),
            "total_at_p90": _times(runs, cost.p90),
            "expected_total": _times(runs, cost.mean),
        },
        "wall_seconds": {
            **status,
            "note": note,
            "available": wall_reason is None and not dur.partial,
            "partial": wall_reason is None and dur.partial,
            "reason": wall_reason,
            "method": method,
            "waves": waves,
            "startup_seconds": startup,
            "per_run": {"median": dur.median, "p90": dur.p90, "mean": dur.mean},
            "phases": {name: {"median": d.median, "p90": d.p90}
                       for name, d in (("queue_wait", dists.queue_wait_seconds),
                                       ("agent", dists.duration_seconds),
                                       ("grading", dists.grading_seconds))},
            "at_median": None if wall_reason else _plus(startup, _times(waves, dur.median)),
            "at_p90": None if wall_reason else _plus(startup, _times(waves, dur.p90)),
        },
    }


def _plus(startup: float, value: Optional[float]) -> Optional[float]:
    return None if value is None else startup + value


def _money(value: Optional[float]) -> str:
    return "unavailable" if value is None else f"${value:,.2f}"


def clock_text(seconds: Optional[float]) -> str:
    if seconds is None:
        return "unavailable"
    hours, rest = divmod(int(round(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def _secs(value: Optional[float]) -> str:
    return "unavailable" if value is None else f"{value:.1f} s"


def forecast_lines(fc: dict[str, Any]) -> list[str]:
    """The forecast in a few lines of prose for the terminal."""
    cost, wall = fc["cost_usd"], fc["wall_seconds"]
    lines = [f"forecast for {fc['trials']} trials"
             + (f" ({fc['runs']:.0f} runs at {fc['attempts_per_trial']:.2f} attempts per trial)"
                if fc["runs"] is not None else "")]
    if cost["reason"] is None:
        lines.append(f"  cost{' (partial)' if cost['partial'] else ''}: "
                     f"{_money(cost['total_at_median'])} at the pilot's median run, "
                     f"{_money(cost['total_at_p90'])} at its 90th percentile, "
                     f"{_money(cost['expected_total'])} expected (mean)")
        if cost["note"]:
            lines.append(f"  note: {cost['note']}")
    else:
        lines.append(f"  cost: unavailable: {cost['reason']}")
    if wall["reason"] is None:
        lines.append(f"  wall time{' (partial)' if wall['partial'] else ''} on {fc['workers']} "
                     f"agent workers: {clock_text(wall['at_median'])} "
                     f"at the median run, {clock_text(wall['at_p90'])} at the 90th percentile "
                     f"({wall.get('method', 'waves × agent time')})")
        phases = wall.get("phases") or {}
        if "grading" in (wall.get("method") or ""):
            lines.append("  per run, pilot medians: agent + grading "
                         f"{_secs(wall['per_run']['median'])} (agent alone "
                         f"{_secs((phases.get('agent') or {}).get('median'))}, grading alone "
                         f"{_secs((phases.get('grading') or {}).get('median'))}); start-up "
                         f"{_secs(wall.get('startup_seconds'))} (the shortest queue wait)")
        if wall["note"]:
            lines.append(f"  note: {wall['note']}")
    else:
        lines.append(f"  wall time: unavailable: {wall['reason']}")
    return lines
