"""Per-trial cost of the agent sandbox against the unsealed run, measured in this one script.

The same trial body (the bench-noop fixture, the scripted agent's no-op process, through
`AgentAdapter.run`: profile, environment, sandbox, parse, redaction) runs unsealed (`none`),
in bubblewrap and, where the engine and evalq-agent:local are there, in Docker; rounds are
interleaved so load on the machine falls on every backend alike. A second pair does the same
with a model endpoint (a loopback scripted model server), so the door is opened and the
launcher is pid 1; the agent makes no request, so the figure is the sandbox's, not the model's.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

from .figures import Figure, ratio
from .services import ROOT

FIXTURE = ROOT / "bench" / "fixture" / "bench-noop"
TARGET_MS = 30.0  # issue 13: the sandbox adds under 30 ms per trial on bwrap


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

    workdir.mkdir(parents=True, exist_ok=True)
    docker_why = _docker_ready()
    backends = ["none", "bwrap"] + ([] if docker_why else ["docker"])
    times: dict[str, list[float]] = {}
    script = parse_script({"turns": [], "fallback": {"text": "", "usage": {}}})
    with ModelServer(script) as server:
        variants = [(b, None) for b in backends] + [(b, server.url) for b in backends]
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
    return figures, data
