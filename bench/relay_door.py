"""The door as it was before, and as it is opened from inside, as bench-only backends.

`bwrap-prelude` is today's bwrap with the door opened by its prelude from inside the sandbox
(as without CAP_SYS_ADMIN) instead of by the worker from outside (as root). `bwrap-relay` runs a trial as bubblewrap did when the relay launcher (relay_launcher.py) was
pid 1: the gateway serves the run on a unix socket of the worker's, bind-mounted into the
sandbox, and the launcher relays 127.0.0.1:DOOR_PORT to it for the whole run. The agentbox and
inflight sections run it beside the current `bwrap` in the same script (old vs new); nothing
outside bench/ knows it. `register()` adds both to the agent sandbox backends of this process.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

from evalq.errors import InfrastructureError, SandboxError
from evalq.graders.sandbox.bwrap import run_in_bwrap
from evalq.proc import ProcResult
from evalq.unix_sockets import bound_unix_socket
from evalq.workers.sandbox import BACKENDS
from evalq.workers.sandbox.base import DOOR_PORT, RUN_DIR, AgentJob, give_to_agent, own_door
from evalq.workers.sandbox.bwrap import (AS_AGENT, BwrapAgentSandbox, bwrap_as_root,
                                         bwrap_options, toolchain_python)

NAME = "bwrap-relay"
PRELUDE = "bwrap-prelude"
RELAY_SOURCE = Path(__file__).with_name("relay_launcher.py")
RELAY_PATH = f"{RUN_DIR}/launcher.py"
SOCKET_PATH = f"{RUN_DIR}/door.sock"


def register() -> None:
    BACKENDS[NAME] = f"{__name__}:BwrapRelaySandbox"
    BACKENDS[PRELUDE] = f"{__name__}:BwrapPreludeSandbox"


class BwrapPreludeSandbox(BwrapAgentSandbox):
    name = PRELUDE

    def door_from_outside(self) -> bool:
        return False


class BwrapRelaySandbox(BwrapAgentSandbox):
    name = NAME

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = super().available()
        if ok and not bwrap_as_root():
            return False, "the relay variant is measured as root with CAP_SYS_ADMIN only"
        return ok, why

    def run(self, job: AgentJob) -> ProcResult:
        ok, why = self.available()
        if not ok:
            raise InfrastructureError(why)
        if job.door is None:
            return super().run(job)
        folder = Path(tempfile.mkdtemp(prefix="evalq-relay-"))
        try:
            listener = bound_unix_socket(folder / "door.sock")
            listener.listen(socket.SOMAXCONN)
            own_door(str(folder / "door.sock"))
            job.door.gateway.serve_listener(job.door, listener)  # the run's socket, as before
            give_to_agent(job)
            options = bwrap_options(AgentJob(**{**job.__dict__, "door": None}), True)
            at = options.index("--remount-ro")
            options[at:at] = ["--as-pid-1", "--perms", "0755", "--dir", "/run",
                              "--perms", "0755", "--dir", RUN_DIR,
                              "--ro-bind", str(RELAY_SOURCE), RELAY_PATH,
                              "--bind", str(folder / "door.sock"), SOCKET_PATH]
            argv = [*AS_AGENT, toolchain_python(), "-I", "-S", RELAY_PATH, SOCKET_PATH,
                    str(DOOR_PORT), "-", "--", *job.argv]
            try:
                run = run_in_bwrap(options, argv, env=job.env, limits=job.limits,
                                   stdin=job.stdin, should_stop=job.should_stop)
            except SandboxError as exc:
                raise InfrastructureError(f"agent sandbox: {exc}") from exc
            return run.proc
        finally:
            shutil.rmtree(folder, ignore_errors=True)
