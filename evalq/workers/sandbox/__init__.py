"""Agent sandbox backends by name: `bwrap` (default), `docker`, and `none` (debugging only)."""

from __future__ import annotations

import importlib
import os

from evalq.errors import UserError
from evalq.workers.sandbox.base import DOOR_PORT, AgentJob, AgentSandbox

BACKENDS = {"bwrap": "evalq.workers.sandbox.bwrap:BwrapAgentSandbox",
            "docker": "evalq.workers.sandbox.docker:DockerAgentSandbox",
            "none": "evalq.workers.sandbox.none:NoSandbox"}


def get_agent_sandbox(name: str | None = None) -> AgentSandbox:
    """The backend named, else EVALQ_AGENT_SANDBOX, else bubblewrap."""
    name = name or os.environ.get("EVALQ_AGENT_SANDBOX") or "bwrap"
    if name not in BACKENDS:
        raise UserError(f"unknown agent sandbox '{name}'", field="EVALQ_AGENT_SANDBOX",
                        fix=f"use one of {', '.join(sorted(BACKENDS))}")
    module_name, class_name = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)()


__all__ = ["AgentJob", "AgentSandbox", "BACKENDS", "DOOR_PORT", "get_agent_sandbox"]
