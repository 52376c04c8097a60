"""The report over a mixed study is byte for byte what the code before issue 19 wrote.

Issue 19 made the report fast at 100,000 attempts (columns instead of row objects, the C JSON
encoder); no reported number or byte may change. data/mixed_report.json is report.json as
commit 38003c3 (before that work) wrote it for the study `mixed_study` builds: three
conditions, retried trials, pending trials, timed_out, grading and infrastructure failures,
missing token counts and costs. Regenerate it only for a deliberate change of the report:
`python tests/report/test_report_fast_path.py` (it says what it wrote).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from evalq.report.compute import compute_report
from evalq.report.write import RENDERERS, write_reports
from evalq.results.store import (StudyRow, TrialRow, create_attempts, init_db, record_attempt,
                                 save_study)

GOLDEN = Path(__file__).with_name("data") / "mixed_report.json"
ENV = {"os": "Linux 6", "machine": "x86_64", "python": "3.11.7", "evalq": "0.1.0", "agents": {}}
OUTCOMES = ["correct", "incorrect", "timed_out", "grading_failure", "infrastructure_failure"]


def _metrics(rng: random.Random) -> dict:
    known = rng.random() < 0.7
    return {"input_tokens": rng.randint(100, 5000) if known else None,
            "output_tokens": rng.randint(10, 900) if known else None,
            "cache_read_tokens": rng.choice([None, 0, 120]),
            "cost_usd": round(rng.uniform(0.001, 0.2), 6) if rng.random() < 0.6 else None,
            "cost_source": rng.choice(["provider", "price_table", None]),
            "duration_seconds": round(rng.uniform(1, 90), 3),
            "tool_calls": rng.choice([None, 3, 11]), "stop_reason": rng.choice(["end", None])}


def mixed_study(db_url: str, study_id: str = "mixed") -> object:
    """12 tasks × 3 conditions × 4 repetitions, every trial state a report can meet."""
    rng = random.Random(19)
    engine = init_db(db_url)
    names = ["base", "cand", "third"]
    tasks = [f"task-{i:02d}" for i in range(12)]
    manifest = {"id": study_id, "fixtures": tasks, "repetitions": 4, "seed": 5,
                "mode": "controlled", "primary_metrics": ["tpr", "pass_at_k"],
                "conditions": [{"name": n, "agent": "scripted", "commit": c}
                               for n, c in zip(names, ["aaa", "bbb", "ccc"])],
                "environment": {"model_id": "m1", "harness_version": "h1"}}
    lock = {"suite_digest": "sha256:suite", "fixtures": {t: {} for t in tasks},
            "lock_digest": f"sha256:{study_id}", "agent_sandbox": "bwrap", "sealed": True}
    trials = [TrialRow(id=f"{study_id}/{t}/{n}/r{rep}", study_id=study_id, fixture_id=t,
                       fixture_digest="sha256:d", fixture_ref="sha256:r", condition=n,
                       repetition=rep, block=rep - 1, order_index=0)
              for rep in range(1, 5) for t in tasks for n in names]
    rng.shuffle(trials)
    for i, trial in enumerate(trials):
        trial.order_index = i
    save_study(engine, StudyRow(id=study_id, manifest=manifest, lock=lock,
                                lock_digest=lock["lock_digest"]), trials)
    never_sent = {t.id for t in trials[-5:]}
    sent = [t for t in trials if t.id not in never_sent]
    create_attempts(engine, [t.id for t in sent], {t.id: 1 for t in sent}, study_id)
    for trial in sent:
        bias = {"base": 0.0, "cand": 0.15, "third": -0.1}[trial.condition]
        attempt = 1
        while True:
            roll = rng.random()
            if roll < 0.06:  # still queued or running: no outcome yet
                break
            outcome = ("correct" if roll < 0.5 + bias else
                       rng.choices(OUTCOMES[1:], [60, 15, 10, 15])[0])
            record_attempt(engine, {
                "trial_id": trial.id, "attempt": attempt, "study_id": study_id,
                "outcome": outcome, "worker_env": ENV, "worker_host": f"w{attempt}",
                "reason": None if outcome in ("correct", "incorrect") else f"{outcome} reason",
                "started_at": 1000.0 + attempt, "finished_at": 1010.5 + attempt,
                "metrics": _metrics(rng), "criteria": [],
                "artifacts": {"workspace": "sha256:w"},
                "grade": {"grader_version": "g/1", "verdict": outcome, "tampered": False}})
            if outcome not in ("grading_failure", "infrastructure_failure") or attempt == 3 \
                    or rng.random() < 0.3:
                break
            attempt += 1
            create_attempts(engine, [trial.id], {trial.id: attempt}, study_id)
    return engine


def _report(db_url: str) -> dict:
    return compute_report(mixed_study(db_url), "mixed", n_resamples=2000)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_report_json_is_what_the_code_before_issue_19_wrote(database, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'r.db'}" if database == "sqlite" else \
        request.getfixturevalue("postgres_url")
    report = _report(url)
    golden = GOLDEN.read_text()
    assert RENDERERS["json"](report) == golden
    written = write_reports(report, tmp_path / "out", ("json",))["json"]  # written in pieces
    assert written.read_text() == golden


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(RENDERERS["json"](_report(f"sqlite:///{tmp}/r.db")))
    print(f"wrote {GOLDEN}", file=sys.stderr)
