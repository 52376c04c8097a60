"""A pilot study reduced to what planning needs: one row per agent run (task, condition, passed, RFR, cost, duration).

The reader works over the analysis' runs (which attempt counts, and the adjudicated
rater scores of an imported study), so any study whose rows are in the results database plans
the same way, and reads the same outcomes as its report, whether it was run here or imported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

from evalq.analysis.usage import counted_usage, metered
from evalq.digest import data_digest


@dataclass(frozen=True)
class PilotRun:
    """One pilot trial: the counted outcome, plus what all its attempts cost and took.

    ``passed`` is None for a trial without a valid outcome (grading or infrastructure failure,
    or still pending); ``regression_free`` is None without a rater's regression score.
    ``cost_usd``/``duration_seconds`` hold one value per attempt, None where the attempt did
    not report it; ``queue_seconds`` and ``grading_seconds`` likewise, the attempt's wait for
    an agent worker and from the agent's end to its grade (empty for a pilot given as rows).
    """

    task: str
    condition: str
    repetition: int
    passed: Optional[bool]
    cost_usd: tuple[Optional[float], ...] = ()
    duration_seconds: tuple[Optional[float], ...] = ()
    regression_free: Optional[bool] = None
    queue_seconds: tuple[Optional[float], ...] = ()
    grading_seconds: tuple[Optional[float], ...] = ()

    @property
    def attempts(self) -> int:
        return max(len(self.cost_usd), len(self.duration_seconds))


@dataclass(frozen=True)
class Pilot:
    """A pilot's runs with its identity; ``digest`` changes if any run's data changes."""

    study_id: str
    lock_digest: Optional[str]
    runs: tuple[PilotRun, ...]
    hypotheses: tuple[tuple[str, str], ...] = ()  # the pilot's own (baseline, candidate) pairs

    @property
    def conditions(self) -> list[str]:
        return list(dict.fromkeys(r.condition for r in self.runs))

    @property
    def tasks(self) -> list[str]:
        return sorted({r.task for r in self.runs})

    def outcomes(self, condition: str) -> dict[str, list[Optional[bool]]]:
        """{task: [passed, ...]} for one condition, the input shape of evalq.stats metrics."""
        return self.values(condition, "passed")

    def values(self, condition: str, name: str) -> dict[str, list[Optional[bool]]]:
        """{task: [run.<name>, ...]} for one condition ("passed" or "regression_free")."""
        out: dict[str, list[Optional[bool]]] = {}
        for run in self.runs:
            if run.condition == condition:
                out.setdefault(run.task, []).append(getattr(run, name))
        return out

    @property
    def digest(self) -> str:
        rows = sorted((_digested(r) for r in self.runs),
                      key=lambda r: (r["task"], r["condition"], r["repetition"]))
        return data_digest({"study_id": self.study_id, "lock_digest": self.lock_digest,
                            "runs": rows})

    def describe(self) -> dict[str, Any]:
        """The pilot's identity and size, for reports and the study lock."""
        return {"study_id": self.study_id, "lock_digest": self.lock_digest,
                "digest": self.digest, "tasks": len(self.tasks), "conditions": self.conditions,
                "trials": len(self.runs),
                "valid_trials": sum(1 for r in self.runs if r.passed is not None),
                "attempts": sum(r.attempts for r in self.runs)}


def _digested(run: PilotRun) -> dict[str, Any]:
    """A run as its digest sees it: the phase times only when known, so a pilot that has none
    keeps the digest it had before they were read."""
    row = asdict(run)
    for name in ("queue_seconds", "grading_seconds"):
        if not row[name]:
            del row[name]
    return row


def attempt_cost(metrics: Optional[dict]) -> Optional[float]:
    """The attempt's cost: the gateway's where it metered the run (evalq.analysis.usage), else
    the priced estimate, else the agent's own report; None if none is known."""
    if not metrics:
        return None
    if metered(metrics):
        value = counted_usage(metrics).get("cost_usd")
        return None if value is None else float(value)
    for key in ("cost_usd", "reported_cost_usd"):
        value = metrics.get(key)
        if value is not None:
            return float(value)
    return None


