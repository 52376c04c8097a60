"""A hostile `command` agent in a real embedded study, in each agent sandbox.

It tries to read a reference solution (fixture cache and artifact store under EVALQ_HOME, the
checkout's fixtures/, the study's fixture copy, a copy elsewhere on the host) and the hidden
tests, another run's workspace, the worker's environment and canaries in the worker's HOME and
EVALQ_SECRETS_FILE; to write outside its workspace; to leave `setsid` and double-forked
processes; to reach a loopback listener that is not the door and a host in a network namespace
this test makes; to plant a trigger in the results database; and, last, to put a symlink to a
host copy of the reference solution in place of its workspace, for evalq to collect from
outside. Each is checked from outside:
no canary in any form anywhere evalq stored, no file written, no process left, no connection
accepted, no trigger, and the cheating condition graded incorrect, while its door to the model
server works. The same agent with the sandbox `none` (the control) succeeds at the attacks, so
the checks can fail; that study is marked unsealed. The bwrap study runs twice: as this test
process (root), and with evalq run as root without CAP_SYS_ADMIN (as in a container), where
bubblewrap itself runs as the agent user (that the agent is then still the host's uid 65534,
not root, test_other_ways_out.py checks from the host).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "agents"))

from conftest import ROOT  # noqa: E402
from test_agents_support import (artifact, attempts, copy_fixture, expanded,  # noqa: E402
                                 run_study, write_manifest)
from evalq.modelserver import ModelServer  # noqa: E402
from no_sys_admin import NO_SYS_ADMIN, command, let_agent_pass  # noqa: E402
from evalq.modelserver.script import parse_script  # noqa: E402

FIXTURE = "py-slugify-bugfix"
HOST_IP, NS_IP = "10.231.61.1", "10.231.61.2"  # a /30 of this test's own namespace
KINDS = ("solution", "hidden", "other_run", "home", "secret", "env", "process")


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


class Listener:
    """A TCP listener that counts the connections it accepts (in this process: loopback)."""

    def __init__(self):
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)


NS_SERVER = """
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(16); s.settimeout(600)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); print("accepted", flush=True); c.close()
"""


class NamespaceHost:
    """A test host in a network namespace of its own, reachable from the host over a veth."""

    def __init__(self, tag: str):
        self.ns, self.host_dev, self.ns_dev = f"evqa{tag}", f"evqah{tag}", f"evqan{tag}"
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.host_dev, "type", "veth", "peer", "name", self.ns_dev)
        _ip("link", "set", self.ns_dev, "netns", self.ns)
        _ip("addr", "add", f"{HOST_IP}/30", "dev", self.host_dev)
        _ip("link", "set", self.host_dev, "up")
        _ip("-n", self.ns, "addr", "add", f"{NS_IP}/30", "dev", self.ns_dev)
        _ip("-n", self.ns, "link", "set", self.ns_dev, "up")
        _ip("-n", self.ns, "link", "set", "lo", "up")
        self.server = subprocess.Popen(["ip", "netns", "exec", self.ns, sys.executable, "-c",
                                        NS_SERVER, NS_IP], stdout=subprocess.PIPE, text=True)
        self.port = int(self.server.stdout.readline())

    def accepted(self) -> int:
        self.server.kill()
        out, _ = self.server.communicate(timeout=30)
        return out.count("accepted")

    def close(self):
        if self.server.poll() is None:
            self.server.kill()
            self.server.wait(30)
        subprocess.run(["ip", "link", "del", self.host_dev], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=30)


def _forms(text: str) -> list[bytes]:
    raw = text.encode()
    return [raw, raw[::-1], raw.hex().encode(), base64.b64encode(raw)]


def _processes_with(token: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and token.encode() in (proc / "cmdline").read_bytes():
                found.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()!r}")
        except OSError:
            pass
    return found


def _plant(tmp: Path, canaries: dict, home: Path, worker_home: Path) -> dict:
    """The fixture copy with canaries in its correct solution and hidden tests, a copy of it
    elsewhere on the host, another run's workspace, the worker HOME canary, the secrets file."""
    fixture = copy_fixture(FIXTURE, tmp / "fixtures")
    for path, kind in ((fixture / "solutions" / "correct" / "textutil" / "slug.py", "solution"),
                       (fixture / "hidden" / "hidden_tests" / "test_slug_hidden.py", "hidden")):
        path.write_text(path.read_text() + f"\n# {canaries[kind]}\n")
    from evalq.fixtures.fixture import freeze_fixture

    freeze_fixture(fixture)
    return plant_around(fixture, tmp, canaries, home, worker_home)


