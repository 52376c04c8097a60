"""Run evalq code as root without CAP_SYS_ADMIN, as a Docker container's root is.

`command(argv, shown)` prefixes argv with setpriv dropping CAP_SYS_ADMIN from the effective,
inheritable and bounding sets, so neither the process nor anything it starts can get it back;
with `cgroups=False` the process also finds /sys/fs/cgroup read-only and empty, as in a
container without a writable cgroup tree. Without CAP_SYS_ADMIN bubblewrap runs as the agent
user (uid 65534), which must be able to reach every folder it binds: the test's own temporary
folders are opened to it (`let_agent_pass`); a folder above `shown` that other users cannot
search and the test does not own (a Python installed under /root by pyenv) is replaced, in a
mount namespace of that process alone, by a searchable stand-in holding only what lies on the
way. `run_agent_job` and `run_grading` run one sandboxed command that way.

Run as a script, it is that process's first step: `stand-in` (mount namespace set-up, then
exec), `agent-job` or `grading` (one run, its AgentJob or arguments as JSON on stdin).
"""

from __future__ import annotations

import base64
import ctypes
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DROP = ["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--"]
MS_RDONLY, MS_BIND, MS_MOVE, MS_REC = 1, 4096, 8192, 16384
CGROUPS = Path("/sys/fs/cgroup")
HERE = Path(__file__).resolve()


def _searchable(folder: Path) -> bool:
    return bool(folder.stat().st_mode & 0o001)


def let_agent_pass(path: Path, base: Path) -> None:
    """Make `path` and every folder above it up to `base` (a test's temporary folder)
    searchable by others, as a deployment's EVALQ_HOME must be."""
    path, base = path.resolve(), base.resolve()
    for folder in [path, *path.parents]:
        if folder != base and base not in folder.parents:
            break
        if folder.is_dir() and not _searchable(folder):
            folder.chmod(folder.stat().st_mode | 0o011)


def _closed_above(paths: list[Path]) -> dict[Path, set[str]]:
    """Folders above `paths` other users cannot search, with the entries on the way."""
    closed: dict[Path, set[str]] = {}
    for path in paths:
        path = path.resolve()
        for folder in reversed(path.parents):
            if not _searchable(folder):
                closed.setdefault(folder, set()).add(path.relative_to(folder).parts[0])
    return closed


def command(argv: list[str], shown=(), cgroups: bool = True) -> list[str]:
    """argv run without CAP_SYS_ADMIN; `shown`: host paths the agent sandbox must bind."""
    shown = [str(p) for p in shown]
    if cgroups and not _closed_above([Path(p) for p in shown]):
        return [*DROP, *argv]
    return ["unshare", "--mount", "--propagation", "private", "--", sys.executable, str(HERE),
            "stand-in", "yes" if cgroups else "no", *shown, "--", *DROP, *argv]


