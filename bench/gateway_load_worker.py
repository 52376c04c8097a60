"""The gateway load's worker side: the same agents as evalq trials of a real study, taken by one
`evalq worker --queues agents --pool threads -c C` (its gateway, its trial and reader threads,
its lease and result writes), graded by a grading worker, launched by `evalq run`.

Returns per trial what the agent printed (its timed calls) and the gateway's wire records, and
the span from the first trial's start to the last agent's end (the agent phase, as the floor
measures it) and to the last outcome.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .inflight import _fixture  # bench-noop frozen with room for the agents' wait
from .services import ROOT, Workers, child_env, evalq_worker_argv


def write_study(workdir: Path, n: int, argv: list[str], base_url: str, model: str,
                wall: int) -> Path:
    fixture = _fixture(workdir, wall)
    templated = [a.replace("{", "{{").replace("}", "}}") for a in argv]  # literal braces
    templated[-3] = "{model_url}"
    path = workdir / "load.toml"
    path.write_text(f'id = "gateway-load"\nfixtures = ["{fixture.as_posix()}"]\n'
                    f"repetitions = {n}\nseed = 5\nmax_attempts = 1\n\n[budgets]\n"
                    f"wall_seconds = {wall}\n\n[[conditions]]\nname = \"load\"\n"
                    f'agent = "command"\nmodel = "{model}"\n'
                    f'settings = {{ base_url = "{base_url}", argv = {json.dumps(templated)} }}\n')
    return path


def _rows(url: str) -> list[dict]:
    from sqlalchemy import text

    from evalq.results.store import get_engine

    with get_engine(url).connect() as conn:
        rows = conn.execute(text("select trial_id, outcome, reason, started_at, "
                                 "agent_finished_at, finished_at, artifacts from attempts"))
        out = [dict(r._mapping) for r in rows]
    for row in out:
        if isinstance(row["artifacts"], str):
            row["artifacts"] = json.loads(row["artifacts"])
    return out


def run_worker_side(workdir: Path, broker: str, database: str, n: int, concurrency: int,
                    argv: list[str], base_url: str, model: str, wall: int,
                    deadline: float) -> dict:
    """Run the study; {"agent_span", "graded_span", "trials": [{stdout, wire, outcome}]}."""
    from evalq.artifacts import open_store
    from evalq.results.store import init_db

    workdir.mkdir(parents=True, exist_ok=True)
    artifacts = workdir / "artifacts"
    env = child_env({"EVALQ_HOME": str(workdir / "home"), "EVALQ_BROKER_URL": broker,
                     "EVALQ_DATABASE_URL": database, "EVALQ_ARTIFACTS_URL": str(artifacts),
                     "EVALQ_AGENT_SANDBOX": "bwrap"})
    logdir = workdir / "logs"
    logdir.mkdir(exist_ok=True)
    study = write_study(workdir, n, argv, base_url, model, wall)
    init_db(database)
    graders, agents = Workers(logdir), Workers(logdir)
    launcher = None
    try:
        graders.start(evalq_worker_argv("grading,results", 2, "grader@load"), env, "grader")
        agents.start([*evalq_worker_argv("agents", concurrency, "agent@load"), "--pool",
                      "threads"], env, "agent")
        agents.wait_ready(120)
        graders.wait_ready(120)
        launcher = subprocess.Popen([sys.executable, "-m", "evalq.cli.__main__", "run",
                                     str(study), "--yes"], env=env, cwd=ROOT,
                                    stdout=open(logdir / "launcher.log", "wb"),
                                    stderr=subprocess.STDOUT, start_new_session=True)
        code = launcher.wait(max(1.0, deadline - time.monotonic()))
    finally:
        if launcher is not None and launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        agents.stop()
        graders.stop()
    rows = _rows(database)
    store = open_store(str(artifacts))
    trials = []
    for row in rows:
        refs = row["artifacts"] or {}
        stdout = store.get(refs["stdout"]) if refs.get("stdout") else b""
        wire = store.get(refs["wire"]).decode().splitlines() if refs.get("wire") else []
        trials.append({"outcome": row["outcome"], "reason": row["reason"], "stdout": stdout,
                       "wire": [json.loads(line) for line in wire if line.strip()]})
    started = [r["started_at"] for r in rows if r["started_at"]]
    agent_end = [r["agent_finished_at"] for r in rows if r["agent_finished_at"]]
    graded_end = [r["finished_at"] for r in rows if r["finished_at"]]
    span = (lambda ends: max(ends) - min(started) if ends and started else None)
    return {"launcher_exit": code, "agent_span": span(agent_end),
            "graded_span": span(graded_end), "trials": trials,
            "agent_ended": len(agent_end), "graded": len(graded_end)}
