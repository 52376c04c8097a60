"""Sandbox backends by name: `bwrap` (bubblewrap) and `docker`."""

from __future__ import annotations

from evalq.errors import UserError
from evalq.graders.sandbox.base import ExecResult, Sandbox, SandboxLimits

BACKENDS = {"bwrap": "evalq.graders.sandbox.bwrap:BwrapSandbox",
            "docker": "evalq.graders.sandbox.docker:DockerSandbox"}


def get_sandbox(name: str | None = None) -> Sandbox:
    """The backend named, else the sandbox setting (EVALQ_SANDBOX, evalq.toml; bubblewrap)."""
    if name is None:
        from evalq.config import load_settings

        name = load_settings().sandbox
    if name not in BACKENDS:
        raise UserError(f"unknown sandbox '{name}'", field="sandbox",
                        fix=f"use one of {', '.join(sorted(BACKENDS))}")
    module_name, class_name = BACKENDS[name].split(":")
    import importlib

    cls = getattr(importlib.import_module(module_name), class_name)
    return cls()


__all__ = ["ExecResult", "Sandbox", "SandboxLimits", "get_sandbox", "BACKENDS"]
