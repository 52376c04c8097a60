"""Where does the gateway's added latency come from under a worker's load?
`python -m bench.gateway_contention [SECONDS AGENTS ROUNDS [VARIANT;...]]` serves the same
stream of model calls (AGENTS client threads in a process of their own, a new connection per
call, a random wait between calls, streamed Anthropic replies from the scripted model server
in a third process) through one gateway run, hosted in turn (alternating, ROUNDS times, so
the machine's own load falls on every variant alike):

- `alone, switch 5 ms`: the gateway's loop in this process, nothing else running in it, at
  the interpreter's default switch interval (the gateway lowers it: gateway.py);
- `idle trials, switch 5 ms`: beside 200 trials' idle threads (readers blocked on pipes, a
  waiter, a thread waking every 0.25 s), as a threads worker holds them while agents run;
- `busy worker, switch 5 ms`: those, plus threads doing the worker's Python work between
  calls (encoding and decoding JSON in bursts, about a third of a core);
- `busy worker`: the same at the gateway's own switch interval;
- `busy worker, own process`: the same crowd here, the gateway in a child process;
- `sandboxed trials` (switch 5, 1 or 0.5 ms, the gateway's own, own process): instead of that
  crowd, SANDBOXED real trials at once, one after another (the command agent in bubblewrap
  behind its door, sleeping 2-6 s): a threads worker's start-up and tear-down work.

Per variant: the gateway's own part of each call as its records give it (arrival of the first
bytes to the last byte, less the upstream's part), p50/p95, and the loop's lateness waking from
a 5 ms sleep meanwhile. Printed as JSON with `uptime`'s load before and after.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from evalq.workers.gateway import Gateway, Upstream

from .gateway_bench import model_server, percentile
from .gateway_load import close_worker_gateway
from .gateway_loop_lag import late_wakeups, trial_threads

MODEL = "claude-sonnet-4-5"

#: the load: argv SOCKET AGENTS SECONDS WAIT; prints one JSON list of client-seen ms
CLIENT = r'''
import http.client, json, random, socket, sys, threading, time
path, agents, seconds, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
body = json.dumps({"model": "%s", "max_tokens": 1024, "stream": True,
                   "system": "You are a coding agent.",
                   "messages": [{"role": "user", "content": "Fix the failing test. " * 200}]})
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(path)
seen, end = [], time.monotonic() + seconds
def agent():
    time.sleep(random.random() * wait)
    while time.monotonic() < end:
        started = time.perf_counter()
        conn = Unix("127.0.0.1", timeout=60)
        conn.request("POST", "/v1/messages", body=body, headers={
            "Content-Type": "application/json", "x-api-key": "placeholder",
            "anthropic-version": "2023-06-01"})
        reply = conn.getresponse(); reply.read(); conn.close()
        if reply.status == 200:
            seen.append((time.perf_counter() - started) * 1000)
        time.sleep(wait * (0.5 + random.random()))
threads = [threading.Thread(target=agent) for _ in range(agents)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(seen))
''' % MODEL

#: the gateway in a process of its own: argv SOCKET UPSTREAM; prints "ready", then on a line
#: from stdin its run's records as one JSON line
CHILD = r'''
import json, sys
from evalq.workers.gateway import Gateway, Upstream
with Gateway() as gateway:
    run = gateway.open_run("own", sys.argv[1], [Upstream(sys.argv[2], auth="x-api-key",
                                                          credential="KEY")],
                           credentials={"KEY": "sk-bench-key"})
    print("ready", flush=True)
    sys.stdin.readline()
    print(json.dumps(run.records()), flush=True)
'''


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def busy(stop: threading.Event, share: float = 0.15) -> None:
    """A worker thread's Python work: bursts of JSON encoding and decoding (a trial's result
    rows, artifacts' manifests), about `share` of a core."""
    blob = {"rows": [{"trial": i, "outcome": "correct", "metrics": {"t": i * 0.5}}
                     for i in range(400)]}
    while not stop.is_set():
        started = time.perf_counter()
        while time.perf_counter() - started < 0.02:
            json.loads(json.dumps(blob))
        stop.wait(0.02 * (1 - share) / share * random.uniform(0.5, 1.5))


def sandboxed_trials(stop: threading.Event, workdir: Path, url: str) -> None:
    """Real trials one after another, as a threads worker's trial thread runs them: the command
    agent in bubblewrap behind its door (whose agent sleeps 2-6 s, calling nothing)."""
    from evalq.fixtures.fixture import load_fixture, materialize
    from evalq.models import Condition, Limits
    from evalq.workers.agents.base import AgentContext
    from evalq.workers.agents.registry import get_adapter
    from evalq.workers.profile import new_profile

    from .gateway_load import FIXTURE, PYTHON

    fixture, adapter = load_fixture(FIXTURE), get_adapter("command")
    condition = Condition(name="crowd", agent="command", model=MODEL, settings={
        "base_url": url + "/v1", "argv": [PYTHON, "-c", "import random, time; "
                                                         "time.sleep(2 + 4 * random.random())"]})
    while not stop.is_set():
        profile = new_profile(workdir)
        try:
            materialize(fixture, profile.workspace)
            adapter.run(AgentContext(fixture=fixture, condition=condition, profile=profile,
                                     prompt="crowd", limits=Limits(wall_seconds=60),
                                     sandbox="bwrap", evalq_home=workdir))
        finally:
            profile.cleanup()


