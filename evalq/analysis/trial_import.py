"""Import of skill-activation trial rows (one JSON object per trial) as a study.

A row: case_id, condition, skill_commit (null without the skill), model, runtime, trial,
skill_loaded (true, false or null), criteria [{index, passed, evidence}], elapsed_seconds,
input_tokens, output_tokens (null where unavailable, never inferred), artifacts; optionally
skill_expected (whether the skill should activate on the case). A run is correct when every
criterion passed, incorrect when one failed, and a grading failure (unresolved) when one is
null or there are none. One file holds one model: results are reported per model and never
pooled, so each model is its own study. Every bad row is named with its line, the field and
the fix, and then nothing is kept.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Optional

from evalq.analysis.import_write import ImportTransaction
from evalq.analysis.jsonl import iter_jsonl, require
from evalq.analysis.adjudicated_import import (STUDY_ID, ImportSummary, already_imported, file_digest,
                                   summary_of)
from evalq.analysis.adjudicated_rows import MAX_INT, Problems
from evalq.digest import data_digest
from evalq.errors import UserError
from evalq.results.store import init_db

SOURCE = "activation-trials"
REQUIRED = ("case_id", "condition", "skill_commit", "model", "runtime", "trial",
            "skill_loaded", "criteria", "elapsed_seconds", "input_tokens", "output_tokens",
            "artifacts")
ROW_FORMAT = "the skill-activation trial row"


def _fail(path: Path, number: int, field: str, what: str, fix: str) -> UserError:
    return UserError(f"line {number}: {what}", file=path, field=field, fix=fix)


def _criteria(row: dict, path: Path, number: int) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(require(row, "criteria", (list,), path, number)):
        if not isinstance(item, dict) or not isinstance(item.get("index"), int) or \
                isinstance(item.get("index"), bool) or \
                not isinstance(item.get("passed", 0), (bool, type(None))) or "passed" not in item:
            raise _fail(path, number, f"criteria.{i}", f"criteria[{i}] is {item!r}",
                        "give each criterion as {\"index\": 0, \"passed\": true|false|null, "
                        "\"evidence\": \"...\"} (null: unresolved, with the reason as evidence)")
        out.append({"name": item["name"] if isinstance(item.get("name"), str)
                    else f"criterion {item['index']}", "index": item["index"],
                    "passed": item["passed"], "evidence": item.get("evidence"),
                    # a named criterion evalq exported as not required decides no outcome
                    "required": item.get("required") is not False})
    return out


def _name(row: dict, field: str, path: Path, number: int) -> str:
    value = require(row, field, (str,), path, number)
    if "/" in value or not value.strip():
        raise _fail(path, number, field, f"'{field}' is {value!r}",
                    f"give {field} as a non-blank name without '/'")
    return value


def _amount(row: dict, field: str, kinds: tuple, path: Path, number: int) -> Any:
    value = require(row, field, kinds, path, number, nullable=True)
    if value is not None and not 0 <= value <= 10**12:
        raise _fail(path, number, field, f"'{field}' is {value}, outside 0..10^12",
                    f"give {field} as a non-negative number, or null when unavailable")
    return value


def check_row(row: dict, path: Path, number: int) -> dict[str, Any]:
    """The row's values as stored; its first problem raised."""
    for field in REQUIRED:
        if field not in row:
            raise _fail(path, number, field, f"has no '{field}'",
                        f"add \"{field}\" to every row ({ROW_FORMAT}; null where unavailable)")
    task, cond = (_name(row, field, path, number) for field in ("case_id", "condition"))
    trial = require(row, "trial", (int,), path, number)
    if not 1 <= trial <= MAX_INT:
        raise _fail(path, number, "trial", f"'trial' is {trial}", "number trials 1..k")
    model = require(row, "model", (str,), path, number)
    if not model.strip():
        raise _fail(path, number, "model", "'model' is blank", "give the exact model id")
    return {"case": task, "condition": cond, "trial": trial, "model": model,
            "skill_commit": require(row, "skill_commit", (str,), path, number, nullable=True),
            "runtime": require(row, "runtime", (str,), path, number, nullable=True),
            "skill_loaded": require(row, "skill_loaded", (bool,), path, number, nullable=True),
            "skill_expected": require(row, "skill_expected", (bool,), path, number,
                                      nullable=True) if "skill_expected" in row else None,
            "criteria": _criteria(row, path, number),
            "elapsed": _amount(row, "elapsed_seconds", (int, float), path, number),
            "input_tokens": _amount(row, "input_tokens", (int,), path, number),
            "output_tokens": _amount(row, "output_tokens", (int,), path, number)}


def _outcome(criteria: list[dict]) -> tuple[str, str]:
    verdicts = [c["passed"] for c in criteria if c["required"]]
    if False in verdicts:
        return "incorrect", "imported trial: a criterion failed"
    if not verdicts or None in verdicts:
        return "grading_failure", "imported trial: a criterion is unresolved (null) or none given"
    return "correct", "imported trial: every criterion passed"


