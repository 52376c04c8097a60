"""Docker agent sandbox: one locked-down container per run from the local agent image.

The image (evalq-agent:local, scripts/build-grader-images.sh) gives the toolchain; the agent's
own install folders are bind-mounted read-only at their host paths, as bubblewrap does, so the
one pinned install on the worker runs in both backends and no image is rebuilt per agent
version. No network but the door's socket, read-only root, every capability dropped,
no-new-privileges, Docker's default seccomp profile, uid 65534, memory/pids/CPU limits, and
the grading containers' labels and deadline, so the same sweep finds leftovers. pid 1 is
Docker's init (started with the agent's environment only): when the agent exits it exits with
its status, and the container's every other process ends with it. With a door or a stdin the
prelude comes first: it hands the worker its listener over a unix socket of a fresh folder of
the worker's, bind-mounted (it takes one connection), opens the stdin file, and execs the agent.
With a task's environment (task_root.py) the container is made from that task's image instead,
the workspace mounted a second time at its WORKDIR, where the agent starts.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import ExitStack, contextmanager
from typing import ClassVar, Iterator

from evalq.errors import InfrastructureError, SandboxError
from evalq.graders.sandbox.docker import (SANDBOX_UID, DockerSandbox, container_labels,
                                          locked_down)
from evalq.proc import ProcResult
from evalq.config import Settings, load_settings
from evalq.workers.sandbox.base import AGENT_DIR, CHECK_DIR
from evalq.workers.sandbox.base import (DOOR_PATH, DOOR_PORT, ETC_FILES, PRELUDE_PATH,
                                        PRELUDE_SOURCE, STDIN_PATH, AgentJob, AgentSandbox,
                                        etc_dir, give_to_agent,
                                        prelude_argv, stdin_file)
from evalq.workers.sandbox.handoff import Handoff, with_door
from evalq.workers.sandbox.task_root import TaskRoot, agent_env, closed_folders, in_tree

#: the agent_image setting's default (built by scripts/build-grader-images.sh agent)
DEFAULT_IMAGE = Settings.model_fields["agent_image"].default
LABEL_PHASE = "evalq.phase"
#: the prelude's interpreter: the image's own
PRELUDE_PYTHON = "/usr/bin/python3"


class DockerAgentSandbox(AgentSandbox):
    name: ClassVar[str] = "docker"

    def __init__(self, image: str | None = None, root: TaskRoot | None = None):
        #: the task's environment (its image is the container's); None: the agent image
        self.root = root
        if root is not None:
            image = root.image
        if image is None:
            image = load_settings().agent_image
        self.image = image
        self.engine = DockerSandbox(default_image=self.image)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return DockerSandbox.available()

    def _volumes(self, job: AgentJob, stdin, handoff: Handoff | None) -> dict:
        volumes = {str(path): {"bind": str(path), "mode": "ro"} for path in job.readonly}
        if job.agent_source is not None:
            volumes[str(job.agent_source)] = {"bind": AGENT_DIR, "mode": "ro"}
        if job.check_folder is not None:
            volumes[str(job.check_folder)] = {"bind": CHECK_DIR, "mode": "ro"}
        volumes[str(job.profile_root)] = {"bind": str(job.profile_root), "mode": "rw"}
        if job.profile_root not in job.workspace.parents:
            volumes[str(job.workspace)] = {"bind": str(job.workspace), "mode": "rw"}
        volumes[str(PRELUDE_SOURCE)] = {"bind": PRELUDE_PATH, "mode": "ro"}
        if stdin is not None:
            volumes[str(stdin)] = {"bind": STDIN_PATH, "mode": "ro"}
        for name in ETC_FILES:
            volumes[str(etc_dir() / name)] = {"bind": f"/etc/{name}", "mode": "ro"}
        if handoff is not None:
            volumes[handoff.path] = {"bind": DOOR_PATH, "mode": "rw"}
        return volumes

    def _mounts(self, job: AgentJob) -> list:
        """The workspace a second time, where the task's environment keeps it (its WORKDIR)."""
        from docker.types import Mount

        if self.root is None:
            return []
        return [Mount(target=self.root.workdir, source=str(job.workspace), type="bind",
                      read_only=False)]

    @contextmanager
    def _passable(self, volumes: dict) -> Iterator[dict]:
        """Where the task image has a folder others may not pass on the way to a mount (its
        /root is 0700), an empty one of root's that they may (0755), for the run: the agent's
        uid must reach its install. A tmpfs would not do: Docker gives it the folder's mode."""
        if self.root is None:
            yield {}
            return
        targets = [spec["bind"] for spec in volumes.values()] + [self.root.workdir]
        made: dict = {}
        try:
            for folder in closed_folders(self.root.tree, targets):
                stand_in = tempfile.mkdtemp(prefix="evalq-agent-passable-")
                os.chmod(stand_in, 0o755)
                made[stand_in] = {"bind": folder, "mode": "rw"}  # its mount points go in it
            yield made
        finally:
            for stand_in in made:
                shutil.rmtree(stand_in, ignore_errors=True)

    def run(self, job: AgentJob) -> ProcResult:
        tree = self.root.tree if self.root is not None else None
        if tree is not None and (job.door is not None or job.stdin) and \
                not in_tree(tree, PRELUDE_PYTHON):
            raise InfrastructureError(
                f"the task environment {self.image} has no {PRELUDE_PYTHON}, which opens the "
                "agent's door and stdin in the container: install python3 there")
        give_to_agent(job)
        return with_door(job, lambda: Handoff(job.door, DOOR_PORT, inherited=False),
                         lambda door: self._run(job, door))

    def _run(self, job: AgentJob, handoff: Handoff | None) -> ProcResult:
        try:
            with stdin_file(job) as stdin, ExitStack() as stack:
                command = job.argv
                if handoff is not None or job.stdin:
                    command = prelude_argv(PRELUDE_PYTHON, job,
                                           DOOR_PATH if handoff is not None else None,
                                           STDIN_PATH if job.stdin else None)
                volumes = self._volumes(job, stdin, handoff)
                volumes.update(stack.enter_context(self._passable(volumes)))
                env = job.env if self.root is None else agent_env(self.root, job.env)
                start = self.root.workdir if self.root is not None else str(job.workspace)
                create = dict(locked_down(job.limits), command=command,
                              environment=dict(env), working_dir=start,
                              user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                              volumes=volumes, mounts=self._mounts(job), init=True,
                              hostname="evalq-agent",
                              labels=container_labels(job.label, job.limits,
                                                      **{LABEL_PHASE: "agent"}))
                run = self.engine.run_container(self.image, create, job.limits,
                                                should_stop=job.should_stop)
        except SandboxError as exc:
            raise InfrastructureError(f"agent sandbox (docker): {exc}") from exc
        result = run.result
        return ProcResult(exit_code=result.exit_code, stdout=run.stdout, stderr=run.stderr,
                          duration_seconds=result.duration_seconds, timed_out=result.timed_out,
                          output_exceeded=run.output_exceeded, signal=result.signal)

    def sweep(self, max_age_seconds: float = 0) -> int:
        """Labelled containers past their deadline (grading's and agents' alike)."""
        return self.engine.sweep(max_age_seconds)