def plant_around(fixture: Path, tmp: Path, canaries: dict, home: Path,
                 worker_home: Path) -> dict:
    """The canaries around a planted fixture: a copy of it elsewhere on the host, another
    run's workspace, the worker HOME canary, the secrets file."""
    elsewhere = Path("/tmp") / f"evalq-hostile-copy-{canaries['process']}"
    shutil.copytree(fixture, elsewhere)
    other_run = home / "runs" / "evalq-run-planted" / "workspace"
    other_run.mkdir(parents=True)
    (other_run / "notes.txt").write_text(canaries["other_run"])
    worker_home.mkdir()
    (worker_home / ".canary").write_text(canaries["home"])
    secrets = tmp / "secrets.env"
    secrets.write_text(f"ANTHROPIC_API_KEY={canaries['secret']}\n")
    secrets.chmod(0o600)
    return {"fixture": fixture, "elsewhere": elsewhere, "secrets": secrets}


def _study(backend: str, tmp: Path, base: Path) -> dict:
    token = uuid.uuid4().hex[:12]
    canaries = {k: f"evalq-canary-{k}-{token}" for k in KINDS}
    home, worker_home = tmp / "home", tmp / "worker-home"
    planted = _plant(tmp, canaries, home, worker_home)
    agent = tmp / "agent" / "hostile_agent.py"
    agent.parent.mkdir()
    shutil.copy(HERE / "hostile_agent.py", agent)
    agent.chmod(0o755)
    host_tmp_target = Path("/tmp") / f"evalq-pwned-{token}"
    listener, ns_host = Listener(), NamespaceHost(token[:6])
    # every count reported and a priced model: the gateway can enforce the fixture's cost limit
    priced = {"cache_read_tokens": 0, "cache_write_tokens": 0}
    script = parse_script({"turns": [{"text": "hello", "usage": {"input_tokens": 3,
                                                                 "output_tokens": 2, **priced}}],
                           "fallback": {"text": "again", "usage": {"input_tokens": 1,
                                                                   "output_tokens": 1,
                                                                   **priced}}})
    try:
        with ModelServer(script) as server:
            targets = {
                "canaries": canaries,
                "search_roots": [str(home), str(ROOT / "fixtures"), str(planted["fixture"]),
                                 str(planted["elsewhere"]), str(worker_home),
                                 str(planted["secrets"])],
                "write_targets": {"worker_home": str(worker_home / f"pwned-{token}"),
                                  "host_tmp": str(host_tmp_target),
                                  "evalq_home": str(home / f"pwned-{token}")},
                "connect": {"loopback": ["127.0.0.1", listener.port],
                            "netns_host": [NS_IP, ns_host.port]},
                "database": str(home / "evalq.db"),
                "solution_dir": str(planted["fixture"] / "solutions" / "correct"),
                "trigger": f"evalq_hostile_{token}",
            }
            argv = [str(agent), "{model_url}", "{output_dir}",
                    json.dumps(targets).replace("{", "{{").replace("}", "}}")]
            conditions = f'''
[[conditions]]
name = "hostile"
agent = "command"
settings = {{ argv = {json.dumps(argv)}, base_url = "{server.url}", credential_env = ["ANTHROPIC_API_KEY"] }}
'''
            manifest = write_manifest(tmp / "study", planted["fixture"], conditions,
                                      study_id=f"hostile-{backend}", wall=120)
            wrap = None
            if backend == NO_SYS_ADMIN:  # bwrap, as uid 65534, must reach what it binds
                let_agent_pass(home, base)
                let_agent_pass(agent.parent, base)
                wrap = lambda argv: command(argv, [home, agent.parent])  # noqa: E731
            report = run_study(manifest, home, {
                "EVALQ_AGENT_SANDBOX": _sandbox(backend), "HOME": str(worker_home),
                "EVALQ_SECRETS_FILE": str(planted["secrets"]),
                "EVALQ_HOSTILE_CANARY": canaries["env"]}, wrap=wrap)
            door_requests = len(server.exchanges)
        left = _processes_with(canaries["process"])
        written = [p for p in targets["write_targets"].values() if Path(p).exists()]
        return {"home": home, "worker_home": worker_home, "report": report, "token": token,
                "canaries": canaries, "targets": targets, "door_requests": door_requests,
                "loopback_accepted": listener.accepted, "netns_accepted": ns_host.accepted(),
                "written": written, "processes_left": left}
    finally:
        listener.close()
        ns_host.close()
        for line in _processes_with(canaries["process"]):  # the control's leftovers
            os.kill(int(line.split(":")[0]), 9)
        host_tmp_target.unlink(missing_ok=True)
        shutil.rmtree(planted["elsewhere"], ignore_errors=True)


