"""Sandbox backends by name: `bwrap` (bubblewrap) and `docker`."""

from __future__ import annotations

from evalq.errors import UserError
from evalq.graders.sandbox.base import ExecResult, Sandbox, SandboxLimits

BACKENDS = {"bwrap": "evalq.graders.sandbox.bwrap:BwrapSandbox",
            "docker": "evalq.graders.sandbox.docker:DockerSandbox"}


def get_sandbox(name: str | None = None) -> Sandbox:
    """The backend named, else the sandbox setting (EVALQ_SANDBOX, evalq.toml; bubblewrap)."""
    return load_backend(BACKENDS, name, "sandbox")


def load_backend(backends: dict[str, str], name: str | None, setting: str):
    """An instance of the backend `name` (else the setting of that name) from a
    {name: module:class} table; shared by the grading and the agent sandboxes."""
    if name is None:
        from evalq.config import load_settings

        name = getattr(load_settings(), setting)
    if name not in backends:
        raise UserError(f"unknown {setting.replace('_', ' ')} '{name}'", field=setting,
                        fix=f"use one of {', '.join(sorted(backends))} (or set "
                            f"EVALQ_{setting.upper()})")
    module_name, class_name = backends[name].split(":")
    import importlib

    return getattr(importlib.import_module(module_name), class_name)()


__all__ = ["ExecResult", "Sandbox", "SandboxLimits", "get_sandbox", "load_backend", "BACKENDS"]
