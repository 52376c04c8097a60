"""Per-trial cost of the agent sandbox against the unsealed run, measured in this one script.

The same trial body (the bench-noop fixture, the scripted agent's no-op process, through
`AgentAdapter.run`: profile, environment, sandbox, parse, redaction) runs unsealed (`none`),
in bubblewrap and, where the engine and evalq-agent:local are there, in Docker; rounds are
interleaved so load on the machine falls on every backend alike. A second pair does the same
with a model endpoint (a loopback scripted model server), so the door is opened (its prelude
hands the gateway the sandbox's listener); the agent makes no request, so the figure is the
sandbox's, not the model's. Where bwrap runs as root the worker opens that door from outside;
the same sandbox with the door opened by the prelude from inside (as without CAP_SYS_ADMIN),
and the door as it was before, a relay launcher as pid 1 for the whole run (both in
bench/relay_door.py), run interleaved with them, so old and new are compared in one script. Last, the memory of evalq's own processes in one sealed sandbox
with a door (everything between the worker and the agent: bwrap, its init, the relay launcher
if any), old and new, while the agent sleeps.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from pathlib import Path

from .figures import Figure, ratio
from .services import ROOT

FIXTURE = ROOT / "bench" / "fixture" / "bench-noop"
TARGET_MS = 30.0  # issue 13: the sandbox adds under 30 ms per trial on bwrap
MiB = 1024 * 1024
RELAY = "bwrap-relay"
PRELUDE = "bwrap-prelude"


def _trial(workdir: Path, sandbox: str, base_url: str | None) -> float:
    from evalq.fixtures.fixture import load_fixture, materialize
    from evalq.models import Condition, Limits
    from evalq.workers.agents.base import AgentContext
    from evalq.workers.agents.registry import get_adapter
    from evalq.workers.profile import new_profile

    fixture = load_fixture(FIXTURE)
    settings = {"action": "noop", **({"base_url": base_url} if base_url else {})}
    started = time.perf_counter()
    profile = new_profile(workdir / "runs")
    try:
        materialize(fixture, profile.workspace)
        ctx = AgentContext(fixture=fixture, condition=Condition(name="c", settings=settings),
                           profile=profile, prompt="noop", limits=Limits(wall_seconds=60),
                           sandbox=sandbox, evalq_home=workdir)
        result = get_adapter("scripted").run(ctx)
        if result.metrics.stop_reason != "completed":
            raise RuntimeError(f"{sandbox}: the no-op trial did not complete: "
                               f"{result.stderr[-500:]!r}")
    finally:
        profile.cleanup()
    return time.perf_counter() - started


def _docker_ready() -> str | None:
    from evalq.workers.sandbox.docker import DEFAULT_IMAGE, DockerAgentSandbox

    ok, why = DockerAgentSandbox.available()
    if not ok:
        return why
    if subprocess.run(["docker", "image", "inspect", DEFAULT_IMAGE],
                      capture_output=True).returncode:
        return f"image {DEFAULT_IMAGE} is missing (bash scripts/build-grader-images.sh agent)"
    return None


def run(workdir: Path, n: int, log) -> tuple[list[Figure], dict]:
    from evalq.modelserver import ModelServer
    from evalq.modelserver.script import parse_script

    from .relay_door import BwrapRelaySandbox, register

    workdir.mkdir(parents=True, exist_ok=True)
    docker_why = _docker_ready()
    register()
    relay_ok, relay_why = BwrapRelaySandbox.available()
    backends = ["none", "bwrap"] + ([] if docker_why else ["docker"])
    times: dict[str, list[float]] = {}
    script = parse_script({"turns": [], "fallback": {"text": "", "usage": {}}})
    with ModelServer(script) as server:
        variants = [(b, None) for b in backends] + [(b, server.url) for b in backends] + \
            ([(PRELUDE, server.url), (RELAY, server.url)] if relay_ok else [])
        for variant in variants:  # warm-up: imports, seccomp compile, page cache
            _trial(workdir, *variant)
        for _ in range(n):
            for sandbox, url in variants:
                key = f"{sandbox}{'+door' if url else ''}"
                times.setdefault(key, []).append(_trial(workdir, sandbox, url))
    median = {k: statistics.median(v) for k, v in times.items()}
    data = {"n": n, "median_seconds": median,
            "mean_seconds": {k: statistics.fmean(v) for k, v in times.items()},
            "docker": docker_why or "measured"}
    figures = []
    for door in ("", "+door"):
        base = median["none" + door]
        for sandbox in ("bwrap", "docker"):
            name = f"agent sandbox cost per trial, {sandbox}{' with the door' if door else ''}"
            key = sandbox + door
            if key not in median:
                figures.append(Figure(name, None, "ms", target=TARGET_MS if sandbox == "bwrap"
                                      else None, note=f"not measured: {docker_why}"))
                continue
            added = (median[key] - base) * 1000
            figures.append(Figure(
                name, added, "ms", target=TARGET_MS if sandbox == "bwrap" else None,
                note=f"median {median[key] * 1000:.1f} ms vs unsealed {base * 1000:.1f} ms, "
                     f"ratio {ratio(median[key], base):.2f}× (n={n})"))
            log(figures[-1].line())
        if door and RELAY + door in median:
            new = (median["bwrap" + door] - base) * 1000 if "bwrap" + door in median else None
            for key, name in ((PRELUDE, "the door opened by the prelude from inside"),
                              (RELAY, "the relay launcher it replaced")):
                cost = (median[key + door] - base) * 1000
                figures.append(Figure(
                    f"agent sandbox cost per trial, bwrap with {name}", cost, "ms",
                    note=f"median {median[key + door] * 1000:.1f} ms; the door opened from "
                         "outside " + (f"saves {cost - new:.1f} ms a trial"
                                       if new is not None else "unmeasured")))
                log(figures[-1].line())
        elif door:
            figures.append(Figure("agent sandbox cost per trial, bwrap with the relay "
                                  "launcher it replaced", None, "ms",
                                  note=f"not measured: {relay_why}"))
    with ModelServer(script) as server:
        memory = {variant: door_memory(workdir, variant, server.url)
                  for variant in (["bwrap"] + ([PRELUDE, RELAY] if relay_ok else []))}
    data["door_memory_bytes"] = memory
    labels = {"bwrap": "", PRELUDE: " (opened by the prelude)",
              RELAY: " (the relay launcher it replaced)"}
    for variant, found in memory.items():
        old = variant == RELAY
        figures.append(Figure(
            "evalq's processes in one sealed bwrap sandbox with the door" + labels[variant],
            found["bytes"] / MiB, "MiB", target=None if old else 5.0,
            note=", ".join(f"{name} {rss / MiB:.1f}" for name, rss in found["processes"])
            + " MiB RSS; the agent's own excluded"))
        log(figures[-1].line())
    return figures, data


# ------------------------------------------------------------------ memory of one sandbox
def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _find(argv: list[str]) -> int | None:
    wanted = b"\0".join(a.encode() for a in argv) + b"\0"
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted:
                    return int(entry.name)
            except OSError:
                pass
    return None


def evalq_between(agent: int, worker: int) -> list[tuple[str, int]]:
    """(name, RSS) of every process from the agent's parent up to the worker's child: what
    evalq started for this sandbox, the agent's own processes left out."""
    found = []
    pid = _parent(agent)
    while pid not in (worker, 0, 1):
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        found.append((name, _rss(pid)))
        pid = _parent(pid)
    return found


