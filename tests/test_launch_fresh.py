"""Launching a study never launched before (evalq.queue.launch.launch_study): its rows are
written a chunk at a time while its messages are built, on the real PostgreSQL and Redis."""

from __future__ import annotations

import json

import pytest
import redis

from conftest import write_study


def _launch_env(monkeypatch, tmp_path, redis_url, postgres_url):
    from evalq.config import load_settings
    from evalq.queue.app import app, configure

    monkeypatch.setenv("EVALQ_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EVALQ_BROKER_URL", redis_url)
    monkeypatch.setenv("EVALQ_DATABASE_URL", postgres_url)
    monkeypatch.setenv("EVALQ_ARTIFACTS_URL", str(tmp_path / "artifacts"))
    settings = load_settings()
    configure(app, settings)
    return app, settings


def _queued_trials(redis_url: str) -> list[str]:
    texts = redis.Redis.from_url(redis_url).lrange("agents", 0, -1)
    return [json.loads(t)["headers"]["argsrepr"] for t in reversed(texts)]


def _rows(engine, study_id: str) -> tuple[list[str], dict[str, tuple[int, str]]]:
    from evalq.results.store import attempts_of, trials_of

    trials = [t.id for t in trials_of(engine, study_id)]
    attempts = {a.trial_id: (a.attempt, a.state) for a in attempts_of(engine, study_id)}
    return trials, attempts


def test_a_new_study_is_written_and_sent_in_planned_order(tmp_path, fixture_copies, redis_url,
                                                          postgres_url, monkeypatch):
    from evalq.errors import UserError
    from evalq.queue import launch
    from evalq.study.manifest import load_manifest

    monkeypatch.setattr(launch, "WRITE_CHUNK", 3)  # several chunks from a small study
    app, settings = _launch_env(monkeypatch, tmp_path, redis_url, postgres_url)
    study = load_manifest(write_study(tmp_path / "s", fixture_copies, repetitions=3))
    prepared = launch.prepare_study(study, settings)
    summary = launch.launch_study(app, prepared, resume=False)

    planned = [t["id"] for t in prepared.trials]
    assert (summary.planned, summary.sent, summary.finished) == (len(planned), len(planned), 0)
    trials, attempts = _rows(prepared.engine, study.id)
    assert trials == planned
    assert attempts == {t: (1, "queued") for t in planned}
    assert _queued_trials(redis_url) == [f"{t}#1" for t in planned]
    # launching it again is refused: it has started, and --resume is the way on
    with pytest.raises(UserError, match="already been started"):
        launch.launch_study(app, launch.prepare_study(study, settings), resume=False)


def test_a_failed_write_sends_nothing_past_it_and_resume_finishes_the_launch(
        tmp_path, fixture_copies, redis_url, postgres_url, monkeypatch):
    from evalq.queue import launch
    from evalq.study.manifest import load_manifest

    monkeypatch.setattr(launch, "WRITE_CHUNK", 4)
    app, settings = _launch_env(monkeypatch, tmp_path, redis_url, postgres_url)
    study = load_manifest(write_study(tmp_path / "s", fixture_copies, repetitions=3))
    prepared = launch.prepare_study(study, settings)
    real_save = launch.save_new_study
    calls: list[int] = []

    def save_then_fail(engine, row, trials):
        calls.append(len(trials))
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        real_save(engine, row, trials)

    monkeypatch.setattr(launch, "save_new_study", save_then_fail)
    with pytest.raises(RuntimeError, match="went away"):
        launch.launch_study(app, prepared, resume=False)
    planned = [t["id"] for t in prepared.trials]
    trials, attempts = _rows(prepared.engine, study.id)
    assert trials == planned[:4] and set(attempts) == set(planned[:4])
    assert _queued_trials(redis_url) == [f"{t}#1" for t in planned[:4]]

    monkeypatch.setattr(launch, "save_new_study", real_save)
    summary = launch.launch_study(app, launch.prepare_study(study, settings), resume=True)
    trials, attempts = _rows(prepared.engine, study.id)
    assert trials == planned
    assert attempts == {t: (1, "queued") for t in planned}
    assert summary.planned == len(planned)
    assert set(_queued_trials(redis_url)) == {f"{t}#1" for t in planned}
