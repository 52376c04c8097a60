"""OpenAI Codex CLI (npm `@openai/codex`), run as `codex exec --json`.

The JSONL event stream has `item.completed` events (agent messages, command executions, file
changes) and a `turn.completed` event per turn with its usage (input_tokens includes cached
input, OpenAI-style). Settings: base_url, model, wire_api, sandbox, extra_args, executable.
Parsing follows the documented `exec --json` events; not yet run end to end in tests here.
"""

from __future__ import annotations

import json
from typing import Any

from evalq.models import RunMetrics
from evalq.proc import ProcResult
from evalq.workers.agents.base import AgentAdapter, AgentContext, AgentResult
from evalq.workers.agents.streams import jsonl_events, opt_int, opt_sum

TOOL_ITEMS = {"command_execution", "file_change", "mcp_tool_call", "web_search"}


def toml_dumps(config: dict[str, Any], prefix: str = "") -> str:
    """A small TOML writer for codex's config: strings, numbers, booleans and nested tables."""
    lines, tables = [], []
    for key, value in config.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in tables:
        name = f"{prefix}{key}"
        text += f"\n[{name}]\n" + toml_dumps(value, name + ".").lstrip("\n")
    return text


class Codex(AgentAdapter):
    name = "codex"
    executable = "codex"
    description = "OpenAI Codex CLI (npm @openai/codex), `codex exec --json`"
    credential_env = ("OPENAI_API_KEY",)
    default_base_url = "https://api.openai.com/v1"
    quiet_env = {"CODEX_DISABLE_UPDATE_CHECK": "1", "NO_UPDATE_NOTIFIER": "1"}

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        return {"CODEX_HOME": str(ctx.profile.home / ".codex")}

    def prepare(self, ctx: AgentContext) -> None:
        home = ctx.profile.home / ".codex"
        home.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {"check_for_update_on_startup": False,
                                  "analytics": {"enabled": False},
                                  "history": {"persistence": "none"}}
        if ctx.model:
            config["model"] = ctx.model
        if ctx.model_url:
            config["model_provider"] = "evalq"
            config["model_providers"] = {"evalq": {
                "name": "evalq", "base_url": ctx.model_url,
                "env_key": self.credential_names(ctx)[0] if self.credential_names(ctx) else
                "OPENAI_API_KEY", "wire_api": ctx.settings.get("wire_api", "responses")}}
        (home / "config.toml").write_text(toml_dumps(config))
        if ctx.settings.get("instructions"):
            (home / "AGENTS.md").write_text(ctx.settings["instructions"])

    def command(self, ctx: AgentContext) -> list[str]:
        argv = [self.executable_path(ctx), "exec", "--json", "--skip-git-repo-check",
                "--sandbox", ctx.settings.get("sandbox", "workspace-write"), "-C",
                str(ctx.workspace)]
        if ctx.model:
            argv += ["-m", ctx.model]
        return argv + [str(a) for a in ctx.settings.get("extra_args", [])] + ["-"]

    def stdin(self, ctx: AgentContext) -> bytes | None:
        return ctx.prompt.encode()

    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        events = jsonl_events(proc.stdout)
        turns = [e for e in events if e.get("type") == "turn.completed"]
        items = [e.get("item") or {} for e in events if e.get("type") == "item.completed"]
        metrics = RunMetrics()
        usages = [t.get("usage") if isinstance(t.get("usage"), dict) else None for t in turns]
        if usages and None not in usages:
            prompt = [opt_int(u.get("input_tokens")) for u in usages]
            cached = [opt_int(u.get("cached_input_tokens")) for u in usages]
            total_prompt, total_cached = opt_sum(prompt), opt_sum(cached)
            metrics.cache_read_tokens = total_cached
            metrics.input_tokens = (None if total_prompt is None
                                    else total_prompt - (total_cached or 0))
            metrics.output_tokens = opt_sum(opt_int(u.get("output_tokens")) for u in usages)
        tools = [i for i in items if i.get("type") in TOOL_ITEMS]
        if events:
            metrics.tool_calls = len(tools)
            metrics.tool_failures = sum(1 for i in tools if i.get("status") == "failed" or
                                        (i.get("exit_code") not in (None, 0)))
            metrics.turns = len(turns)
        messages = [i.get("text") for i in items if i.get("type") == "agent_message"]
        failed = next((e for e in events if e.get("type") in ("turn.failed", "error")), None)
        stop = ("error" if failed else "completed" if turns else
                ("no turn completed" if proc.exit_code == 0 else f"exit {proc.exit_code}"))
        return AgentResult(exit_code=proc.exit_code, timed_out=False, stop_reason=stop,
                           metrics=metrics, transcript=proc.stdout,
                           final_report=messages[-1] if messages else None)
