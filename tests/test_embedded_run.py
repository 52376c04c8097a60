"""A whole study on the embedded default: no server, the real Celery tasks."""

from __future__ import annotations

import json
import sqlite3

from conftest import run_cli, write_study
from evalq.artifacts import ArtifactStore


def _run(tmp_path, fixture_copies, home_name):
    study = write_study(tmp_path / "study", fixture_copies, repetitions=2)
    home = tmp_path / home_name
    proc = run_cli(["run", str(study)], {"EVALQ_HOME": str(home)}, timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report_line = [l for l in proc.stdout.splitlines() if l.endswith("report.json")]
    assert report_line, proc.stdout
    path = report_line[0].split("report: ", 1)[1]
    return json.loads(open(path).read()), home


def test_embedded_study_end_to_end(tmp_path, fixture_copies):
    report, home = _run(tmp_path, fixture_copies, "home1")
    assert report["trials"] == {"planned": 8, "finished": 8, "pending": 0}
    good, bad = report["conditions"]["good"], report["conditions"]["bad"]
    assert good["outcomes"]["correct"] == 4 and bad["outcomes"]["incorrect"] == 4
    assert sum(good["outcomes"].values()) == 4 and sum(bad["outcomes"].values()) == 4
    assert good["success_rate"] == 1.0 and bad["success_rate"] == 0.0
    broker = home / "broker"  # evalq.queue.filebus: every message taken once, nothing left over
    assert not list((broker / "queue").iterdir()) and not list((broker / "claimed").iterdir())
    assert not list((broker / "incoming").iterdir()), "no message left half-written"
    db = sqlite3.connect(home / "evalq.db")
    rows = db.execute("select trial_id, count(*), min(outcome) from attempts "
                      "group by trial_id").fetchall()
    assert len(rows) == 8 and all(count == 1 and outcome for _, count, outcome in rows)
    criteria = db.execute("select trial_id, criteria, artifacts, worker_host from attempts"
                          ).fetchall()
    store = ArtifactStore(home / "artifacts")
    for trial_id, crit, artifacts, host in criteria:
        assert json.loads(crit), "each attempt stores its per-criterion verdicts"
        refs = json.loads(artifacts)
        assert {"workspace", "diff", "stdout"} <= set(refs)
        assert host
        if "py-slugify-bugfix" in trial_id:
            diff = store.get(refs["diff"]).decode()
            assert "--- a/textutil/slug.py" in diff and "+++ b/textutil/slug.py" in diff
            assert any(l.startswith("+") and not l.startswith("+++") for l in diff.splitlines())


def test_two_runs_give_the_same_order_and_results(tmp_path, fixture_copies):
    first, _ = _run(tmp_path, fixture_copies, "home-a")
    second, _ = _run(tmp_path, fixture_copies, "home-b")
    order = lambda r: [(t["trial_id"], t["outcome"]) for t in  # noqa: E731
                       sorted(r["trial_rows"], key=lambda t: t["order"])]
    assert order(first) == order(second)


def test_rerunning_a_finished_study_just_reports(tmp_path, fixture_copies):
    report, home = _run(tmp_path, fixture_copies, "home-r")
    study = tmp_path / "study" / "study.toml"
    proc = run_cli(["run", str(study)], {"EVALQ_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert "0 sent, 8 already finished" in proc.stderr
