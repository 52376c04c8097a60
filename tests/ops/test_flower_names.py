"""Flower's task list (its HTTP API, fetched from a real `evalq flower`) names every trial."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "distributed"))
from conftest import EVALQ, write_study  # noqa: E402
from dist_support import Procs, evalq_env, free_port, wait_for  # noqa: E402


def _get(port: int, path: str):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return json.loads(response.read())


def test_flower_task_list_shows_trial_ids(tmp_path, fixture_copies, redis_url):
    env = evalq_env({"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_url,
                     "EVALQ_DATABASE_URL": f"sqlite:///{tmp_path / 'evalq.db'}"})
    study = write_study(tmp_path / "study", fixture_copies, study_id="fl", repetitions=1)
    port = free_port()
    procs = Procs(tmp_path)
    try:
        procs.start("flower", [*EVALQ, "flower", "--port", str(port), "--unauthenticated-api"],
                    env)
        procs.worker("worker", "host-f", "agents,grading,results", env, concurrency=2)
        wait_for(lambda: _get(port, "/api/workers?refresh=1"), 60, "Flower to see the worker")
        run = procs.start("run", [*EVALQ, "run", str(study)], env)
        assert run.wait(180) == 0, procs.logs()
        labels = {f"fl/{fixture}/{condition}/r1#1" for fixture in
                  ("py-slugify-bugfix", "py-inventory-feature") for condition in ("good", "bad")}

        def shown():
            tasks = _get(port, "/api/tasks").values()
            names = {(t.get("name"), t.get("args")) for t in tasks}
            return all(any(label in (name or "") and label in (args or "")
                           for name, args in names) for label in labels) and names

        names = wait_for(shown, 60, f"Flower to list {sorted(labels)}")
        assert {n.split(" ")[0] for n, _ in names} == {"run_trial", "grade_trial",
                                                      "record_result"}, names
        log = procs.log("worker")
        assert all(f"run_trial {label}[" in log for label in labels), log[-2000:]
    finally:
        procs.stop_all()
