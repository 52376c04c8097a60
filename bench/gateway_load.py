"""The model gateway under many agents at once: C agents in flight, each making CALLS model
calls with WAIT seconds of its own waiting before each, N trials in all.

Sides measured in one run, the same agent program (a Python script timing each of its calls):
- `direct`, the floor: the agents started directly, unsandboxed, calling the model server;
- `worker` (what `python -m bench` runs): trials of a study taken by one threads worker, the
  command agent in bubblewrap calling its door (gateway_load_worker.py);
- `one process`: the agent phase of the same trials run by C threads of this process (the
  command agent in bubblewrap, its door, this process's gateway, the trial's reader threads),
  without the queue, the database and grading.

Figures: the sealed trial rate as a ratio to the floor's (target at least 0.9), and the latency
the gateway adds to a model call at p95 (target under 50 ms): in its own record of each call,
from the request's first bytes' arrival to the last byte sent, less the upstream's part.
Beside it, what each agent waited less that upstream part (its own process, the sandbox's
relay and the gateway), and the whole calls' p95 on both sides.
The scripted model server runs in a process of its own, as a provider would.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .figures import Figure, ratio
from .gateway_bench import model_server, percentile
from .services import ROOT

FIXTURE = ROOT / "bench" / "fixture" / "bench-noop"
RATE_TARGET = 0.9
ADDED_TARGET_MS = 50.0
MODEL = "claude-sonnet-4-5"
PYTHON = "/usr/bin/python3"  # the same interpreter on both sides (the sandbox binds /usr)

#: the agent: argv MODEL_URL CALLS WAIT; prints `CALL i status ms` per model call (streamed
#: Anthropic messages, a new connection each, as CLIs that do not keep them alive do). It first
#: waits a random part of WAIT: agents started together would otherwise call in lockstep, 200
#: calls in the same instant every WAIT seconds, and measure the model server's herd.
AGENT = r'''
import http.client, json, random, sys, time, urllib.parse
url = urllib.parse.urlsplit(sys.argv[1])
calls, wait = int(sys.argv[2]), float(sys.argv[3])
time.sleep(random.random() * wait)
body = json.dumps({"model": "%s", "max_tokens": 1024, "stream": True,
                   "system": "You are a coding agent.",
                   "messages": [{"role": "user", "content": "Fix the failing test. " * 200}]})
for i in range(calls):
    time.sleep(wait)
    started = time.perf_counter()
    try:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=300)
        conn.request("POST", url.path.rstrip("/") + "/messages", body=body,
                     headers={"Content-Type": "application/json", "x-api-key": "placeholder",
                              "anthropic-version": "2023-06-01"})
        reply = conn.getresponse()
        reply.read()
        status = reply.status
        conn.close()
    except OSError as exc:
        status = type(exc).__name__
    print("CALL", i, status, round((time.perf_counter() - started) * 1000, 3), flush=True)
''' % MODEL


def parse_calls(stdout: bytes) -> list[tuple[str, float]]:
    """(status, ms) of each `CALL` line the agent printed."""
    out = []
    for line in stdout.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "CALL":
            out.append((parts[2], float(parts[3])))
    return out


def wire_pairs(records: list[dict]) -> list[tuple[float, float]]:
    """(arrival to last byte, the upstream's part) of each call the gateway forwarded and
    timed, in arrival order (refused and failed ones have no upstream part and are left out)."""
    ordered = sorted(records, key=lambda r: r.get("index") or 0)
    return [(r["latency_ms"], r["upstream_ms"]) for r in ordered
            if r.get("latency_ms") is not None and r.get("upstream_ms") is not None]


def paired_added(calls: list[tuple[str, float]], pairs: list[tuple[float, float]]) -> list:
    """Per model call of one trial: what the agent waited less what the upstream took, as the
    gateway timed it (so the model server's own time, under whatever load, is left out and
    the door, the sandbox's relay and the gateway are counted); [] unless every call pairs."""
    if len(calls) != len(pairs) or any(status != "200" for status, _ in calls):
        return []
    return [seen - upstream for (_, seen), (_, upstream) in zip(calls, pairs)]


def summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50_ms": percentile(values, 0.5),
            "p95_ms": percentile(values, 0.95), "max_ms": max(values),
            "mean_ms": statistics.fmean(values)}


def pool(n: int, concurrency: int, trial) -> tuple[float, list]:
    """Run `trial(i)` n times, `concurrency` at once; (seconds from first start to last end,
    results)."""
    started = time.monotonic()

    def timed(index: int):
        begun = time.monotonic()
        result = trial(index)
        return (*result, (begun - started, time.monotonic() - started))

    with ThreadPoolExecutor(max_workers=concurrency) as executor:
        results = list(executor.map(timed, range(n)))
    return time.monotonic() - started, results


def direct_trial(url: str, calls: int, wait: float):
    def trial(_: int) -> tuple[int, list, list]:
        proc = subprocess.run([PYTHON, "-c", AGENT, url + "/v1", str(calls), str(wait)],
                              capture_output=True, timeout=calls * wait + 600)
        return proc.returncode, parse_calls(proc.stdout), []
    return trial


def sealed_trial(workdir: Path, url: str, calls: int, wait: float):
    from evalq.fixtures.fixture import load_fixture, materialize
    from evalq.models import Condition, Limits
    from evalq.workers.agents.base import AgentContext
    from evalq.workers.agents.registry import get_adapter
    from evalq.workers.profile import new_profile

    fixture = load_fixture(FIXTURE)
    code = AGENT.replace("{", "{{").replace("}", "}}")  # literal braces in the template
    adapter = get_adapter("command")

    def trial(_: int) -> tuple[object, list, list]:
        condition = Condition(name="load", agent="command", model=MODEL, settings={
            "base_url": url + "/v1", "argv": [PYTHON, "-c", code, "{model_url}", str(calls),
                                              str(wait)]})
        profile = new_profile(workdir / "runs")
        try:
            materialize(fixture, profile.workspace)
            ctx = AgentContext(fixture=fixture, condition=condition, profile=profile,
                               prompt="load", limits=Limits(wall_seconds=calls * wait + 600),
                               sandbox="bwrap", evalq_home=workdir)
            result = adapter.run(ctx)
        finally:
            profile.cleanup()
        return (result.metrics.exit_code, parse_calls(result.stdout),
                wire_pairs(result.extra.get("wire_records") or []))
    return trial


def close_worker_gateway() -> None:
    """Close the gateway the sealed trials of this process opened (the door makes one per
    process on first use and keeps it for the process's life)."""
    from evalq.workers import door

    if door._gateway is not None:
        door._gateway.close()
        door._gateway = None


def side_summary(seconds: float, n: int, results: list) -> dict:
    """Rate and call latencies of one side; results: (exit, calls, wire pairs, (start, end))."""
    seen = [c for r in results for c in r[1]]
    ok = [ms for status, ms in seen if status == "200"]
    out = {"seconds": seconds, "trials_per_second": n / seconds if seconds else None,
           "trials_seen": len(results), "calls": len(seen), "calls_ok": len(ok),
           "failed_calls": sorted({s for s, _ in seen if s != "200"}),
           "agent_exit_codes": sorted({str(r[0]) for r in results}),
           "agent_seen": summary(ok)}
    own = [pair for r in results for pair in r[2]]
    if own:
        out["gateway_records"] = summary([total for total, _ in own])
        out["gateway_records_upstream"] = summary([up for _, up in own])
        out["gateway_records_own"] = summary([t - up for t, up in own])
        added = [a for r in results for a in paired_added(r[1], r[2])]
        out["sealed_path_added"] = summary(added)
        out["calls_paired"] = len(added)
    return out


def worker_side(workdir: Path, broker: str, database: str, url: str, n: int,
                concurrency: int, calls: int, wait: float) -> dict:
    from .gateway_load_worker import run_worker_side

    wall = int(calls * wait + 600)
    result = run_worker_side(workdir / "worker", broker, database, n, concurrency,
                             [PYTHON, "-c", AGENT, url + "/v1", str(calls), str(wait)],
                             url + "/v1", MODEL, wall, time.monotonic() + 3 * wall)
    results = [(t["outcome"], parse_calls(t["stdout"]), wire_pairs(t["wire"]))
               for t in result["trials"]]
    out = side_summary(result["agent_span"] or 0.0, n, results)
    out.update({k: result[k] for k in ("launcher_exit", "agent_span", "graded_span",
                                       "agent_ended", "graded")})
    out["outcomes"] = sorted({str(t["outcome"]) for t in result["trials"]})
    out["trials_per_second_graded"] = n / result["graded_span"] \
        if result["graded_span"] else None
    return out


SIDES = ("direct", "one process", "worker")


def run(workdir: Path, n: int, concurrency: int, calls: int, wait: float, log,
        broker: str | None = None, database: str | None = None,
        sides_wanted: tuple[str, ...] = SIDES) -> tuple[list[Figure], dict]:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "runs").mkdir(exist_ok=True)
    data: dict = {"trials": n, "concurrency": concurrency, "calls_per_trial": calls,
                  "wait_seconds_per_call": wait}
    sides: dict[str, dict] = {}
    with model_server(workdir) as url:
        for side in sides_wanted:
            log(f"gateway load, {side}: {n} trials, {concurrency} at once, {calls} calls "
                f"each after {wait:g} s")
            load_before = os.getloadavg()
            if side == "worker":
                if not (broker and database):
                    raise RuntimeError("the worker side needs a broker and a database")
                sides[side] = worker_side(workdir, broker, database, url, n, concurrency,
                                          calls, wait)
            else:
                trial = direct_trial(url, calls, wait) if side == "direct" else \
                    sealed_trial(workdir, url, calls, wait)
                seconds, results = pool(n, concurrency, trial)
                if side != "direct":
                    close_worker_gateway()
                sides[side] = side_summary(seconds, n, results)
            got = sides[side]
            # the machine's load average (1, 5, 15 min) around this side: latencies on a
            # shared machine move with it, so each figure is read beside it
            got["load_average"] = {"before": load_before, "after": os.getloadavg()}
            log(f"gateway load, {side}: {got['seconds']:.1f} s, "
                f"{got['trials_per_second'] or 0:.3f} trials/s, {got['calls_ok']}/{n * calls} "
                f"calls ok, p95 {got['agent_seen'].get('p95_ms', float('nan')):.1f} ms; "
                f"gateway's own part p95 "
                f"{got.get('gateway_records_own', {}).get('p95_ms', float('nan')):.2f} ms")
    data.update(sides)
    return figures_of(sides, n, concurrency, calls, wait, log), data