def _sandbox(backend: str) -> str:
    """The EVALQ_AGENT_SANDBOX of a backend this test names."""
    return "bwrap" if backend == NO_SYS_ADMIN else backend


@pytest.fixture(scope="module", params=["bwrap", NO_SYS_ADMIN, "docker", "none"])
def study(request, tmp_path_factory):
    if request.param != "none":
        from evalq.workers.sandbox import get_agent_sandbox

        ok, why = get_agent_sandbox(_sandbox(request.param)).available()
        if not ok:
            pytest.fail(f"agent sandbox '{request.param}' is not available: {why}",
                        pytrace=False)
    data = _study(request.param, tmp_path_factory.mktemp(f"hostile-{request.param}"),
                  tmp_path_factory.getbasetemp())
    data["backend"] = request.param
    (data["row"],) = attempts(data["home"])
    stdout = artifact(data["home"], data["row"]["artifacts"]["stdout"]).decode(errors="replace")
    summary = [json.loads(l) for l in stdout.splitlines() if l.startswith('{"type": "hostile"')]
    assert summary, f"the hostile agent did not finish: {stdout[-2000:]}"
    data["said"] = summary[0]["results"]
    return data


def _agent_blobs(study):
    """Everything evalq kept of the agent's run: its artifacts (archives expanded), its
    attempt row, the worker logs. (The fixture archive and the manifest hold canaries by
    design: the solution in one, the agent's argv in the other.)"""
    home, row = study["home"], study["row"]
    for name, ref in row["artifacts"].items():
        for blob in expanded(artifact(home, ref)):
            yield f"artifact {name}", blob
    yield "attempt row", repr(row).encode()
    for log in (home / "logs").glob("*.log"):
        yield str(log), log.read_bytes()


def test_cheating_condition_is_graded_incorrect(study):
    outcome = study["row"]["outcome"]
    if study["backend"] == "none":  # the control: unsealed, it found the answer and applied it
        assert outcome == "correct", study["row"]["reason"]
        assert study["report"]["agent_sandbox"]["sealed"] is False
        assert any("unsealed" in r for r in study["report"]["claims"]["reasons"])
        return
    assert outcome == "incorrect", (study["row"]["reason"], study["said"])
    sandbox = _sandbox(study["backend"])
    assert study["report"]["agent_sandbox"] == {
        "sealed": True, "backends": {sandbox: 1}, "unsealed_attempts": 0,
        "unknown_attempts": 0, "lock_agent_sandbox": sandbox}


