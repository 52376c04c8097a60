"""Through a whole embedded study: fresh profiles per run, a planted credential found nowhere,
no-usage runs flagged as incomplete accounting, and the wall-time limit giving timed_out."""

from __future__ import annotations

import json
import sqlite3

import pytest

from evalq.workers.gateway import PLACEHOLDER_KEY

from test_agents_support import (artifact, attempts, copy_fixture, expanded,  # noqa: F401
                                 run_study, write_manifest)

PLANTED = "sk-ant-planted-7f3a9c2e51d84b06aa"


@pytest.fixture(scope="module")
def probe_study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe")
    fixture = copy_fixture("py-slugify-bugfix", tmp / "fixtures")
    conditions = '''
[[conditions]]
name = "probe"
agent = "scripted"
settings = { action = "probe", credential_env = ["ANTHROPIC_API_KEY"], echo_env = ["ANTHROPIC_API_KEY"] }
'''
    manifest = write_manifest(tmp / "study", fixture, conditions, study_id="probe", repetitions=3)
    home = tmp / "home"
    report = run_study(manifest, home, {"ANTHROPIC_API_KEY": PLANTED})
    return home, report


def _events(home, row, name):
    data = artifact(home, row["artifacts"]["stdout"]).decode()
    return [json.loads(l) for l in data.splitlines() if l.startswith("{") and
            json.loads(l).get("type") == name]


def test_runs_never_share_home_workspace_or_tmp(probe_study):
    home, _ = probe_study
    rows = attempts(home)
    assert len(rows) == 3
    probes = [_events(home, r, "probe")[0] for r in rows]
    for kind in ("home", "tmp", "workspace"):
        paths = [p["paths"][kind] for p in probes]
        assert len(set(paths)) == 3, (kind, paths)
    # each run left a marker in its HOME, TMPDIR and workspace; no later run saw one
    assert all(not any(p["marker_seen"].values()) for p in probes), probes
    assert not any((home / "runs").glob("evalq-run-*")), "profiles are removed after each run"


def test_sealed_agent_gets_a_placeholder_and_the_credential_is_stored_nowhere(probe_study):
    home, _ = probe_study
    rows = attempts(home)
    # the sealed agent asked for the credential and got only the placeholder (the real key
    # stays outside the sandbox, with the door / model gateway)
    stdout = artifact(home, rows[0]["artifacts"]["stdout"]).decode()
    assert f"ANTHROPIC_API_KEY={PLACEHOLDER_KEY}" in stdout
    needle = PLANTED.encode()
    searched = 0
    for path in home.rglob("*"):
        if path.is_file():
            for blob in expanded(path.read_bytes()):
                searched += 1
                assert needle not in blob, f"credential found in {path}"
    assert searched > 10 and any((home / "logs").glob("*.log"))
    db = sqlite3.connect(home / "evalq.db")
    for (table,) in db.execute("select name from sqlite_master where type='table'"):
        for row in db.execute(f'select * from "{table}"'):
            assert PLANTED not in repr(row), f"credential found in table {table}"


def test_run_without_usage_is_unavailable_and_flagged(probe_study):
    home, report = probe_study
    for row in attempts(home):
        metrics = row["metrics"]
        for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cost_usd"):
            assert metrics[key] is None, key
        assert metrics["price_table_id"]  # the table is recorded even when nothing is priced
    for trial in report["trial_rows"]:
        assert trial["input_tokens"] is None and trial["cost_usd"] is None
        assert trial["accounting_complete"] is False
    cond = report["conditions"]["probe"]
    assert cond["tokens"]["input_tokens"] == {"total": None, "runs_reported": 0,
                                              "runs_missing": 3}
    assert report["cost"]["probe"]["incomplete_runs"] == 3
    assert report["cost"]["probe"]["per_success"] is None


def test_wall_time_limit_gives_timed_out_with_the_stop_reason(tmp_path):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path / "fixtures")
    conditions = '''
[[conditions]]
name = "slow"
agent = "scripted"
settings = { action = "sleep", seconds = 120, spawn_child = true }
'''
    manifest = write_manifest(tmp_path / "study", fixture, conditions, study_id="slow", wall=3)
    home = tmp_path / "home"
    report = run_study(manifest, home)
    (row,) = attempts(home)
    assert row["outcome"] == "timed_out"
    assert row["reason"] == "wall time limit of 3 s"
    assert row["metrics"]["stop_reason"] == "wall time limit of 3 s"
    assert row["metrics"]["duration_seconds"] < 60
    assert report["conditions"]["slow"]["outcomes"]["timed_out"] == 1
