"""Agent adapters by name (kept out of the package's __init__, so the scripted agent's own
process starts without loading every adapter)."""

from __future__ import annotations

from evalq.models import Condition
from evalq.workers.agents.base import AgentAdapter
from evalq.workers.agents.claude_code import ClaudeCode
from evalq.workers.agents.codex import Codex
from evalq.workers.agents.command_template import CommandTemplate
from evalq.workers.agents.mini_swe_agent import MiniSweAgent
from evalq.workers.agents.opencode import OpenCode
from evalq.workers.agents.scripted import ScriptedAgent

ADAPTERS: dict[str, type[AgentAdapter]] = {
    a.name: a for a in (ScriptedAgent, ClaudeCode, Codex, OpenCode, MiniSweAgent, CommandTemplate)}


def get_adapter(name: str) -> AgentAdapter:
    return ADAPTERS[name]()


def validate_condition(condition: Condition) -> tuple[str, str, str] | None:
    """(field, problem, fix) when a condition names an unknown agent or bad settings."""
    adapter = ADAPTERS.get(condition.agent)
    if adapter is None:
        return "agent", f"unknown agent '{condition.agent}'", \
            f"use one of {', '.join(sorted(ADAPTERS))} (see `evalq agents list`)"
    return adapter.validate_settings(condition.settings)

