"""The floor: the same three Celery hops as a trial, doing nothing but one raw sandbox start.

agents → grading (runs `bwrap … true` or `docker run --rm … true`) → results (counts in Redis).
It uses evalq's own Celery settings (evalq.queue.app.configure) and queue names, so the only
difference from a real trial is evalq's work: claims, fixtures, the agent process, artifacts,
grading and the database upsert. Workers: `celery -A bench.floor_app worker -Q agents`.
"""

from __future__ import annotations

import os
import subprocess
import time

from celery import Celery

from evalq.config import load_settings
from evalq.queue.app import configure

app = configure(Celery("bench_floor"), load_settings())
app.conf.task_routes = {"bench.floor_agent": {"queue": "agents"},
                        "bench.floor_grade": {"queue": "grading"},
                        "bench.floor_result": {"queue": "results"}}

BWRAP_TRUE = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
              "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
              "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
              "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", "true"]


def docker_true(image: str) -> list[str]:
    """The same isolation flags evalq's docker backend uses, around `true`."""
    return ["docker", "run", "--rm", "--network", "none", "--read-only", "--memory", "64m",
            "--memory-swap", "64m", "--pids-limit", "16", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--user", "65534:65534",
            "--log-driver", "none", image, "true"]


def sandbox_argv(kind: str, image: str) -> list[str] | None:
    if kind == "none":
        return None
    return BWRAP_TRUE if kind == "bwrap" else docker_true(image)


def raw_start(kind: str, image: str) -> float:
    """Seconds for one raw sandbox start of `true`; raises if it fails."""
    argv = sandbox_argv(kind, image)
    started = time.perf_counter()
    if argv is not None:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - started


@app.task(name="bench.floor_agent")
def floor_agent(ref: dict) -> None:
    app.send_task("bench.floor_grade", args=[ref])


@app.task(name="bench.floor_grade")
def floor_grade(ref: dict) -> None:
    raw_start(ref["sandbox"], ref["image"])
    app.send_task("bench.floor_result", args=[ref])


@app.task(name="bench.floor_result")
def floor_result(ref: dict) -> None:
    import redis

    client = redis.Redis.from_url(os.environ["EVALQ_BROKER_URL"])
    pipe = client.pipeline()
    pipe.incr(f"bench:floor:{ref['run']}:done")
    pipe.set(f"bench:floor:{ref['run']}:last", repr(time.time()))
    pipe.execute()
