"""One record per planned trial, from the database, in the shape every analysis uses.

Native runs take ``passed`` from the grader (the counted attempt); imported adjudicated runs
keep their adjudicated rater scores in ``AttemptRow.grade['scores']`` and per-rater rows
in ``AttemptRow.grade['ratings']`` (see evalq.analysis.adjudicated_import). A score nobody gave is None.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Optional

from evalq.analysis.usage import counted_usage
from evalq.report.attempts import TrialView, trial_views
from evalq.results.store import AttemptRow, StudyRow, TrialRow, read_study, records

#: The six binary fields raters score in a rated study.
RATER_FIELDS = ("passed", "validation_passed", "human_accepted", "regression",
                "rework_required", "requirements_traceability")
#: Objective validation fields an adjudicated row may carry beside them.
VALIDATION_FIELDS = ("public_validation_passed", "hidden_validation_passed")
SCORE_FIELDS = RATER_FIELDS + VALIDATION_FIELDS
IMPORTED = "adjudicated-results"
#: the same source as studies imported by earlier versions recorded it
IMPORTED_SOURCES = frozenset({IMPORTED, "seed-003"})


@dataclass(slots=True)  # 100,000 of them in a report: no per-instance dict
class Run:
    """A planned trial with its counted outcome, scores, costs and labels."""

    view: TrialView
    task: str
    condition: str
    repetition: int
    order: int
    outcome: Optional[str]
    passed: Optional[bool]
    scores: Mapping[str, Optional[bool]]
    ratings: list[dict[str, Any]] = field(default_factory=list)
    imported: bool = False
    _usage: Optional[Mapping[str, Any]] = field(default=None, repr=False, compare=False)

    @property
    def counted_metrics(self) -> Mapping[str, Any]:
        """The counted attempt's metrics with the usage that counts (evalq.analysis.usage:
        the gateway's where it metered the run), to read, not to change."""
        if self._usage is None:
            counted = self.view.counted
            self._usage = counted_usage(counted.metrics) or _NO_METRICS \
                if counted is not None else _NO_METRICS
        return self._usage

    @property
    def attempt_costs(self) -> list[tuple[Optional[float], bool]]:
        """(cost_usd, correct) for every finished attempt: resubmitted ones cost money too."""
        out = []
        for attempt in self.view.attempts:
            if attempt.outcome is None:
                continue
            cost = counted_usage(attempt.metrics).get("cost_usd")
            out.append((None if cost is None else float(cost), attempt.outcome == "correct"))
        return out


def _run_of(view: TrialView) -> Run:
    counted = view.counted
    grade = (counted.grade or {}) if counted is not None else {}
    if grade.get("source") in IMPORTED_SOURCES:
        scores = {k: grade.get("scores", {}).get(k) for k in SCORE_FIELDS}
        return Run(view=view, task=view.fixture_id, condition=view.condition,
                   repetition=view.repetition, order=view.order_index, outcome=view.outcome,
                   passed=scores["passed"], scores=scores,
                   ratings=list(grade.get("ratings") or []), imported=True)
    passed = view.passed
    return Run(view=view, task=view.fixture_id, condition=view.condition,
               repetition=view.repetition, order=view.order_index, outcome=view.outcome,
               passed=passed, scores=_NATIVE_SCORES[passed])


def _native_scores(passed: Optional[bool]) -> Mapping[str, Optional[bool]]:
    """A native run's scores: the grader's verdict, which is also the rated study's locked evaluator
    check (hidden validation); raters gave none."""
    scores: dict[str, Optional[bool]] = dict.fromkeys(SCORE_FIELDS)
    scores["passed"] = scores["hidden_validation_passed"] = passed
    return MappingProxyType(scores)


#: one read-only mapping per verdict, shared by every native run (100,000 in a report)
_NATIVE_SCORES = {passed: _native_scores(passed) for passed in (True, False, None)}
_NO_METRICS: Mapping[str, Any] = MappingProxyType({})