def figures_of(sides: dict, n: int, concurrency: int, calls: int, wait: float,
               log) -> list[Figure]:
    direct = sides["direct"]
    sealed_name = "worker" if "worker" in sides else "one process"
    sealed = sides[sealed_name]
    expected = n * calls
    complete = direct["calls_ok"] == expected and sealed["calls_ok"] == expected
    rate = ratio(sealed["trials_per_second"], direct["trials_per_second"])
    ideal = concurrency / (calls * wait + wait / 2)  # the mean first wait: wait / 2
    paired = sealed.get("sealed_path_added", {}).get("p95_ms")
    own = sealed.get("gateway_records_own", {})
    added = own.get("p95_ms") if complete and own.get("n") == expected else None
    others = "; ".join(f"{k}: {v['trials_per_second']:.3f}/s, call p95 "
                       f"{v['agent_seen'].get('p95_ms', float('nan')):.1f} ms"
                       for k, v in sides.items() if k not in ("direct", sealed_name))
    figures = [
        Figure(f"trial rate, {concurrency} agents x {calls} model calls through the gateway",
               sealed["trials_per_second"] if complete else None, "trials/s",
               target=RATE_TARGET, ratio=rate if complete else None,
               reference="the same agents calling the model server directly", at_least=True,
               note=f"{n} trials each side ({sealed_name}: agent phases, first start to last "
                    f"end); direct {direct['trials_per_second']:.3f}/s "
                    f"({ratio(direct['trials_per_second'], ideal):.2f}x what the agents' "
                    f"waiting allows), sealed {sealed['trials_per_second']:.3f}/s; calls ok "
                    f"{direct['calls_ok']}/{expected} direct, {sealed['calls_ok']}/{expected} "
                    f"sealed" + (f"; {others}" if others else "")),
        Figure(f"gateway added latency per model call at {concurrency} agents, p95", added,
               "ms", target=ADDED_TARGET_MS,
               note=f"in the gateway's own records of {own.get('n')} calls: from the request's "
                    "first bytes' arrival to the last byte sent, less the upstream's part; "
                    "what the agent waited less the upstream's part (the agent's own process, "
                    "the sandbox's relay and the gateway, on the same loaded machine) p95 "
                    f"{paired if paired is not None else float('nan'):.1f} ms; whole calls as "
                    f"the agents see them, p95 direct "
                    f"{direct['agent_seen'].get('p95_ms', float('nan')):.1f} ms, through the "
                    f"door {sealed['agent_seen'].get('p95_ms', float('nan')):.1f} ms; the "
                    f"machine's load average (1 min) {_load(sealed)}"),
    ]
    for figure in figures:
        log(figure.line())
    return figures


