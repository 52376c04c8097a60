"""Many in-flight trials in one threads-pool agent worker: memory per trial, and a SIGKILL.

One `evalq worker --queues agents --pool threads -c N` takes a study of N sealed trials whose
agents (the `command` agent running `sleep`, in bubblewrap, each with its door open to a
scripted model server of this script) sleep SLEEP seconds. With all N in flight, two figures:
the worker's own memory (its RSS, plus any child that is not an agent sandbox) less its idle
RSS, measured in the same run, divided by N; and everything evalq starts per trial: that, plus
every process of each sandbox that is not the agent's own `sleep` (bwrap and its init, and the
door's relay launcher when there was one), divided by N. Then the worker is SIGKILLed with N in flight,
a new one takes over, and every trial must end with exactly one recorded outcome. For scale,
one idle prefork child's RSS (what each in-flight trial would cost as a process) is measured
too. Every process started here is stopped by its own pid; the run is bounded by deadlines.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from .figures import Figure, ratio
from .services import ROOT, Workers, child_env, evalq_worker_argv, wait_for

FIXTURE = ROOT / "bench" / "fixture" / "bench-noop"
TARGET_MIB = 5.0  # issues 19 and 32: evalq's own memory per in-flight trial
AGENT_COMM = "sleep"
MiB = 1024 * 1024


# ------------------------------------------------------------------ processes and memory
def _children() -> dict[int, list[int]]:
    """ppid -> pids, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _is_sandbox(pid: int) -> bool:
    """An agent sandbox's root: bwrap itself, or the shell that joins its cgroup and execs it."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and (os.path.basename(argv[0]) == b"bwrap" or b"evalq-join" in argv)


def _descendants(pid: int, tree: dict[int, list[int]]) -> list[int]:
    out, todo = [], list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        out.append(child)
        todo += tree.get(child, [])
    return out


def _is_agent(pid: int) -> bool:
    """The agent's own process (the study's `sleep`), not one of evalq's in its sandbox."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == AGENT_COMM
    except OSError:
        return False


def worker_memory(pid: int) -> dict:
    """The worker's own RSS and its non-agent children's, apart from its agent sandboxes',
    whose processes are split into evalq's (bwrap, its init, a relay) and the agent's."""
    tree = _children()
    own, agents, sandboxes, evalq_in_sandboxes = _rss(pid), 0, 0, 0
    for child in tree.get(pid, []):
        subtree = [child, *_descendants(child, tree)]
        if _is_sandbox(child):
            sandboxes += 1
            for process in subtree:
                if _is_agent(process):
                    agents += _rss(process)
                else:
                    evalq_in_sandboxes += _rss(process)
        else:
            own += sum(_rss(p) for p in subtree)
    return {"own_bytes": own, "agent_bytes": agents, "sandboxes": sandboxes,
            "sandbox_evalq_bytes": evalq_in_sandboxes}


def _prefork_child_rss(env: dict, logdir: Path) -> int | None:
    """RSS of one idle prefork pool child of an agents worker (the per-trial cost of prefork)."""
    workers = Workers(logdir)
    workers.start([*evalq_worker_argv("agents", 1, "prefork-probe@bench"), "--pool",
                   "prefork"], {**env, "EVALQ_BROKER_URL": env["EVALQ_BROKER_URL"].rsplit(
                       "/", 1)[0] + "/9"}, "prefork-probe")  # another Redis db: takes no trial
    try:
        workers.wait_ready()
        main = workers.procs[0][0].pid
        kids = _children().get(main, [])
        return _rss(kids[0]) if kids else None
    finally:
        workers.stop()


# ------------------------------------------------------------------ the study
def _fixture(workdir: Path, wall: int) -> Path:
    """bench-noop with room for the sleep: the fixture's own wall limit is the tighter one."""
    from evalq.fixtures.fixture import freeze_fixture

    dest = workdir / "fixtures" / "bench-noop"
    shutil.copytree(FIXTURE, dest)
    spec = dest / "fixture.toml"
    spec.write_text(spec.read_text().replace("wall_seconds = 60", f"wall_seconds = {wall}"))
    freeze_fixture(dest)
    return dest


def write_study(workdir: Path, n: int, sleep: float, model_url: str) -> Path:
    wall = int(sleep) + 240
    fixture = _fixture(workdir, wall)
    path = workdir / "inflight.toml"
    path.write_text(f'id = "inflight"\nfixtures = ["{fixture.as_posix()}"]\nrepetitions = {n}\n'
                    f"seed = 3\nmax_attempts = 2\n\n[budgets]\nwall_seconds = {wall}\n\n"
                    '[[conditions]]\nname = "sleeper"\nagent = "command"\n'
                    f'settings = {{ base_url = "{model_url}/v1", '
                    f'argv = ["sleep", "{sleep:g}"] }}\n')
    return path


