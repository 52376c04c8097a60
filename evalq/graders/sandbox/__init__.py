"""Sandbox backends by name: `bwrap` (bubblewrap) and `docker`."""

from __future__ import annotations

import os

from evalq.errors import UserError
from evalq.graders.sandbox.base import ExecResult, Sandbox, SandboxLimits

BACKENDS = {"bwrap": "evalq.graders.sandbox.bwrap:BwrapSandbox",
            "docker": "evalq.graders.sandbox.docker:DockerSandbox"}


def get_sandbox(name: str | None = None) -> Sandbox:
    """The backend named, else EVALQ_SANDBOX, else bubblewrap."""
    return load_backend(BACKENDS, name, "EVALQ_SANDBOX", "sandbox")


def load_backend(backends: dict[str, str], name: str | None, env: str, field: str):
    """An instance of the backend `name` (else $env, else bwrap) from a {name: module:class}
    table; shared by the grading and the agent sandboxes."""
    name = name or os.environ.get(env) or "bwrap"
    if name not in backends:
        raise UserError(f"unknown {field.replace('_', ' ')} '{name}'", field=field,
                        fix=f"use one of {', '.join(sorted(backends))} (or set {env})")
    module_name, class_name = backends[name].split(":")
    import importlib

    return getattr(importlib.import_module(module_name), class_name)()


__all__ = ["ExecResult", "Sandbox", "SandboxLimits", "get_sandbox", "load_backend", "BACKENDS"]