class _Consistency:
    """What must agree across rows: one model per file, one skill revision per condition,
    one declared activation per case."""

    def __init__(self, path: Path):
        self.path = path
        self.first: dict[tuple[str, str], tuple[Any, int]] = {}

    def same(self, scope: str, field: str, value: Any, number: int, fix: str) -> None:
        seen = self.first.setdefault((scope, field), (value, number))
        if seen[0] != value:
            raise _fail(self.path, number, field, f"{field} is {value!r} but line {seen[1]} "
                        f"gives {seen[0]!r}{' for ' + scope if scope else ''}", fix)


def import_trials(database_url: str, path: str | Path, study_id: str):
    """Create a study from trial rows in one transaction; the same file again is a no-op."""
    if not STUDY_ID.fullmatch(study_id):
        raise UserError(f"study id {study_id!r} is not a plain name", field="--study",
                        fix="use letters, digits, '.', '_' and '-', starting with a letter or digit")
    path = Path(path)
    body = {"source": SOURCE, "study_id": study_id, "results_digest": file_digest(path)}
    engine = init_db(database_url)
    existing = already_imported(engine, study_id, body)
    if existing is not None:
        return summary_of(engine, existing)
    problems, agree = Problems(), _Consistency(path)
    seen: set[tuple[str, str, int]] = set()
    cells: Counter = Counter()
    labels: dict[str, dict] = {}
    skills: dict[str, dict] = {}
    model = runtime = None
    now = time.time()
    with ImportTransaction(engine, study_id, "controlled") as tx:
        for number, row in iter_jsonl(path):
            try:
                if isinstance(row, UserError):
                    raise row
                r = check_row(row, path, number)
                agree.same("", "model", r["model"], number,
                           "import each model as its own study: results are reported per "
                           "model, never pooled")
                agree.same(f"condition {r['condition']}", "skill_commit", r["skill_commit"],
                           number, "give each skill revision a condition of its own")
                agree.same(f"case {r['case']}", "skill_expected", r["skill_expected"], number,
                           "declare a case's expected activation the same on every row")
                key = (r["case"], r["condition"], r["trial"])
                if key in seen:
                    raise _fail(path, number, "trial", f"repeats case {key[0]}, condition "
                                f"{key[1]}, trial {key[2]}", "give every trial one row")
            except UserError as exc:
                problems.add(exc)
                continue
            seen.add(key)
            model = r["model"]
            runtime = runtime or r["runtime"]
            cells[r["case"], r["condition"]] += 1
            labels.setdefault(r["case"], {"track": None, "split": None, "suitable": True,
                                          "skill_expected": r["skill_expected"]})
            if r["skill_commit"] is not None:
                skills[r["condition"]] = {"commit": r["skill_commit"]}
            if not problems.count:
                tx.add(*_stored(study_id, r, number, now))
        if not seen and not problems.count:
            problems.add(UserError("no trial rows", file=path, fix="give a non-empty JSONL file"))
        problems.check()
        conditions = sorted({c for _, c in cells})
        manifest = {"id": study_id, "fixtures": sorted(labels),
                    "conditions": [dict({"name": c, "agent": "imported", "model": model},
                                        **({"skill": skills[c]["commit"]} if c in skills
                                           else {})) for c in conditions],
                    "repetitions": max(cells.values()), "seed": 0, "mode": "controlled",
                    "environment": {"model_id": model, "harness_version": runtime},
                    "hypotheses": [], "primary_metrics": ["tpr"],
                    "description": f"imported from {path.name} (skill-activation trials)"}
        lock_body = dict(body, suite_digest=data_digest(sorted(labels)), task_labels=labels,
                         skills=skills)
        lock = dict(lock_body, lock_digest=data_digest(lock_body))
        tx.finish(manifest, lock)
    return ImportSummary(study_id=study_id, runs=len(seen), tasks=len(labels),
                         conditions=conditions, ratings=0, adjudications=0,
                         lock_digest=lock["lock_digest"])


def _stored(study_id: str, r: dict, number: int, now: float) -> tuple[dict[str, Any], dict[str, Any]]:
    trial_id = f"{study_id}/{r['case']}/{r['condition']}/r{r['trial']}"
    outcome, reason = _outcome(r["criteria"])
    trial = {"id": trial_id, "study_id": study_id, "fixture_id": r["case"],
             "fixture_digest": "imported", "fixture_ref": "", "condition": r["condition"],
             "repetition": r["trial"], "block": r["trial"], "order_index": number}
    attempt = {"trial_id": trial_id, "study_id": study_id, "attempt": 1, "state": "done",
               "outcome": outcome, "reason": reason, "claims": 0, "regrades": 0,
               "worker_env": {"model": r["model"], "runtime": r["runtime"]},
               "finished_at": now, "criteria": r["criteria"],
               "metrics": {"skill_loaded": r["skill_loaded"], "duration_seconds": r["elapsed"],
                           "input_tokens": r["input_tokens"],
                           "output_tokens": r["output_tokens"]},
               "grade": {"source": SOURCE}}
    return trial, attempt
