"""Import of seed-003 results.jsonl (+ raters.jsonl, adjudications.jsonl) into the results database.

Storage (no extra table): a StudyRow whose lock has ``source = "seed-003"`` and the input
digests; one TrialRow per (task, condition, run) and one finished AttemptRow each, whose
``grade`` holds ``{"source", "scores", "row", "ratings", "adjudications"}`` and whose
``worker_env`` is the row's env block. ``passed`` maps to outcome correct/incorrect, so
the ordinary report, export and compare read imported studies like native ones.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from evalq.digest import data_digest
from evalq.errors import UserError
from evalq.results.store import StudyRow, TrialRow, init_db, record_attempt, save_study
from evalq.analysis.jsonl import read_jsonl, require
from evalq.analysis.runs import IMPORTED, RATER_FIELDS, VALIDATION_FIELDS

REQUIRED = ("task_id", "condition", "run_id", "run_order", "env", "artifact_path",
            "blinded_artifact_path", *RATER_FIELDS, "cycle_time_seconds", "adjudicated",
            "rater_ids", "notes")
SEED003_HYPOTHESES = (("H1", "tpr", True), ("H2", "rp_at_k", True), ("H3", "rfr", True),
                      ("H4", "cpr", False), ("H5", "nrr", False))
Key = tuple[str, str, int]


@dataclass
class ImportSummary:
    study_id: str
    runs: int
    tasks: int
    conditions: list[str]
    ratings: int
    adjudications: int
    lock_digest: str


def _key(row: dict, path: Path, number: int) -> Key:
    return (require(row, "task_id", (str,), path, number),
            require(row, "condition", (str,), path, number),
            require(row, "run_id", (int,), path, number))


def load_results(path: Path) -> dict[Key, dict[str, Any]]:
    rows: dict[Key, dict[str, Any]] = {}
    for number, row in read_jsonl(path):
        key = _key(row, path, number)
        for field in REQUIRED:
            if field not in row:
                raise UserError(f"line {number} has no '{field}'", file=path, field=field,
                                fix=f"add \"{field}\" to every row (seed 003 result schema)")
        for field in RATER_FIELDS:
            require(row, field, (bool,), path, number)
        for field in VALIDATION_FIELDS:
            if field in row:
                require(row, field, (bool,), path, number, nullable=True)
        require(row, "run_order", (int,), path, number)
        require(row, "env", (dict,), path, number)
        require(row, "adjudicated", (bool,), path, number)
        require(row, "rater_ids", (list,), path, number)
        require(row, "cycle_time_seconds", (int, float), path, number, nullable=True)
        if key in rows:
            raise UserError(f"line {number} repeats task {key[0]}, condition {key[1]}, run "
                            f"{key[2]}", file=path, field="run_id",
                            fix="give every (task_id, condition, run_id) one row")
        rows[key] = row
    if not rows:
        raise UserError("no result rows", file=path, fix="give a non-empty results.jsonl")
    return rows


def load_ratings(path: Path, results: dict[Key, dict]) -> dict[Key, list[dict]]:
    ratings: dict[Key, list[dict]] = {}
    for number, row in read_jsonl(path):
        key = _key(row, path, number)
        if key not in results:
            raise UserError(f"line {number} rates a run not in the results ({key[0]}, {key[1]}, "
                            f"run {key[2]})", file=path, field="run_id",
                            fix="rate only runs that results.jsonl holds")
        rater = require(row, "rater_id", (str, int), path, number)
        if any(str(r["rater_id"]) == str(rater) for r in ratings.get(key, [])):
            raise UserError(f"line {number}: rater {rater} scored this run twice", file=path,
                            field="rater_id", fix="keep one row per (run, rater)")
        entry = {"rater_id": str(rater)}
        for field in RATER_FIELDS:
            entry[field] = require(row, field, (bool,), path, number, nullable=True)
        ratings.setdefault(key, []).append(entry)
    return ratings


def load_adjudications(path: Path, results: dict[Key, dict]) -> dict[Key, list[dict]]:
    """Rows of {task_id, condition, run_id, [adjudicator_id], <rater field>: bool, ...}.

    The adjudicated value is the final score, so it must equal the value in results.jsonl.
    """
    out: dict[Key, list[dict]] = {}
    for number, row in read_jsonl(path):
        key = _key(row, path, number)
        if key not in results:
            raise UserError(f"line {number} adjudicates a run not in the results", file=path,
                            field="run_id", fix="adjudicate only runs that results.jsonl holds")
        fields = {f: row[f] for f in RATER_FIELDS if f in row}
        if not fields:
            raise UserError(f"line {number} adjudicates no outcome", file=path,
                            field="passed", fix=f"give one of {', '.join(RATER_FIELDS)}")
        for field, value in fields.items():
            require(row, field, (bool,), path, number)
            if results[key][field] != value:
                raise UserError(f"line {number}: adjudicated {field}={value} but results.jsonl "
                                f"says {results[key][field]}", file=path, field=field,
                                fix="rebuild results.jsonl from the adjudications")
        out.setdefault(key, []).append(dict(fields, adjudicator_id=row.get("adjudicator_id")))
    return out


def _file_digest(path: Optional[Path]) -> Optional[str]:
    return None if path is None else "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _labels(results: dict[Key, dict]) -> dict[str, dict]:
    labels: dict[str, dict] = {}
    for (task, _, _), row in results.items():
        split = row.get("split") or {"unseen": "held-out"}.get(row.get("kind"), row.get("kind"))
        labels.setdefault(task, {"track": row.get("track"), "split": split,
                                 "suitable": row.get("suitable", True)})
    return labels


def _hypotheses(conditions: list[str], baseline: Optional[str], candidate: Optional[str],
                path: Path) -> list[dict]:
    if baseline is None and candidate is None:
        if len(conditions) != 2:
            if len(conditions) < 2:
                return []
            raise UserError(f"{len(conditions)} conditions; which pair is compared?", file=path,
                            field="condition", fix="pass --baseline NAME --candidate NAME")
        baseline = "single_prompt" if "single_prompt" in conditions else conditions[0]
        candidate = next(c for c in conditions if c != baseline)
    for flag, name in (("--baseline", baseline), ("--candidate", candidate)):
        if name not in conditions:
            raise UserError(f"'{name}' is not a condition in the results", file=path,
                            field=flag, fix=f"use one of {', '.join(conditions)}")
    return [{"id": hid, "metric": metric, "baseline": baseline, "candidate": candidate,
             "primary": primary, "direction": "two-sided"}
            for hid, metric, primary in SEED003_HYPOTHESES]


def import_results(database_url: str, results_path: str | Path, study_id: str, *,
                   raters_path: str | Path | None = None,
                   adjudications_path: str | Path | None = None, mode: str = "controlled",
                   baseline: Optional[str] = None, candidate: Optional[str] = None,
                   suite_id: Optional[str] = None) -> ImportSummary:
    """Create (or re-confirm, when identical) an imported study; a changed input is refused."""
    results_path = Path(results_path)
    raters = Path(raters_path) if raters_path else None
    adjud = Path(adjudications_path) if adjudications_path else None
    results = load_results(results_path)
    ratings = load_ratings(raters, results) if raters else {}
    adjudications = load_adjudications(adjud, results) if adjud else {}
    conditions = sorted({k[1] for k in results})
    tasks = sorted({k[0] for k in results})
    cells: dict[tuple[str, str], int] = {}
    for task, cond, _ in results:
        cells[(task, cond)] = cells.get((task, cond), 0) + 1
    manifest = {"id": study_id, "fixtures": tasks,
                "conditions": [{"name": c, "agent": "imported"} for c in conditions],
                "repetitions": max(cells.values()), "seed": 0, "mode": mode,
                "hypotheses": _hypotheses(conditions, baseline, candidate, results_path),
                "primary_metrics": ["tpr", "rp_at_k", "rfr"],
                "description": f"imported from {results_path.name} (seed 003 results)"}
    body = {"source": IMPORTED, "study_id": study_id,
            "results_digest": _file_digest(results_path), "raters_digest": _file_digest(raters),
            "adjudications_digest": _file_digest(adjud), "suite_id": suite_id,
            "suite_digest": data_digest(tasks), "task_labels": _labels(results), "mode": mode}
    lock = dict(body, lock_digest=data_digest(body))
    engine = init_db(database_url)
    study = StudyRow(id=study_id, manifest=manifest, manifest_path=None, lock=lock,
                     lock_digest=lock["lock_digest"], mode=mode)
    ordered = sorted(results.items(), key=lambda kv: (kv[1]["run_order"], kv[0]))
    trials = [TrialRow(id=f"{study_id}/{t}/{c}/{r}", study_id=study_id, fixture_id=t,
                       fixture_digest="imported", fixture_ref="", condition=c, repetition=r,
                       block=r, order_index=row["run_order"])
              for (t, c, r), row in ordered]
    save_study(engine, study, trials)
    now = time.time()
    for (t, c, r), row in ordered:
        scores = {f: row.get(f) for f in (*RATER_FIELDS, *VALIDATION_FIELDS)}
        record_attempt(engine, {
            "trial_id": f"{study_id}/{t}/{c}/{r}", "attempt": 1, "study_id": study_id,
            "outcome": "correct" if row["passed"] else "incorrect",
            "reason": "imported seed-003 result", "worker_env": row["env"],
            "finished_at": now,
            "metrics": {"duration_seconds": row.get("cycle_time_seconds")},
            "grade": {"source": IMPORTED, "scores": scores, "row": row,
                      "ratings": ratings.get((t, c, r), []),
                      "adjudications": adjudications.get((t, c, r), [])}})
    return ImportSummary(study_id=study_id, runs=len(results), tasks=len(tasks),
                         conditions=conditions, ratings=sum(len(v) for v in ratings.values()),
                         adjudications=sum(len(v) for v in adjudications.values()),
                         lock_digest=lock["lock_digest"])

