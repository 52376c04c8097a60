"""The model gateway's added latency per request: the same scripted model server asked
directly over TCP and through a gateway run's unix socket, alternately, in one script.

The model server runs in a process of its own (a provider is not in the worker's process, and
its threads would otherwise take the GIL from the gateway's loop). Both sides keep their
connections alive (SSE replies close theirs, on both sides alike); the figure is the difference
of the 95th percentiles, with the ratio beside it (target: under 2 ms per request at p95).
Three kinds: Anthropic messages whole and streamed, and an OpenAI chat stream that does not ask
for its usage, which the gateway rewrites to ask (`stream_options.include_usage`) before it
checks the endpoint, meters and forwards it. (The door's cost per trial, the sandbox's
forwarder included, is the agentbox section's "with the door" figure: under 30 ms.)
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from evalq.workers.gateway import Gateway, RunBudgets, Upstream
from evalq.workers.gateway.unix_client import UnixConnection

from .figures import Figure, ratio

TARGET_MS = 2.0
USAGE = {"input_tokens": 1200, "output_tokens": 80, "cache_read_tokens": 4000,
         "cache_write_tokens": 300}
MESSAGES = [{"role": "user", "content": "Fix the failing test in slug.py. " * 40},
            {"role": "assistant", "content": [{"type": "text", "text": "Reading it. " * 20}]}]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


#: kind -> (path, whether streamed)
KINDS = {"whole": ("/v1/messages", False), "streamed": ("/v1/messages", True),
         "chat stream, usage asked for": ("/v1/chat/completions", True)}


def timed_post(conn: http.client.HTTPConnection, body: bytes, path: str) -> float:
    started = time.perf_counter()
    conn.request("POST", path, body=body, headers={
        "Content-Type": "application/json", "x-api-key": "placeholder"})
    reply = conn.getresponse()
    reply.read()
    elapsed = (time.perf_counter() - started) * 1000
    if reply.status != 200:
        raise RuntimeError(f"bench request failed with {reply.status}")
    if reply.getheader("Connection", "").lower() == "close":
        conn.close()
    return elapsed


@contextmanager
def model_server(folder: Path) -> Iterator[str]:
    """`python -m evalq.modelserver` in its own process; yields its URL."""
    script = folder / "script.json"
    script.write_text(json.dumps({"fallback": {"text": "Done.", "usage": USAGE}}))
    child = subprocess.Popen([sys.executable, "-m", "evalq.modelserver", str(script)],
                             stdout=subprocess.PIPE, text=True)
    try:
        url = child.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the model server did not start (said {url!r})")
        yield url
    finally:
        child.terminate()
        child.wait(10)


def measure(url: str, socket_path: Path, n: int, path: str, stream: bool,
            gateway_thread: int) -> dict:
    parts = urlsplit(url)
    direct = http.client.HTTPConnection(parts.hostname, parts.port, timeout=20)
    gated = UnixConnection(str(socket_path))
    if path == "/v1/messages":
        body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": stream,
                           "system": "You are a coding agent.",
                           "messages": MESSAGES}).encode()
    else:
        body = json.dumps({"model": "gpt-5", "stream": stream, "messages": [
            {"role": "system", "content": "You are a coding agent."},
            *({"role": m["role"], "content": str(m["content"])} for m in MESSAGES)]}).encode()
    for _ in range(20):  # warm both paths: connections, thread start, code paths
        timed_post(direct, body, path), timed_post(gated, body, path)
    times: dict[str, list[float]] = {"direct": [], "gateway": []}
    # the gateway loop thread's CPU time: what it spends per request, whatever else the machine
    # runs (the latency figures move with load; this one much less)
    clock = time.pthread_getcpuclockid(gateway_thread)
    cpu = time.clock_gettime(clock)
    for i in range(n):
        order = ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct")
        for side in order:
            times[side].append(timed_post(direct if side == "direct" else gated, body, path))
    cpu = time.clock_gettime(clock) - cpu
    direct.close(), gated.close()
    out = {side: {"p50_ms": percentile(v, 0.5), "p95_ms": percentile(v, 0.95),
                  "mean_ms": sum(v) / len(v), "n": len(v)} for side, v in times.items()}
    out["gateway_cpu_ms_per_request"] = cpu * 1000 / n
    return out


def run(n: int, log) -> tuple[list[Figure], dict]:
    figures, data = [], {}
    with tempfile.TemporaryDirectory(prefix="gw-bench-") as tmp, \
            model_server(Path(tmp)) as url, Gateway() as gateway:
        for index, (kind, (endpoint, stream)) in enumerate(KINDS.items()):
            path = Path(tmp) / f"{index}.sock"
            run_ = gateway.open_run(kind, path, upstreams=[Upstream(url,
                                    auth="x-api-key", credential="KEY")],
                                    credentials={"KEY": "sk-bench-key"},
                                    budgets=RunBudgets(max_requests=10 * n), concurrency=64)
            result = measure(url, path, n, endpoint, stream, gateway.thread.ident)
            metered = run_.totals()
            run_.close()
            added = result["gateway"]["p95_ms"] - result["direct"]["p95_ms"]
            log(f"gateway {kind}: p95 direct {result['direct']['p95_ms']:.3f} ms, "
                f"through the gateway {result['gateway']['p95_ms']:.3f} ms")
            if metered["input_tokens"] is None:  # every request must have been metered
                raise RuntimeError(f"gateway bench ({kind}): a request went unmetered")
            data[kind] = {**result, "requests_metered": metered["model_calls"],
                          "input_tokens_metered": metered["input_tokens"]}
            figures.append(Figure(
                f"gateway added latency per request ({kind} replies), p95", added, "ms",
                target=TARGET_MS, note=f"{n} requests each way; p95 direct "
                f"{result['direct']['p95_ms']:.2f} ms, via gateway "
                f"{result['gateway']['p95_ms']:.2f} ms (ratio "
                f"{ratio(result['gateway']['p95_ms'], result['direct']['p95_ms']):.2f}×); "
                f"gateway thread CPU {result['gateway_cpu_ms_per_request']:.2f} ms a request",
                extra={"ratio_p95": ratio(result["gateway"]["p95_ms"],
                                          result["direct"]["p95_ms"]),
                       "gateway_cpu_ms_per_request": result["gateway_cpu_ms_per_request"]}))
    return figures, data
