"""Status counts from SQL aggregates, and the launcher's event counter, agree with a view built
row by row from every trial and attempt (report/attempts.py), on SQLite and PostgreSQL."""

from __future__ import annotations

import random

import pytest

from evalq.ops.status import study_status
from evalq.ops.status_watch import StatusWatch
from evalq.report.attempts import trial_views
from evalq.results.progress import SettledCounter
from evalq.results.store import (StudyRow, attempts_of, create_attempts, get_engine, init_db,
                                 mark_state, record_attempt, save_study, trials_of)

OUTCOMES = ["correct", "incorrect", "timed_out", "grading_failure", "infrastructure_failure"]


def _expected(engine):
    views = trial_views(trials_of(engine, "s"), attempts_of(engine, "s"))
    states, outcomes, hosts, first = {}, {}, {}, {}
    for v in views:
        latest = v.attempts[-1] if v.attempts else None
        if latest is None or latest.outcome is None:
            name = "unsent" if latest is None else latest.state
            states[name] = states.get(name, 0) + 1
        else:
            outcomes[v.outcome] = outcomes.get(v.outcome, 0) + 1
        named = [a.worker_host for a in v.attempts if a.worker_host]
        host = named[-1] if named else "(no worker yet)"
        hosts[host] = hosts.get(host, 0) + 1
        f = v.first.outcome if v.first else "pending"
        first[f] = first.get(f, 0) + 1
    settled = sum(1 for v in views if v.settled)
    return states, outcomes, hosts, first, settled


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'e.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    yield init_db(url)
    get_engine.cache_clear()


def test_aggregates_and_counter_match_a_row_by_row_view(engine):
    rng = random.Random(5)
    trials = [dict(id=f"s/f{i % 7}/c{i % 2}/r{i}", study_id="s", fixture_id=f"f{i % 7}",
                   fixture_digest="d", fixture_ref="r", condition=f"c{i % 2}", repetition=i,
                   block=i, order_index=i) for i in range(300)]
    save_study(engine, StudyRow(id="s", manifest={}, lock={}, lock_digest="x"), trials)
    sent = [t["id"] for t in trials[:260]]  # 40 never sent
    watch = StatusWatch(engine, "s")
    watch.tick()  # loaded before anything was sent; later ticks read only the changes
    create_attempts(engine, sent, {t: 1 for t in sent}, "s")
    counter = SettledCounter(engine, "s")
    for tid in sent:
        roll = rng.random()
        if roll < 0.15:
            mark_state(engine, tid, 1, state=rng.choice(["running", "grading"]),
                       worker_host=rng.choice(["h1", "h2"]))
        elif roll < 0.95:
            record_attempt(engine, dict(trial_id=tid, attempt=1, study_id="s",
                                        outcome=rng.choice(OUTCOMES),
                                        worker_host=rng.choice(["h1", "h2", None])))
    redo = [t for t in sent if rng.random() < 0.3]
    create_attempts(engine, redo, {t: 2 for t in redo}, "s")  # resubmitted: pending again
    _same(watch.tick(), study_status(engine, "s"))
    for tid in redo[::2]:
        record_attempt(engine, dict(trial_id=tid, attempt=2, study_id="s",
                                    outcome=rng.choice(OUTCOMES), worker_host="h3"))
    record_attempt(engine, dict(trial_id=redo[0], attempt=2, study_id="s",
                                outcome="correct"))  # a duplicate delivery: no change

    states, outcomes, hosts, first, settled = _expected(engine)
    status = study_status(engine, "s")
    assert {k: v for k, v in status.by_state.items() if v} == states
    assert {k: v for k, v in status.by_outcome.items() if v} == outcomes
    assert status.by_host == dict(sorted(hosts.items()))
    assert {k: v for k, v in status.first_attempt_outcomes.items() if v} == first
    assert all(status.checks.values()) and status.attempts == 260 + len(redo)
    assert counter() == (settled, 300)
    assert SettledCounter(engine, "s")() == (settled, 300)  # a fresh one agrees
    _same(watch.tick(), status)
    _same(StatusWatch(engine, "s").tick(), status)


def _same(watched, counted) -> None:
    keys = ("planned", "finished", "by_state", "by_outcome", "by_host", "first_attempt_outcomes",
            "attempts", "expired_leases", "environments")
    assert {k: getattr(watched, k) for k in keys} == {k: getattr(counted, k) for k in keys}
