"""Validation of adjudicated-results input rows (results, raters, adjudications), one
problem per bad row.

Each check raises the row's first problem as a UserError naming the file, the line and the
field; `Problems` gathers them so a whole file is reported at once (evalq.analysis.adjudicated_import).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from evalq.errors import UserError, UserErrors
from evalq.analysis.jsonl import iter_jsonl, require
from evalq.analysis.runs import RATER_FIELDS, VALIDATION_FIELDS
from evalq.study.executor import executors

REQUIRED = ("task_id", "condition", "run_id", "run_order", "env", "artifact_path",
            "blinded_artifact_path", *RATER_FIELDS, "cycle_time_seconds", "adjudicated",
            "rater_ids", "notes")
#: Run numbers and orders are stored in 32-bit integer columns.
MAX_INT = 2**31 - 1
#: Bad rows named one per line before the rest are only counted.
SHOWN = 20
Key = tuple[str, str, int]


def run_key(row: dict, path: Path, number: int) -> Key:
    task = require(row, "task_id", (str,), path, number)
    cond = require(row, "condition", (str,), path, number)
    for field, value in (("task_id", task), ("condition", cond)):
        if "/" in value or not value.strip():
            raise UserError(f"line {number}: '{field}' is {value!r}", file=path, field=field,
                            fix=f"give {field} as a non-blank name without '/'")
    run = require(row, "run_id", (int,), path, number)
    if not 0 <= run <= MAX_INT:
        raise UserError(f"line {number}: 'run_id' is {run}, outside 0..{MAX_INT}", file=path,
                        field="run_id", fix="number runs 1..k")
    return task, cond, run


class Problems:
    """Collects one UserError per bad row; `check` raises them all at once, with a count."""

    def __init__(self) -> None:
        self.errors: list[UserError] = []
        self.count = 0

    def add(self, error: UserError) -> None:
        self.count += 1
        if len(self.errors) < SHOWN:
            self.errors.append(error)

    def check(self) -> None:
        if self.errors:
            raise UserErrors(self.errors, more=self.count - len(self.errors))


def check_result(row: dict, path: Path, number: int) -> Key:
    """Validate one results.jsonl row; the first problem is raised."""
    key = run_key(row, path, number)
    for field in REQUIRED:
        if field not in row:
            raise UserError(f"line {number} has no '{field}'", file=path, field=field,
                            fix=f"add \"{field}\" to every row (the adjudicated result row)")
    for field in (*RATER_FIELDS, *VALIDATION_FIELDS):
        if field in row:  # null: nobody resolved it (an unresolved criterion)
            require(row, field, (bool,), path, number, nullable=True)
    order = require(row, "run_order", (int,), path, number)
    if not 0 <= order <= MAX_INT:
        raise UserError(f"line {number}: 'run_order' is {order}, outside 0..{MAX_INT}",
                        file=path, field="run_order", fix="number runs in the order they ran")
    require(row, "env", (dict,), path, number)
    require(row, "adjudicated", (bool,), path, number)
    require(row, "rater_ids", (list,), path, number)
    require(row, "cycle_time_seconds", (int, float), path, number, nullable=True)
    if "executor_id" in row:  # who executed the run: never one of its raters
        require(row, "executor_id", (str, int), path, number, nullable=True)
    if "executor_ids" in row:
        ids = require(row, "executor_ids", (list,), path, number, nullable=True)
        if any(not isinstance(i, str) for i in ids or []):
            raise UserError(f"line {number}: 'executor_ids' is {ids!r}", file=path,
                            field="executor_ids", fix="give executor_ids as a list of rater ids")
    return key


def _grouped(path: Path, problems: Problems, entry_of) -> dict[Key, list[dict]]:
    """{run key: [entry, ...]} for a per-run file; entry_of(row, number, earlier entries of
    that run) builds an entry or raises the row's problem, which is gathered, not raised."""
    out: dict[Key, list[dict]] = {}
    for number, row in iter_jsonl(path):
        try:
            if isinstance(row, UserError):
                raise row
            key = run_key(row, path, number)
            entry = entry_of(row, number, out.get(key, []))
        except UserError as exc:
            problems.add(exc)
            continue
        entry["_line"] = number
        out.setdefault(key, []).append(entry)
    return out


