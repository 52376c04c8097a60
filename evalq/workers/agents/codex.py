"""OpenAI Codex CLI (npm `@openai/codex`), run as `codex exec --json` over the Responses API.

The JSONL stream has `item.completed` events (agent messages, command executions, file
changes) and one `turn.completed` per turn with that turn's usage summed over its requests
(input_tokens includes cached input, OpenAI-style), so usage is per turn, not per request,
and the stream has no timestamps. Codex prints `cache_write_input_tokens: 0` when the provider
reports none, and all zeros when it reports no usage at all: both are "not reported".
Settings: base_url, model, wire_api, sandbox, extra_args, executable.
"""

from __future__ import annotations

from typing import Any, Optional

from evalq.report.json_text import dumps
from evalq.models import RunMetrics
from evalq.proc import ProcResult
from evalq.workers.agents.base import AgentAdapter, AgentContext, AgentResult
from evalq.workers.agents.streams import jsonl_events, opt_int
from evalq.workers.agents.trajectory import Step, build, encode
from evalq.workers.agents.usage import as_reported, settle

ZEROS = ("cache_write_tokens",)
TOOL_ITEMS = {"command_execution", "file_change", "mcp_tool_call", "web_search"}
NO_USAGE = "codex's turn.completed usage was absent or all zeros (the provider sent none)"


def toml_dumps(config: dict[str, Any], prefix: str = "") -> str:
    """A small TOML writer for codex's config: strings, numbers, booleans and nested tables."""
    lines, tables = [], []
    for key, value in config.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {dumps(value)}")
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in tables:
        name = f"{prefix}{key}"
        text += f"\n[{name}]\n" + toml_dumps(value, name + ".").lstrip("\n")
    return text


def _turn_usage(event: dict[str, Any]) -> Optional[dict[str, Optional[int]]]:
    usage = event.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, cached = opt_int(usage.get("input_tokens")), opt_int(usage.get("cached_input_tokens"))
    return {"input_tokens": None if prompt is None else prompt - (cached or 0),
            "output_tokens": opt_int(usage.get("output_tokens")), "cache_read_tokens": cached,
            "cache_write_tokens": opt_int(usage.get("cache_write_input_tokens"))}


def _item_step(item: dict[str, Any]) -> Optional[Step]:
    kind = item.get("type")
    if kind == "agent_message":
        return Step("agent", message=str(item.get("text") or ""))
    if kind == "reasoning":
        return Step("agent", message=str(item.get("text") or ""))
    if kind in TOOL_ITEMS:
        step = Step("agent")
        arguments = {k: v for k, v in item.items()
                     if k not in ("id", "type", "status", "aggregated_output", "exit_code")}
        step.call(item.get("id", ""), kind, arguments)
        failed = item.get("status") == "failed" or item.get("exit_code") not in (None, 0)
        step.result(item.get("id", ""), item.get("aggregated_output") or
                    {k: item.get(k) for k in ("status", "exit_code")}, failed)
        return step
    return None


class Codex(AgentAdapter):
    name = "codex"
    executable = "codex"
    description = "OpenAI Codex CLI (npm @openai/codex), `codex exec --json`, Responses API"
    credential_env = ("OPENAI_API_KEY",)
    default_base_url = "https://api.openai.com/v1"
    wire_api = "openai"
    quiet_env = {"CODEX_DISABLE_UPDATE_CHECK": "1", "NO_UPDATE_NOTIFIER": "1"}

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        return {"CODEX_HOME": str(ctx.profile.home / ".codex")}

    def prepare(self, ctx: AgentContext) -> None:
        home = ctx.profile.home / ".codex"
        home.mkdir(parents=True, exist_ok=True)
        # plugins and apps off: otherwise codex syncs its curated plugin list from GitHub and
        # chatgpt.com at start, traffic no evaluated run should make
        config: dict[str, Any] = {"check_for_update_on_startup": False,
                                  "features": {"plugins": False, "apps": False},
                                  "analytics": {"enabled": False},
                                  "feedback": {"enabled": False},
                                  "otel": {"exporter": "none"},
                                  "history": {"persistence": "none"}}
        if ctx.model:
            config["model"] = ctx.model
        url = self.model_url(ctx)
        if url:
            names = self.credential_names(ctx)
            config["model_provider"] = "evalq"
            config["model_providers"] = {"evalq": {
                "name": "evalq", "base_url": url, "env_key": names[0] if names else
                "OPENAI_API_KEY", "wire_api": ctx.settings.get("wire_api", "responses")}}
        (home / "config.toml").write_text(toml_dumps(config))
        if ctx.settings.get("instructions"):
            (home / "AGENTS.md").write_text(ctx.settings["instructions"])

    def command(self, ctx: AgentContext) -> list[str]:
        # codex's own sandbox needs its bwrap helper and cannot nest inside evalq's sandbox:
        # evalq isolates the run, so codex runs its commands unsandboxed inside it
        argv = [self.executable_path(ctx), "exec", "--json", "--skip-git-repo-check",
                "--sandbox", ctx.settings.get("sandbox", "danger-full-access"), "-C",
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
        usages = [_turn_usage(t) for t in turns]
        notes = settle(metrics, usages, NO_USAGE, zero_means_missing=ZEROS,
                       notes={"request_prompt_tokens": "codex reports usage per turn only",
                              "skill_loaded": "codex loads no skills"})
        tools = [i for i in items if i.get("type") in TOOL_ITEMS]
        if events:
            metrics.tool_calls = len(tools)
            metrics.tool_failures = sum(1 for i in tools if i.get("status") == "failed" or
                                        (i.get("exit_code") not in (None, 0)))
            metrics.turns = len(turns)
        steps = [Step("user", message=ctx.prompt)]
        for event in events:
            if event.get("type") == "item.completed":
                step = _item_step(event.get("item") or {})
                if step is not None:
                    steps.append(step)
            elif event.get("type") == "turn.completed":
                steps.append(Step("system", message="turn completed", usage=as_reported(_turn_usage(event), ZEROS)))
        session = next((e.get("thread_id") for e in events if e.get("type") == "thread.started"),
                       None)
        trajectory = build(self.name, self.version(), ctx.model, steps, usage_scope="turn",
                           session_id=session, notes=notes)
        messages = [i.get("text") for i in items if i.get("type") == "agent_message"]
        failed = next((e for e in events if e.get("type") in ("turn.failed", "error")), None)
        stop = ("error" if failed else "completed" if turns else
                ("no turn completed" if proc.exit_code == 0 else f"exit {proc.exit_code}"))
        return AgentResult(exit_code=proc.exit_code, timed_out=False, stop_reason=stop,
                           metrics=metrics, transcript=encode(trajectory),
                           final_report=messages[-1] if messages else None)