def test_no_canary_was_read_in_any_form(study):
    if study["backend"] == "none":  # the control: every canary is in what the agent stored
        stored = b"".join(blob for _, blob in _agent_blobs(study))
        for kind in ("solution", "hidden", "other_run", "home", "secret", "env"):
            assert any(f in stored for f in _forms(study["canaries"][kind])), kind
        assert study["said"]["environ"].startswith("GOT")
        return
    needles = {kind: _forms(value) for kind, value in study["canaries"].items()
               if kind != "process"}
    searched = 0
    for where, blob in _agent_blobs(study):
        searched += 1
        for kind, forms in needles.items():
            assert not any(f in blob for f in forms), f"{kind} canary found in {where}"
    assert searched > 10
    for kind in ("solution", "hidden", "other_run", "home", "secret", "environ", "env_key"):
        assert study["said"][kind].startswith("blocked"), (kind, study["said"][kind])
    # pid 1 is the sandbox's init, started with the agent's minimal environment only: bwrap's
    # (root's, as root: not the agent's to read at all) or Docker's (the agent user's)
    pid1 = study["said"]["pid1_environ"]
    assert pid1 == "" or "HOME=" in pid1, pid1
    assert study["canaries"]["env"] not in pid1
    assert not any(k in pid1 for k in ("EVALQ_", "VIRTUAL_ENV", "PYTHONPATH"))


def test_nothing_was_written_outside_the_workspace(study):
    written = study["written"]  # looked at before the test's own clean-up
    if study["backend"] == "none":
        assert len(written) == 3
        return
    assert written == []
    assert not list(study["worker_home"].glob("pwned-*"))


def test_the_workspace_cannot_fill_the_hosts_disk(study):
    """Its file system is the run's own tmpfs of DEFAULT_DISK_MB, not EVALQ_HOME's disk (the
    runner makes every profile so, unsealed ones too). Without CAP_SYS_ADMIN no tmpfs can be
    mounted: the profile is a plain folder, and the worker's log says so."""
    from evalq.workers.sandbox.base import DEFAULT_DISK_MB

    if study["backend"] == NO_SYS_ADMIN:
        logs = b"".join(log.read_bytes() for log in (study["home"] / "logs").glob("*.log"))
        assert b"has no total disk cap (mounting a tmpfs needs CAP_SYS_ADMIN" in logs
        return
    assert study["said"]["disk_bytes"] <= DEFAULT_DISK_MB * 1024 * 1024, study["said"]


def test_no_process_outlived_the_run(study):
    if study["backend"] == "none":
        assert len(study["processes_left"]) == 2, study["processes_left"]
        return
    assert study["processes_left"] == []
    if study["backend"] == "docker":
        import docker

        client = docker.from_env()
        left = client.containers.list(all=True, filters={"label": "evalq.phase=agent"},
                                      ignore_removed=True)
        assert not [c for c in left if c.labels.get("evalq.label", "").startswith(FIXTURE)]


def test_only_the_door_was_reachable(study):
    assert study["door_requests"] >= 1 and study["said"]["door"].startswith("ok 200")
    if study["backend"] == "none":
        assert study["loopback_accepted"] >= 1 and study["netns_accepted"] >= 1
        return
    assert study["loopback_accepted"] == 0, study["said"]["connect_loopback"]
    assert study["netns_accepted"] == 0, study["said"]["connect_netns_host"]


def test_results_database_was_not_changed(study):
    db = sqlite3.connect(study["home"] / "evalq.db")
    triggers = [n for (n,) in db.execute("select name from sqlite_master where type='trigger'")]
    if study["backend"] == "none":
        assert study["targets"]["trigger"] in triggers
        return
    assert triggers == [] and study["said"]["database"].startswith("blocked")