def load_ratings(path: Path, problems: Problems) -> dict[Key, list[dict]]:
    """Rows of {task_id, condition, run_id, rater_id, <rater field>: bool or null, ...}."""

    def rating(row: dict, number: int, earlier: list[dict]) -> dict[str, Any]:
        rater = str(require(row, "rater_id", (str, int), path, number))
        if any(r["rater_id"] == rater for r in earlier):
            raise UserError(f"line {number}: rater {rater} scored this run twice",
                            file=path, field="rater_id", fix="keep one row per (run, rater)")
        entry: dict[str, Any] = {"rater_id": rater}
        for field in RATER_FIELDS:
            entry[field] = require(row, field, (bool,), path, number, nullable=True)
        return entry

    return _grouped(path, problems, rating)


def load_adjudications(path: Path, problems: Problems) -> dict[Key, list[dict]]:
    """Rows of {task_id, condition, run_id, [adjudicator_id], <rater field>: bool or null, ...}.

    The adjudicated value is the final score; it is checked against results.jsonl as that
    file is read (`check_adjudicated`).
    """

    def adjudication(row: dict, number: int, _earlier: list[dict]) -> dict[str, Any]:
        fields = {f: row[f] for f in RATER_FIELDS if f in row}
        if not fields:
            raise UserError(f"line {number} adjudicates no outcome", file=path,
                            field="passed", fix=f"give one of {', '.join(RATER_FIELDS)}")
        for field in fields:  # null: the adjudicator could not resolve it (kept unresolved)
            require(row, field, (bool,), path, number, nullable=True)
        return dict(fields, adjudicator_id=row.get("adjudicator_id"))

    return _grouped(path, problems, adjudication)


def check_adjudicated(entries: list[dict], row: dict, path: Path) -> None:
    for entry in entries:
        for field, value in entry.items():
            if field in RATER_FIELDS and row[field] != value:
                raise UserError(f"line {entry['_line']}: adjudicated {field}={value} but "
                                f"results.jsonl says {row[field]}", file=path, field=field,
                                fix="rebuild results.jsonl from the adjudications")


def unmatched(entries: dict[Key, list[dict]], seen: set[Key], path: Path, what: str,
              problems: Problems) -> None:
    """Ratings or adjudications of runs that results.jsonl does not hold."""
    for key, rows in entries.items():
        if key not in seen:
            for r in rows:
                problems.add(UserError(
                    f"line {r['_line']} {what} a run not in the results ({key[0]}, {key[1]}, "
                    f"run {key[2]})", file=path, field="run_id",
                    fix=f"{what} only runs that results.jsonl holds"))


def without_lines(entries: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "_line"} for e in entries]


def _run_name(key: Key) -> str:
    return f"({key[0]}, {key[1]}, run {key[2]})"


def check_rater_rules(key: Key, row: dict, ratings: list[dict], adjudications: list[dict],
                      raters_path: Optional[Path], adjud_path: Optional[Path]) -> None:
    """The protocol's rules for one run's scores, the first broken one raised: nobody scores
    or adjudicates a run they executed, and every outcome the raters disagree on is settled
    by an adjudication (the adjudicated value is the final score)."""
    ran = executors(row.get("executor_ids", row.get("executor_id")))
    if ran:
        for entries, path, role, field in ((ratings, raters_path, "rater", "rater_id"),
                                           (adjudications, adjud_path, "adjudicator",
                                            "adjudicator_id")):
            for entry in entries:
                who = entry.get(field)
                if who is not None and str(who) in ran:
                    raise UserError(f"line {entry['_line']}: {role} {who} executed the run "
                                    f"{_run_name(key)} and may not score it", file=path,
                                    field=field, fix="have a rater from the pool who did not "
                                                     "execute the run score it")
    settled = {f for entry in adjudications for f in entry if f in RATER_FIELDS}
    for field in RATER_FIELDS:
        scored = [e for e in ratings if e.get(field) is not None]
        if len({e[field] for e in scored}) > 1 and field not in settled:
            ids = ", ".join(sorted(str(e["rater_id"]) for e in scored))
            raise UserError(f"line {scored[0]['_line']}: raters {ids} disagree on {field} for "
                            f"{_run_name(key)} and no adjudication settles it",
                            file=raters_path, field=field,
                            fix="add the third blinded rater's value of it to "
                                "adjudications.jsonl and pass --adjudications")


def rater_count(ratings: list[dict]) -> int:
    """Distinct raters of one run."""
    return len({str(r["rater_id"]) for r in ratings})
