"""Import of adjudicated results.jsonl (+ raters.jsonl, adjudications.jsonl) as a study.

Storage (no extra table): a StudyRow whose lock has ``source = "adjudicated-results"`` and the input
digests; one TrialRow per (task, condition, run) and one finished AttemptRow each, whose
``grade`` holds ``{"source", "scores", "row", "ratings", "adjudications"}`` and whose
``worker_env`` is the row's env block. ``passed`` maps to outcome correct/incorrect; a null
``passed`` (an unresolved criterion) is a grading_failure whose scores stay null, so the
ordinary report, export and compare read imported studies like native ones.

Rows are read, validated and written in one streaming pass inside one transaction
(evalq.analysis.import_write): every bad row is reported with its line number, and then
nothing is kept.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from evalq.digest import data_digest
from evalq.errors import UserError
from evalq.results.store import StudyRow, TrialRow, init_db
from evalq.analysis.import_write import ImportTransaction
from evalq.analysis.jsonl import iter_jsonl
from evalq.analysis.runs import IMPORTED, RATER_FIELDS, VALIDATION_FIELDS
from evalq.analysis.adjudicated_rows import (Key, Problems, check_adjudicated,
                                          check_rater_rules, check_result, load_adjudications,
                                          load_ratings, rater_count, run_key, unmatched,
                                          without_lines)

ADJUDICATED_HYPOTHESES = (("H1", "tpr", True), ("H2", "rp_at_k", True), ("H3", "rfr", True),
                      ("H4", "cpr", False), ("H5", "nrr", False))
#: The protocol's default baseline (its control arm) when the results hold it.
DEFAULT_BASELINE = "single_prompt"
STUDY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # as a native manifest's id


@dataclass
class ImportSummary:
    study_id: str
    runs: int
    tasks: int
    conditions: list[str]
    ratings: int
    adjudications: int
    lock_digest: str
    unchanged: bool = False  # the same inputs were imported before: nothing was written
    #: runs scored by fewer than two raters (the protocol needs two per run); None: no
    #: raters.jsonl was given
    under_two_raters: Optional[int] = None


def file_digest(path: Optional[Path]) -> Optional[str]:
    if path is None:
        return None
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise UserError(f"cannot read it: {exc.strerror}", file=path,
                        fix="give the path of an existing JSON Lines file") from None
    return "sha256:" + digest.hexdigest()


def _label(row: dict) -> dict:
    split = row.get("split") or {"unseen": "held-out"}.get(row.get("kind"), row.get("kind"))
    return {"track": row.get("track"), "split": split, "suitable": row.get("suitable", True)}


def default_baseline(conditions: list[str], candidate: Optional[str] = None) -> str:
    """single_prompt when the results hold it, else the first condition (sorted) that is not
    the candidate."""
    if DEFAULT_BASELINE in conditions and candidate != DEFAULT_BASELINE:
        return DEFAULT_BASELINE
    return next(c for c in conditions if c != candidate)


def _hypotheses(conditions: list[str], baseline: Optional[str], candidate: Optional[str],
                path: Path) -> list[dict]:
    """The protocol's H1-H5 for every candidate against the baseline (all others by default);
    the primary ones of every pair form one Holm family in the report."""
    if len(conditions) < 2:
        return []
    for flag, name in (("--baseline", baseline), ("--candidate", candidate)):
        if name is not None and name not in conditions:
            raise UserError(f"'{name}' is not a condition in the results", file=path,
                            field=flag, fix=f"use one of {', '.join(conditions)}")
    if baseline is None:
        baseline = default_baseline(conditions, candidate)
    if candidate == baseline:
        raise UserError(f"'{baseline}' is both baseline and candidate", file=path,
                        field="--candidate", fix="name two different conditions")
    candidates = [candidate] if candidate else [c for c in conditions if c != baseline]
    return [{"id": hid if len(candidates) == 1 else f"{hid}:{cand}", "metric": metric,
             "baseline": baseline, "candidate": cand, "primary": primary,
             "direction": "two-sided"}
            for cand in candidates for hid, metric, primary in ADJUDICATED_HYPOTHESES]


def stored_rows(study_id: str, key: Key, row: dict, ratings: list[dict],
                adjudications: list[dict], now: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """The trial row and its one finished attempt row for a validated result row."""
    task, cond, run = key
    trial_id = f"{study_id}/{task}/{cond}/{run}"
    passed = row["passed"]
    outcome = {True: "correct", False: "incorrect", None: "grading_failure"}[passed]
    reason = ("imported adjudicated result" if passed is not None else
              "imported adjudicated result: passed is null (unresolved criterion)")
    trial = {"id": trial_id, "study_id": study_id, "fixture_id": task,
             "fixture_digest": "imported", "fixture_ref": "", "condition": cond,
             "repetition": run, "block": run, "order_index": row["run_order"]}
    attempt = {"trial_id": trial_id, "study_id": study_id, "attempt": 1, "state": "done",
               "outcome": outcome, "reason": reason, "claims": 0, "regrades": 0,
               "worker_env": row["env"], "finished_at": now,
               "metrics": {"duration_seconds": row.get("cycle_time_seconds")},
               "grade": {"source": IMPORTED,
                         "scores": {f: row.get(f) for f in (*RATER_FIELDS, *VALIDATION_FIELDS)},
                         "row": row, "ratings": ratings, "adjudications": adjudications}}
    return trial, attempt


def _options_body(study_id: str, mode: str, suite_id: Optional[str], digests: dict,
                  baseline: Optional[str], candidate: Optional[str]) -> dict[str, Any]:
    return {"source": IMPORTED, "study_id": study_id, **digests, "suite_id": suite_id,
            "mode": mode, "compare": {"baseline": baseline, "candidate": candidate}}


def already_imported(engine, study_id: str, body: dict) -> Optional[StudyRow]:
    """The existing study when these exact inputs were imported before (a no-op); a study of
    that id with anything else is refused."""
    from sqlmodel import Session

    with Session(engine) as session:
        existing = session.get(StudyRow, study_id)
    if existing is None:
        return None
    lock = existing.lock or {}
    if all(lock.get(k) == v for k, v in body.items()):
        return existing
    raise UserError(f"study '{study_id}' already exists with different inputs "
                    f"({existing.lock_digest[:19]}…)", field="--study",
                    fix="give the changed study a new id; imported studies are immutable")


def summary_of(engine, study: StudyRow) -> "ImportSummary":
    from sqlalchemy import func, select

    with engine.connect() as conn:
        runs = conn.execute(select(func.count()).select_from(TrialRow.__table__).where(
            TrialRow.__table__.c.study_id == study.id)).scalar_one()
    lock = study.lock
    return ImportSummary(study_id=study.id, runs=int(runs),
                         tasks=len(study.manifest["fixtures"]),
                         conditions=[c["name"] for c in study.manifest["conditions"]],
                         ratings=lock.get("ratings", 0),
                         adjudications=lock.get("adjudication_rows", 0),
                         lock_digest=study.lock_digest, unchanged=True)


def import_results(database_url: str, results_path: str | Path, study_id: str, *,
                   raters_path: str | Path | None = None,
                   adjudications_path: str | Path | None = None, mode: str = "controlled",
                   baseline: Optional[str] = None, candidate: Optional[str] = None,
                   suite_id: Optional[str] = None) -> ImportSummary:
    """Create an imported study in one transaction. Re-importing the same files with the same
    options is a no-op; a study of that id with other inputs is refused."""
    if not STUDY_ID.fullmatch(study_id):
        raise UserError(f"study id {study_id!r} is not a plain name", field="--study",
                        fix="use letters, digits, '.', '_' and '-', starting with a letter or digit")
    results_path = Path(results_path)
    raters = Path(raters_path) if raters_path else None
    adjud = Path(adjudications_path) if adjudications_path else None
    digests = {"results_digest": file_digest(results_path), "raters_digest": file_digest(raters),
               "adjudications_digest": file_digest(adjud)}
    body = _options_body(study_id, mode, suite_id, digests, baseline, candidate)
    engine = init_db(database_url)
    existing = already_imported(engine, study_id, body)
    if existing is not None:
        return summary_of(engine, existing)
    problems = Problems()
    ratings = load_ratings(raters, problems) if raters else {}
    adjudications = load_adjudications(adjud, problems) if adjud else {}
    seen: set[Key] = set()
    named: set[Key] = set()
    cells: Counter = Counter()
    labels: dict[str, dict] = {}
    now = time.time()
    with ImportTransaction(engine, study_id, mode) as tx:
        for number, row in iter_jsonl(results_path):
            try:
                if isinstance(row, UserError):
                    raise row
                key = run_key(row, results_path, number)
                named.add(key)  # a bad row's ratings are not also "of a run not in the results"
                check_result(row, results_path, number)
                if key in seen:
                    raise UserError(f"line {number} repeats task {key[0]}, condition {key[1]}, "
                                    f"run {key[2]}", file=results_path, field="run_id",
                                    fix="give every (task_id, condition, run_id) one row")
                if key in adjudications:
                    check_adjudicated(adjudications[key], row, adjud)
                check_rater_rules(key, row, ratings.get(key, []), adjudications.get(key, []),
                                  raters, adjud)
            except UserError as exc:
                problems.add(exc)
                continue
            seen.add(key)
            cells[key[0], key[1]] += 1
            labels.setdefault(key[0], _label(row))
            if not problems.count:  # after a bad row only validate: all of it is rolled back
                tx.add(*stored_rows(study_id, key, row, without_lines(ratings.get(key, [])),
                                    without_lines(adjudications.get(key, [])), now))
        if raters:
            unmatched(ratings, named, raters, "rates", problems)
        if adjud:
            unmatched(adjudications, named, adjud, "adjudicates", problems)
        if not seen and not problems.count:
            problems.add(UserError("no result rows", file=results_path,
                                   fix="give a non-empty results.jsonl"))
        problems.check()
        conditions = sorted({c for _, c in cells})
        tasks = sorted(labels)
        manifest = {"id": study_id, "fixtures": tasks,
                    "conditions": [{"name": c, "agent": "imported"} for c in conditions],
                    "repetitions": max(cells.values()), "seed": 0, "mode": mode,
                    "hypotheses": _hypotheses(conditions, baseline, candidate, results_path),
                    "primary_metrics": ["tpr", "rp_at_k", "rfr"],
                    "description": f"imported from {results_path.name} (adjudicated results)"}
        n_ratings = sum(len(v) for v in ratings.values())
        n_adjud = sum(len(v) for v in adjudications.values())
        lock_body = dict(body, suite_digest=data_digest(tasks), task_labels=labels,
                         ratings=n_ratings, adjudication_rows=n_adjud)
        lock = dict(lock_body, lock_digest=data_digest(lock_body))
        tx.finish(manifest, lock)
    short = sum(1 for key in seen if rater_count(ratings.get(key, [])) < 2)
    return ImportSummary(study_id=study_id, runs=len(seen), tasks=len(tasks),
                         conditions=conditions, ratings=n_ratings, adjudications=n_adjud,
                         lock_digest=lock["lock_digest"],
                         under_two_raters=short if raters else None)