def door_memory(workdir: Path, sandbox: str, url: str, seconds: float = 4.0) -> dict:
    """Run one sealed sandbox with a door whose agent sleeps; measure evalq's processes."""
    from evalq.graders.sandbox.base import SandboxLimits
    from evalq.workers.door import open_door
    from evalq.workers.profile import new_profile
    from evalq.workers.sandbox import AgentJob, get_agent_sandbox

    profile = new_profile(workdir / "runs")
    profile.workspace.mkdir()
    mark = f"{seconds + 0.000123:.6f}"  # the sleeper's argument finds it among all processes
    out: dict = {}
    try:
        with open_door(url) as door:
            argv = ["/bin/sleep", mark]
            job = AgentJob(argv=argv, env=profile.env,
                           workspace=profile.workspace, profile_root=profile.root,
                           limits=SandboxLimits(timeout_seconds=60), door=door.run,
                           label="door-memory")
            box = threading.Thread(target=lambda: out.update(
                done=get_agent_sandbox(sandbox).run(job)), daemon=True)
            box.start()
            deadline = time.monotonic() + 30
            agent = None
            while agent is None and time.monotonic() < deadline:
                agent = _find(argv)
                time.sleep(0.05)
            if agent is None:
                raise RuntimeError(f"{sandbox}: the sleeping agent never appeared")
            time.sleep(0.5)  # settled: the launcher's relay thread is up
            processes = evalq_between(agent, os.getpid())
            box.join(60)
    finally:
        profile.cleanup()
    return {"bytes": sum(rss for _, rss in processes), "processes": processes}
