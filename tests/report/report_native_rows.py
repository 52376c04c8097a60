"""A native study written straight into the results DB through the store's own upserts.

Faster than running agents; the rows have the shape the runner and grader write.
"""

from __future__ import annotations

from evalq.results.store import StudyRow, TrialRow, create_attempts, init_db, record_attempt, save_study

ENV = {"os": "Linux 6", "machine": "x86_64", "python": "3.11.7", "evalq": "0.1.0", "agents": {}}


def make_study(db_url: str, study_id: str, *, tasks=("t1", "t2", "t3"), conditions=None,
               k: int = 3, mode: str = "controlled", model_id: str = "m1",
               outcome=lambda task, cond, rep: "correct", metrics=lambda task, cond, rep: {},
               hypotheses=None, grader="evalq-grader/1", toolchain=lambda task, rep: None):
    conditions = conditions or [{"name": "base", "agent": "scripted", "commit": "aaa"},
                                {"name": "cand", "agent": "scripted", "commit": "bbb"}]
    engine = init_db(db_url)
    manifest = {"id": study_id, "fixtures": list(tasks), "conditions": conditions,
                "repetitions": k, "seed": 3, "mode": mode,
                "environment": {"model_id": model_id, "harness_version": "h1"},
                "hypotheses": hypotheses or [], "primary_metrics": ["tpr"]}
    lock = {"suite_digest": "sha256:suite", "fixtures": {t: {} for t in tasks},
            "lock_digest": f"sha256:{study_id}"}
    trials, order = [], 0
    for rep in range(1, k + 1):
        for task in tasks:
            for cond in conditions:
                trials.append(TrialRow(id=f"{study_id}-{task}-{cond['name']}-{rep}",
                                       study_id=study_id, fixture_id=task, fixture_digest="d",
                                       fixture_ref="r", condition=cond["name"], repetition=rep,
                                       block=rep, order_index=order))
                order += 1
    save_study(engine, StudyRow(id=study_id, manifest=manifest, lock=lock,
                                lock_digest=lock["lock_digest"], mode=mode), trials)
    create_attempts(engine, [t.id for t in trials], {t.id: 1 for t in trials}, study_id)
    for t in trials:
        full = {"input_tokens": None, "output_tokens": None, "cost_usd": None}
        full.update(metrics(t.fixture_id, t.condition, t.repetition))
        record_attempt(engine, {"trial_id": t.id, "attempt": 1, "study_id": study_id,
                                "outcome": outcome(t.fixture_id, t.condition, t.repetition),
                                "worker_env": ENV, "metrics": full,
                                "grade": {"grader_version": grader,
                                          "toolchain": toolchain(t.fixture_id, t.repetition)},
                                "criteria": []})
    return engine