#: the columns a report reads (evalq.report.compute): attempts' artifacts, criteria and
#: timestamps are JSON and numbers it never looks at (100,000 of each; bench/ report)
REPORT_TRIAL_COLUMNS = ("id", "fixture_id", "condition", "repetition", "order_index")
REPORT_ATTEMPT_COLUMNS = ("trial_id", "attempt", "outcome", "reason", "worker_host",
                          "worker_env", "metrics", "grade")


def study_runs(engine, study_id: str, *, report_only: bool = False
               ) -> tuple[StudyRow, list[Run]]:
    """The study row and one Run per planned trial, in planned order. `report_only` reads
    only the columns the report uses (other callers read timestamps, artifacts, criteria)."""
    study = read_study(engine, study_id)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalq-read") as reader:
        # the attempts' query runs on its own connection while this thread reads the trials:
        # the database's work and the driver's fetch overlap the building of rows (bench/)
        attempts = reader.submit(records, engine, AttemptRow, study_id,
                                 [AttemptRow.trial_id, AttemptRow.attempt],
                                 REPORT_ATTEMPT_COLUMNS if report_only else None)
        trials = records(engine, TrialRow, study_id, [TrialRow.order_index],
                         REPORT_TRIAL_COLUMNS if report_only else None)
        views = trial_views(trials, attempts.result())
    return study, [_run_of(v) for v in views]


def condition_names(study: StudyRow) -> list[str]:
    return [c["name"] for c in study.manifest.get("conditions", [])]


def by_task(runs: list[Run], value) -> dict[str, list[Optional[bool]]]:
    """{task: [value(run), ...]} in sorted task order, the input shape of evalq.stats.metrics.
    Within `shared_groupings` each (run list, value function) is computed once (a report asks
    for the same values for every metric, k and comparison); the dict is the caller's, its
    value lists are shared and must not be changed."""
    kept_all = _GROUPINGS.get()
    if kept_all is None:
        return {task: list(map(value, group)) for task, group in _grouped(runs)}
    key = ("by_task", id(runs), id(value))
    kept = kept_all.get(key)  # the kept list and function themselves pin both ids
    if kept is None or kept[0] is not runs or kept[1] is not value or kept[2] != len(runs):
        kept = (runs, value, len(runs),
                {task: list(map(value, group)) for task, group in _grouped(runs)})
        kept_all[key] = kept
    return dict(kept[3])


#: within `shared_groupings`, each run list's grouping by identity: a report asks for the same
#: condition's runs grouped by task for every metric and comparison (dozens of times, 50,000
#: runs each; bench/ report)
_GROUPINGS: ContextVar[Optional[dict]] = ContextVar("evalq_groupings", default=None)


@contextmanager
def shared_groupings() -> Iterator[None]:
    """Within the block, by_task groups a run list once. Run lists are made whole and not
    changed afterwards; the kept list itself (not a copy) and its length are checked anyway."""
    token = _GROUPINGS.set({})
    try:
        yield
    finally:
        _GROUPINGS.reset(token)


def _grouped(runs: list[Run]) -> list[tuple[str, list[Run]]]:
    """(task, its runs by repetition) in task order."""
    kept_all = _GROUPINGS.get()
    kept = kept_all.get(id(runs)) if kept_all is not None else None
    if kept is not None and kept[0] is runs and kept[1] == len(runs):
        return kept[2]
    groups: dict[str, list[Run]] = {}
    for run in runs:  # group first, then sort the small groups
        groups.setdefault(run.task, []).append(run)
    grouped = [(task, sorted(groups[task], key=_repetition)) for task in sorted(groups)]
    if kept_all is not None:
        kept_all[id(runs)] = (runs, len(runs), grouped)
    return grouped


_repetition = attrgetter("repetition")  # C-level keys: a report sorts millions of runs (bench/)
#: the value most callers of by_task want, without a Python call per run
PASSED = attrgetter("passed")