def attempt_duration(attempt: Any) -> Optional[float]:
    """How long the attempt held an agent worker: start to agent end, else the agent's own duration."""
    started, agent_done = getattr(attempt, "started_at", None), getattr(attempt, "agent_finished_at", None)
    if started is not None and agent_done is not None and agent_done >= started:
        return float(agent_done - started)
    metrics = getattr(attempt, "metrics", None) or {}
    if metrics.get("duration_seconds") is not None:
        return float(metrics["duration_seconds"])
    finished = getattr(attempt, "finished_at", None)
    if started is not None and finished is not None and finished >= started:
        return float(finished - started)
    return None


def _between(attempt: Any, start: str, end: str) -> Optional[float]:
    """Seconds from one recorded timestamp of the attempt to another; None if either is
    missing or they run backwards."""
    a, b = getattr(attempt, start, None), getattr(attempt, end, None)
    return float(b - a) if a is not None and b is not None and b >= a else None


def attempt_queue_wait(attempt: Any) -> Optional[float]:
    """How long the attempt waited for an agent worker: enqueued to started (a worker's
    start-up included, for the first ones)."""
    return _between(attempt, "enqueued_at", "started_at")


def attempt_grading(attempt: Any) -> Optional[float]:
    """From the agent's end to the grade: the wait for a grader and the grading itself."""
    return _between(attempt, "agent_finished_at", "graded_at")


def pilot_run(view: Any, passed: Optional[bool], regression_free: Optional[bool] = None) -> PilotRun:
    """One pilot run from a TrialView-like object (fixture_id, condition, repetition, attempts)."""
    finished = [a for a in view.attempts if getattr(a, "outcome", None) is not None]
    return PilotRun(task=view.fixture_id, condition=view.condition, repetition=view.repetition,
                    passed=passed, regression_free=regression_free,
                    cost_usd=tuple(attempt_cost(a.metrics) for a in finished),
                    duration_seconds=tuple(attempt_duration(a) for a in finished),
                    queue_seconds=tuple(attempt_queue_wait(a) for a in finished),
                    grading_seconds=tuple(attempt_grading(a) for a in finished))


def pilot_from_views(study_id: str, views: Iterable[Any], lock_digest: Optional[str] = None) -> Pilot:
    """Build a pilot from TrialView-like objects (fixture_id, condition, repetition, passed, attempts)."""
    return Pilot(study_id=study_id, lock_digest=lock_digest,
                 runs=tuple(pilot_run(view, view.passed) for view in views))


def pilot_from_rows(study_id: str, rows: Sequence[dict[str, Any]]) -> Pilot:
    """Build a pilot from plain rows {task, condition, passed, regression_free?, cost_usd?,
    duration_seconds?, repetition?}."""
    runs = []
    for i, row in enumerate(rows):
        runs.append(PilotRun(task=str(row["task"]), condition=str(row["condition"]),
                             repetition=int(row.get("repetition", i)), passed=row.get("passed"),
                             regression_free=row.get("regression_free"),
                             cost_usd=(row.get("cost_usd"),),
                             duration_seconds=(row.get("duration_seconds"),)))
    return Pilot(study_id=study_id, lock_digest=None, runs=tuple(runs))


def load_pilot(engine: Any, study_id: str) -> Pilot:
    """Read a finished (or imported) study from the results database as a pilot.

    Outcomes come from the analysis' runs, so an imported study's adjudicated scores (passed,
    regression) are what the plan sees, exactly as its report would.
    """
    from evalq.analysis.condition_metrics import RUN_VALUE
    from evalq.analysis.runs import study_runs

    row, runs = study_runs(engine, study_id)
    pairs = tuple((h["baseline"], h["candidate"]) for h in (row.manifest or {}).get("hypotheses", [])
                  if h.get("primary", True) and "baseline" in h and "candidate" in h)
    return Pilot(study_id=study_id, lock_digest=row.lock_digest,
                 runs=tuple(pilot_run(r.view, r.passed, RUN_VALUE["rfr"](r)) for r in runs),
                 hypotheses=pairs)
