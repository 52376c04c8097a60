"""Agent sandbox backends by name: `bwrap` (default), `docker`, and `none` (debugging only)."""

from __future__ import annotations

from evalq.graders.sandbox import load_backend
from evalq.workers.sandbox.base import DOOR_PORT, AgentJob, AgentSandbox

BACKENDS = {"bwrap": "evalq.workers.sandbox.bwrap:BwrapAgentSandbox",
            "docker": "evalq.workers.sandbox.docker:DockerAgentSandbox",
            "none": "evalq.workers.sandbox.none:NoSandbox"}


def get_agent_sandbox(name: str | AgentSandbox | None = None) -> AgentSandbox:
    """The backend named, else EVALQ_AGENT_SANDBOX, else bubblewrap; a backend already made
    (a task's environment as its root: evalq.fixtures.harbor.agent_root) is itself."""
    if isinstance(name, AgentSandbox):
        return name
    return load_backend(BACKENDS, name, "agent_sandbox")


__all__ = ["AgentJob", "AgentSandbox", "BACKENDS", "DOOR_PORT", "get_agent_sandbox"]