@contextmanager
def crowd(trials: int, busy_threads: int, sandboxed: int = 0, workdir: Path | None = None,
          url: str = ""):
    stop = threading.Event()
    threads = [threading.Thread(target=trial_threads, args=(stop,), daemon=True)
               for _ in range(trials)]
    threads += [threading.Thread(target=busy, args=(stop,), daemon=True)
                for _ in range(busy_threads)]
    if sandboxed:
        (workdir / "runs").mkdir(exist_ok=True)
    threads += [threading.Thread(target=sandboxed_trials, args=(stop, workdir / "runs", url),
                                 daemon=True) for _ in range(sandboxed)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(90)


def load(socket_path: Path, agents: int, seconds: float, wait: float) -> list[float]:
    out = subprocess.run([sys.executable, "-c", CLIENT, str(socket_path), str(agents),
                          str(seconds), str(wait)], capture_output=True, text=True,
                         timeout=seconds + 300, check=True)
    return json.loads(out.stdout)


def own(records: list[dict]) -> list[float]:
    return [r["latency_ms"] - r["upstream_ms"] for r in records
            if r.get("latency_ms") is not None and r.get("upstream_ms") is not None]


def stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": round(percentile(values, 0.5), 3),
            "p95_ms": round(percentile(values, 0.95), 3), "max_ms": round(max(values), 3)}


def in_process(tmp: Path, url: str, name: str, agents: int, seconds: float, wait: float,
               trials: int, busy_threads: int, switch: float | None, sandboxed: int = 0) -> dict:
    from evalq.workers import door

    before = sys.getswitchinterval()
    try:
        with Gateway() as gateway:
            door._gateway = gateway  # the crowd's doors on the gateway measured
            with crowd(trials, busy_threads, sandboxed, tmp, url):
                if switch is not None:  # instead of the gateway's (LOOP_SWITCH_INTERVAL)
                    sys.setswitchinterval(switch)
                path = tmp / f"{name.replace(' ', '-').replace(',', '')}.sock"
                run = gateway.open_run(name, path, [Upstream(url, auth="x-api-key",
                                                             credential="KEY")],
                                       credentials={"KEY": "sk-bench-key"})
                late: list[float] = []
                prober = threading.Thread(target=lambda: late.extend(
                    late_wakeups(gateway.loop, seconds)))
                prober.start()
                seen = load(path, agents, seconds, wait)
                prober.join()
                records = run.records()
    finally:
        door._gateway = None
        sys.setswitchinterval(before)
    return {"own": stats(own(records)), "client": stats(seen), "loop_late": stats(late)}


def own_process(tmp: Path, url: str, agents: int, seconds: float, wait: float,
                trials: int, busy_threads: int, sandboxed: int = 0) -> dict:
    path = tmp / "own.sock"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), url],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the gateway process did not start")
        with crowd(trials, busy_threads, sandboxed, tmp, url):
            seen = load(path, agents, seconds, wait)
        child.stdin.write("records\n")
        child.stdin.flush()
        records = json.loads(child.stdout.readline())
    finally:
        child.stdin.close()
        child.wait(30)
        close_worker_gateway()  # the one the crowd's doors opened here
    return {"own": stats(own(records)), "client": stats(seen)}


#: real trials kept running beside the gateway in the `sandboxed trials` variants
SANDBOXED = 60
#: name -> the crowd beside the gateway and the switch interval (None: the gateway's own)
VARIANTS = {
    "alone, switch 5 ms": dict(trials=0, busy_threads=0, switch=0.005),
    "idle trials, switch 5 ms": dict(trials=200, busy_threads=0, switch=0.005),
    "busy worker, switch 5 ms": dict(trials=200, busy_threads=2, switch=0.005),
    "busy worker": dict(trials=200, busy_threads=2, switch=None),
    "busy worker, own process": dict(trials=200, busy_threads=2, switch="process"),
    "sandboxed trials, switch 5 ms": dict(trials=0, busy_threads=0, switch=0.005,
                                          sandboxed=SANDBOXED),
    "sandboxed trials, switch 1 ms": dict(trials=0, busy_threads=0, switch=0.001,
                                          sandboxed=SANDBOXED),
    "sandboxed trials, switch 0.5 ms": dict(trials=0, busy_threads=0, switch=0.0005,
                                            sandboxed=SANDBOXED),
    "sandboxed trials": dict(trials=0, busy_threads=0, switch=None, sandboxed=SANDBOXED),
    "sandboxed trials, own process": dict(trials=0, busy_threads=0, switch="process",
                                          sandboxed=SANDBOXED),
}


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20
    agents = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    wanted = sys.argv[4].split(";") if len(sys.argv) > 4 else list(VARIANTS)
    wait = 2.5
    out: dict = {"seconds": seconds, "agents": agents, "wait": wait,
                 "load_before": uptime(), "rounds": []}
    with tempfile.TemporaryDirectory(prefix="gw-cont-") as tmp, model_server(Path(tmp)) as url:
        for index in range(rounds):
            order = wanted if index % 2 == 0 else wanted[::-1]
            got = {}
            for name in order:
                spec = VARIANTS[name]
                if spec["switch"] == "process":
                    got[name] = own_process(Path(tmp), url, agents, seconds, wait,
                                            spec["trials"], spec["busy_threads"],
                                            spec.get("sandboxed", 0))
                else:
                    got[name] = in_process(Path(tmp), url, name, agents, seconds, wait,
                                           spec["trials"], spec["busy_threads"],
                                           spec["switch"], spec.get("sandboxed", 0))
                got[name]["load"] = uptime().split("load average:")[1].strip()
                print(f"[bench] round {index} {name}: {json.dumps(got[name])}",
                      file=sys.stderr, flush=True)
            out["rounds"].append(got)
    out["load_after"] = uptime()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
