"""Sandbox backends by name: `bwrap` (bubblewrap) and `docker`."""

from __future__ import annotations

import os

from evalq.errors import UserError
from evalq.graders.sandbox.base import ExecResult, Sandbox, SandboxLimits

BACKENDS = {"bwrap": "evalq.graders.sandbox.bwrap:BwrapSandbox",
            "docker": "evalq.graders.sandbox.docker:DockerSandbox"}


def get_sandbox(name: str | None = None) -> Sandbox:
    """The backend named, else EVALQ_SANDBOX, else bubblewrap."""
    name = name or os.environ.get("EVALQ_SANDBOX") or "bwrap"
    if name not in BACKENDS:
        raise UserError(f"unknown sandbox '{name}'", field="sandbox",
                        fix=f"use one of {', '.join(sorted(BACKENDS))}")
    module_name, class_name = BACKENDS[name].split(":")
    import importlib

    cls = getattr(importlib.import_module(module_name), class_name)
    return cls()


__all__ = ["ExecResult", "Sandbox", "SandboxLimits", "get_sandbox", "BACKENDS"]