def _load(side: dict) -> str:
    """The 1-minute load average before and after a side, as "a to b"."""
    load = side.get("load_average")
    return f"{load['before'][0]:.1f} to {load['after'][0]:.1f}" if load else "unavailable"


def main() -> None:
    """`python -m bench.gateway_load [N C CALLS WAIT [SIDE,...]]`: this section alone, printed
    as JSON (its own redis-server and PostgreSQL database for the worker side)."""
    import json
    import os
    import sys
    import tempfile
    from contextlib import ExitStack

    from .services import database, redis_server

    args = sys.argv[1:] or ["400", "200", "10", "5"]
    n, c, calls, wait = int(args[0]), int(args[1]), int(args[2]), float(args[3])
    wanted = tuple(args[4].split(",")) if len(args) > 4 else SIDES
    with tempfile.TemporaryDirectory(prefix="gw-load-") as tmp, ExitStack() as stack:
        os.environ["EVALQ_HOME"] = str(Path(tmp) / "home")
        broker = stack.enter_context(redis_server(Path(tmp))) if "worker" in wanted else ""
        os.environ["EVALQ_BROKER_URL"] = broker
        url = stack.enter_context(database(Path(tmp), "postgres"))[0] \
            if "worker" in wanted else None
        figures, data = run(Path(tmp), n, c, calls, wait,
                            lambda m: print(f"[bench] {m}", file=sys.stderr, flush=True),
                            broker, url, wanted)
    print(json.dumps({"figures": [f.as_dict() for f in figures], "data": data}, indent=2))


if __name__ == "__main__":
    main()
