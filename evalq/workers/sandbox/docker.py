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
"""

from __future__ import annotations

from typing import ClassVar

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

#: the agent_image setting's default (built by scripts/build-grader-images.sh agent)
DEFAULT_IMAGE = Settings.model_fields["agent_image"].default
LABEL_PHASE = "evalq.phase"


class DockerAgentSandbox(AgentSandbox):
    name: ClassVar[str] = "docker"

    def __init__(self, image: str | None = None):
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

    def run(self, job: AgentJob) -> ProcResult:
        give_to_agent(job)
        return with_door(job, lambda: Handoff(job.door, DOOR_PORT, inherited=False),
                         lambda door: self._run(job, door))

    def _run(self, job: AgentJob, handoff: Handoff | None) -> ProcResult:
        try:
            with stdin_file(job) as stdin:
                command = job.argv
                if handoff is not None or job.stdin:
                    command = prelude_argv("/usr/bin/python3", job,
                                           DOOR_PATH if handoff is not None else None,
                                           STDIN_PATH if job.stdin else None)
                create = dict(locked_down(job.limits), command=command,
                              environment=dict(job.env), working_dir=str(job.workspace),
                              user=f"{SANDBOX_UID}:{SANDBOX_UID}",
                              volumes=self._volumes(job, stdin, handoff), init=True,
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