def _mount(source: str, target: Path, kind: str | None, flags: int, data: str | None) -> None:
    from evalq.graders.sandbox.scratch import _libc

    if _libc().mount(source.encode(), str(target).encode(), kind.encode() if kind else None,
                     flags, data.encode() if data else None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {source} on {target}")


def _stand_in(folder: Path, entries: set[str]) -> None:
    """A searchable tmpfs on `folder` holding only `entries`, moved over from the real one."""
    stash = Path(tempfile.mkdtemp(prefix="evalq-stand-in-"))
    kept = []
    for name in sorted(entries):
        keep = stash / name
        keep.mkdir() if (folder / name).is_dir() else keep.touch()
        _mount(str(folder / name), keep, None, MS_BIND | MS_REC, None)
        kept.append((name, keep))
    _mount("tmpfs", folder, "tmpfs", 0, "mode=0711")
    for name, keep in kept:
        (folder / name).mkdir() if keep.is_dir() else (folder / name).touch()
        _mount(str(keep), folder / name, None, MS_MOVE, None)
        keep.rmdir() if keep.is_dir() else keep.unlink()
    stash.rmdir()  # it is in the host's /tmp: nothing is left there


def _stand_ins(cgroups: str, shown: list[str], rest: list[str]) -> None:
    closed = _closed_above([Path(p) for p in shown])
    for folder in sorted(closed, key=lambda f: len(f.parts)):
        _stand_in(folder, closed[folder])
    if cgroups == "no":
        _mount("tmpfs", CGROUPS, "tmpfs", MS_RDONLY, "mode=0755")
    os.execvp(rest[0], rest)


def _agent_job(payload: dict) -> dict:
    from evalq.errors import InfrastructureError
    from evalq.graders.sandbox.base import SandboxLimits
    from evalq.workers.sandbox import AgentJob
    from evalq.workers.sandbox.bwrap import BwrapAgentSandbox

    payload["limits"] = SandboxLimits(**payload["limits"])
    payload["stdin"] = base64.b64decode(payload["stdin"]) if payload["stdin"] else None
    for key in ("workspace", "profile_root"):
        payload[key] = Path(payload[key])
    payload["readonly"] = [Path(p) for p in payload["readonly"]]
    try:
        done = BwrapAgentSandbox().run(AgentJob(**payload))
    except InfrastructureError as exc:
        return {"refused": str(exc)}
    return {**dataclasses.asdict(done), "stdout": base64.b64encode(done.stdout).decode(),
            "stderr": base64.b64encode(done.stderr).decode()}


def _grading(payload: dict) -> dict:
    from evalq.graders.sandbox import SandboxLimits, get_sandbox

    done = get_sandbox("bwrap").run(payload["argv"], workspace=Path(payload["workspace"]),
                                    report_dir=Path(payload["report_dir"]),
                                    limits=SandboxLimits(**payload["limits"]),
                                    env=payload["env"])
    return {k: v for k, v in dataclasses.asdict(done).items() if k != "toolchain"}


def _call(role: str, payload: dict, shown=(), cgroups: bool = True) -> dict:
    argv = command([sys.executable, str(HERE), role], shown, cgroups)
    done = subprocess.run(argv, input=json.dumps(payload), capture_output=True, text=True,
                          timeout=300, cwd="/")
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_agent_job(job, cgroups: bool = True, shown=None):
    """The AgentJob run by the bwrap agent sandbox in a process without CAP_SYS_ADMIN (its
    InfrastructureError raised here); `shown`: what to give stand-ins (default: every bind)."""
    from evalq.errors import InfrastructureError
    from evalq.proc import ProcResult

    assert job.should_stop is None, "a callable does not cross to the other process"
    payload = {**{f.name: getattr(job, f.name) for f in dataclasses.fields(job)},
               "limits": dataclasses.asdict(job.limits), "workspace": str(job.workspace),
               "profile_root": str(job.profile_root),
               "readonly": [str(p) for p in job.readonly],
               "stdin": base64.b64encode(job.stdin).decode() if job.stdin else None}
    shown = [*job.readonly, job.profile_root] if shown is None else shown
    out = _call("agent-job", payload, shown, cgroups)
    assert out.pop("held") == {"cap_sys_admin": False, "cgroups": cgroups}, "not as asked"
    if "refused" in out:
        raise InfrastructureError(out["refused"])
    out["stdout"], out["stderr"] = (base64.b64decode(out[k]) for k in ("stdout", "stderr"))
    return ProcResult(**out)


#: the agent-sandbox backend name the tests give "bwrap, run as root without CAP_SYS_ADMIN"
NO_SYS_ADMIN = "bwrap-no-sys-admin"


def run_job(backend: str, job, base: Path):
    """job run by `backend`'s agent sandbox here, or for NO_SYS_ADMIN by bwrap's in a process
    without CAP_SYS_ADMIN (`base`: the test's temporary root, opened to the agent user)."""
    if backend != NO_SYS_ADMIN:
        from evalq.workers.sandbox import get_agent_sandbox

        return get_agent_sandbox(backend).run(job)
    for path in [job.profile_root, *job.readonly]:
        let_agent_pass(path.parent, base)
    return run_agent_job(job)


def run_grading(argv: list[str], workspace: Path, report_dir: Path, limits, env: dict,
                cgroups: bool = True) -> dict:
    """One grading sandbox run (its ExecResult's fields) without CAP_SYS_ADMIN."""
    out = _call("grading", {"argv": argv, "workspace": str(workspace),
                            "report_dir": str(report_dir), "env": env,
                            "limits": dataclasses.asdict(limits)}, [workspace, report_dir],
                cgroups)
    assert out.pop("held") == {"cap_sys_admin": False, "cgroups": cgroups}, "not as asked"
    return out


if __name__ == "__main__":
    if sys.argv[1] == "stand-in":
        split = sys.argv.index("--")
        _stand_ins(sys.argv[2], sys.argv[3:split], sys.argv[split + 1:])
    else:
        sys.path.insert(0, str(HERE.parents[1]))
        from evalq.graders.sandbox.cgroups import can_make_cgroups
        from evalq.graders.sandbox.privilege import can_mount

        role = {"agent-job": _agent_job, "grading": _grading}[sys.argv[1]]
        held = {"cap_sys_admin": can_mount(), "cgroups": can_make_cgroups()}
        print(json.dumps({**role(json.loads(sys.stdin.read())), "held": held}))