def _rows(url: str) -> list[tuple]:
    from sqlalchemy import text

    from evalq.results.store import get_engine

    with get_engine(url).connect() as conn:
        return conn.execute(text("select trial_id, state, outcome, lease_owner, claims, "
                                 "reason from attempts")).all()


def _outcome_events(url: str) -> dict[str, int]:
    from sqlalchemy import text

    from evalq.results.store import get_engine

    with get_engine(url).connect() as conn:
        rows = conn.execute(text("select trial_id, count(*) from attempt_events where "
                                 "outcome is not null group by trial_id")).all()
    return {r[0]: r[1] for r in rows}


def _in_flight(url: str, pid: int) -> int:
    return sum(1 for r in _rows(url) if r[1] == "running" and r[3]
               and r[3].split(":")[1:2] == [str(pid)])


def _leftovers(workdir: Path) -> list[int]:
    """Processes whose command line names this run's folder (sandboxes left behind)."""
    mark = str(workdir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if mark in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def run(workdir: Path, broker: str, database: str, n: int, sleep: float, log,
        deadline_seconds: float = 1500) -> tuple[list[Figure], dict]:
    """The study's model endpoint is a scripted server of this process: each trial's door
    opens to it (the agents never call it)."""
    from evalq.modelserver import ModelServer
    from evalq.modelserver.script import parse_script

    script = parse_script({"turns": [], "fallback": {"text": "", "usage": {}}})
    with ModelServer(script) as server:
        return _run(workdir, broker, database, n, sleep, log, deadline_seconds, server.url)


def _run(workdir: Path, broker: str, database: str, n: int, sleep: float, log,
         deadline_seconds: float, model_url: str) -> tuple[list[Figure], dict]:
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    end = started + deadline_seconds

    def left() -> float:
        if time.monotonic() > end:
            raise RuntimeError(f"the inflight bench passed its {deadline_seconds:.0f} s bound")
        return end - time.monotonic()

    lease = 10
    env = child_env({"EVALQ_HOME": str(workdir / "home"), "EVALQ_BROKER_URL": broker,
                     "EVALQ_DATABASE_URL": database,
                     "EVALQ_ARTIFACTS_URL": str(workdir / "artifacts"),
                     "EVALQ_AGENT_SANDBOX": "bwrap", "EVALQ_LEASE_SECONDS": str(lease)})
    logdir = workdir / "logs"
    logdir.mkdir(exist_ok=True)
    study = write_study(workdir, n, sleep, model_url)
    from evalq.results.store import init_db

    init_db(database)  # the tables exist before the first poll
    data: dict = {"n": n, "agent_sleep_seconds": sleep, "lease_seconds": lease}
    data["prefork_child_rss_bytes"] = _prefork_child_rss(env, logdir)

    graders, agents, victim = Workers(logdir), Workers(logdir), Workers(logdir)
    launcher = None
    try:
        graders.start(evalq_worker_argv("grading,results", 2, "grader@bench"), env, "grader")
        victim.start([*evalq_worker_argv("agents", n, "agent-a@bench-a"), "--pool", "threads"],
                     env, "agent-a")
        victim.wait_ready(min(120, left()))
        graders.wait_ready(min(120, left()))
        pid = victim.procs[0][0].pid
        idle = worker_memory(pid)
        data["idle"] = idle
        log(f"worker idle RSS {idle['own_bytes'] / MiB:.1f} MiB; sending {n} trials")
        launcher = subprocess.Popen([sys.executable, "-m", "evalq.cli.__main__", "run",
                                     str(study), "--yes"], env=env, cwd=ROOT,
                                    stdout=open(logdir / "launcher.log", "wb"),
                                    stderr=subprocess.STDOUT, start_new_session=True)
        ramp = time.monotonic()
        peak, samples = 0, []

        def all_in_flight() -> bool:
            nonlocal peak
            count = _in_flight(database, pid)
            memory = worker_memory(pid)
            samples.append({"t": round(time.monotonic() - ramp, 1), "in_flight": count,
                            **memory})
            peak = max(peak, count)
            return count >= n and memory["sandboxes"] >= n

        try:
            wait_for(all_in_flight, min(sleep + 60, left()), f"{n} trials in flight",
                     poll=1.0)
        except RuntimeError as exc:
            log(str(exc))
        data["ramp_seconds"] = round(time.monotonic() - ramp, 1)
        loaded = max((s for s in samples if s["in_flight"] == peak),
                     key=lambda s: s["own_bytes"])
        data["loaded"] = loaded
        data["samples"] = samples[-20:]
        per_trial = (loaded["own_bytes"] - idle["own_bytes"]) / max(1, loaded["in_flight"])
        per_trial_all = (loaded["own_bytes"] - idle["own_bytes"]
                         + loaded["sandbox_evalq_bytes"]) / max(1, loaded["in_flight"])
        log(f"{loaded['in_flight']} in flight after {data['ramp_seconds']} s: worker RSS "
            f"{loaded['own_bytes'] / MiB:.1f} MiB, evalq's in the sandboxes "
            f"{loaded['sandbox_evalq_bytes'] / MiB:.1f} MiB, agents' "
            f"{loaded['agent_bytes'] / MiB:.1f} MiB in {loaded['sandboxes']} sandboxes")

        os.kill(pid, signal.SIGKILL)  # the worker alone: its sandboxes die with it
        victim.procs[0][0].wait(30)
        killed_at = time.monotonic()
        killed_in_flight = loaded["in_flight"]
        agents.start([*evalq_worker_argv("agents", n, "agent-b@bench-b"), "--pool", "threads"],
                     env, "agent-b")
        code = launcher.wait(left())
        data["launcher_exit"] = code
        data["recovery_seconds"] = round(time.monotonic() - killed_at, 1)
    finally:
        if launcher is not None and launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
        for group in (agents, victim, graders):
            group.stop()
        for stray in _leftovers(workdir):  # a sandbox that outlived its worker: ours, stopped
            try:
                os.kill(stray, signal.SIGKILL)
            except ProcessLookupError:
                pass
    data["leftover_processes"] = len(_leftovers(workdir))

    rows = _rows(database)
    events = _outcome_events(database)
    lost = sum(1 for r in rows if r[2] is None or events.get(r[0]) != 1)
    data["rows"] = len(rows)
    data["outcomes"] = {o: sum(1 for r in rows if r[2] == o) for o in {r[2] for r in rows}}
    data["reclaimed"] = sum(1 for r in rows if r[4] >= 2)
    data["failure_reasons"] = dict(Counter((r[5] or "")[:300] for r in rows
                                           if r[2] and r[2] != "correct"))
    data["seconds"] = round(time.monotonic() - started, 1)

    prefork = data["prefork_child_rss_bytes"]
    per_mib = per_trial / MiB
    sandboxes = max(1, loaded["sandboxes"])
    figures = [
        Figure(f"everything evalq starts per in-flight sealed trial ({killed_in_flight} in one "
               "threads worker, each with its door)", per_trial_all / MiB, "MiB",
               target=TARGET_MIB,
               note=f"worker growth {(loaded['own_bytes'] - idle['own_bytes']) / MiB:.1f} MiB "
                    f"+ evalq's processes in the sandboxes "
                    f"{loaded['sandbox_evalq_bytes'] / MiB:.1f} MiB "
                    f"({loaded['sandbox_evalq_bytes'] / sandboxes / MiB:.2f} MiB a sandbox: "
                    "bwrap and its init), RSS; the agents' own sleep processes "
                    f"{loaded['agent_bytes'] / MiB:.0f} MiB excluded"),
        Figure(f"evalq's own memory per in-flight trial ({killed_in_flight} in one threads "
               "worker)", per_mib, "MiB", target=TARGET_MIB,
               note=f"worker RSS {idle['own_bytes'] / MiB:.1f} → "
                    f"{loaded['own_bytes'] / MiB:.1f} MiB; agents' own "
                    f"{loaded['agent_bytes'] / MiB:.0f} MiB excluded; "
                    + (f"{ratio(per_trial, prefork):.3f}× an idle prefork child "
                       f"({prefork / MiB:.1f} MiB)" if prefork else "prefork child unmeasured")),
        Figure("in-flight trials one worker fell short of", float(n - peak), "trials",
               target=0, note=f"peak {peak} of {n} after {data['ramp_seconds']} s, agents "
                              f"sleeping {sleep:g} s"),
        Figure(f"trials without exactly one outcome after a SIGKILL with {killed_in_flight} "
               "in flight", float(lost), "trials", target=0,
               note=f"{len(rows)} attempts, {data['reclaimed']} re-claimed, outcomes "
                    f"{data['outcomes']}, launcher exit {data.get('launcher_exit')}, "
                    f"recovered in {data.get('recovery_seconds')} s, "
                    f"{data['leftover_processes']} leftover processes"
                    + (f"; not correct: {data['failure_reasons']}" if data["failure_reasons"]
                       else "")),
    ]
    for figure in figures:
        log(figure.line())
    return figures, data
