"""Claude Code (`@anthropic-ai/claude-code` from npm), run headless with a stream-json trace.

`claude -p --output-format stream-json --verbose` prints one JSON event per line: the
assistant's messages (with the API usage of each request), tool results, and a final `result`
event with the run's usage, cost, turns and final text. Settings: base_url, model,
allowed_tools, permission_mode, max_turns, instructions, skill_dir, extra_args, executable.
"""

from __future__ import annotations

from typing import Any, Optional

from evalq.report.json_text import dumps
from evalq.models import RunMetrics
from evalq.proc import ProcResult
from evalq.workers.agents.base import AgentAdapter, AgentContext, AgentResult
from evalq.workers.agents.skill_install import install_skill, skill_source
from evalq.workers.agents.streams import jsonl_events, opt_int
from evalq.workers.agents.trajectory import Step, build, encode, iso_time, skill_loaded
from evalq.workers.agents.usage import as_reported, settle

NO_USAGE = ("no assistant message carried usage (the result event's zeros are a summary, "
            "not a report)")
OUTPUT_PER_REQUEST = ("the stream shows each message's usage at its start; only the result "
                      "event has the output total")
DEFAULT_TOOLS = "Bash,Edit,Write,Read,Glob,Grep"
#: result subtypes that mean the agent hit one of its limits (→ timed_out)
LIMIT_SUBTYPES = {"error_max_turns": "max turns reached",
                  "error_max_budget_usd": "agent cost budget reached"}


def _request_usage(usage: dict[str, Any]) -> dict[str, Optional[int]]:
    return {"input_tokens": opt_int(usage.get("input_tokens")),
            "output_tokens": opt_int(usage.get("output_tokens")),
            "cache_read_tokens": opt_int(usage.get("cache_read_input_tokens")),
            "cache_write_tokens": opt_int(usage.get("cache_creation_input_tokens"))}


class ClaudeCode(AgentAdapter):
    name = "claude-code"
    executable = "claude"
    description = "Anthropic's Claude Code CLI (npm @anthropic-ai/claude-code), headless"
    credential_env = ("ANTHROPIC_API_KEY",)
    default_base_url = "https://api.anthropic.com"
    wire_auth = "x-api-key"
    wire_api = "anthropic"
    quiet_env = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
                 "DISABLE_ERROR_REPORTING": "1", "DISABLE_BUG_COMMAND": "1",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                 "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1", "DISABLE_COST_WARNINGS": "1"}

    @classmethod
    def validate_settings(cls, settings: dict[str, Any]):
        problem = super().validate_settings(settings)
        if problem:
            return problem
        for key in ("base_url", "model", "allowed_tools", "permission_mode", "instructions"):
            if key in settings and not isinstance(settings[key], str):
                return f"settings.{key}", f"{key} must be a string", f"write {key} = \"…\""
        if "extra_args" in settings and not isinstance(settings["extra_args"], list):
            return "settings.extra_args", "extra_args must be a list", "write extra_args = [\"…\"]"
        return None

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        env = {"CLAUDE_CONFIG_DIR": str(ctx.profile.home / ".claude")}
        if self.model_url(ctx):
            env["ANTHROPIC_BASE_URL"] = self.model_url(ctx)
        return env

    def prepare(self, ctx: AgentContext) -> None:
        config = ctx.profile.home / ".claude"
        config.mkdir(parents=True, exist_ok=True)
        (config / "settings.json").write_text(dumps(
            {"env": dict(self.quiet_env), "includeCoAuthoredBy": False}, indent=2))
        if ctx.settings.get("instructions"):
            (config / "CLAUDE.md").write_text(ctx.settings["instructions"])
        source = skill_source(ctx.settings.get("skill_dir") or ctx.condition.skill)
        if source is not None:
            install_skill(source, config / "skills")

    def command(self, ctx: AgentContext) -> list[str]:
        argv = [self.executable_path(ctx), "-p", "--output-format", "stream-json", "--verbose",
                "--permission-mode", ctx.settings.get("permission_mode", "acceptEdits"),
                "--allowedTools", ctx.settings.get("allowed_tools", DEFAULT_TOOLS)]
        if ctx.model:
            argv += ["--model", ctx.model]
        turns = ctx.settings.get("max_turns") or ctx.limits.max_steps
        if turns:
            argv += ["--max-turns", str(int(turns))]
        if ctx.limits.max_cost_usd:
            argv += ["--max-budget-usd", f"{ctx.limits.max_cost_usd:g}"]
        return argv + [str(a) for a in ctx.settings.get("extra_args", [])]

    def stdin(self, ctx: AgentContext) -> bytes | None:
        return ctx.prompt.encode()

    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        events = jsonl_events(proc.stdout)
        requests: dict[str, dict[str, Optional[int]]] = {}
        calls: dict[str, tuple[str, Any]] = {}
        failures = 0
        for event in events:
            message = event.get("message") or {}
            if event.get("type") == "assistant":
                if message.get("id") and isinstance(message.get("usage"), dict):
                    requests[message["id"]] = _request_usage(message["usage"])
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        calls[block.get("id", str(len(calls)))] = (block.get("name", ""),
                                                                   block.get("input"))
            elif event.get("type") == "user":
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_result" and \
                            block.get("is_error"):
                        failures += 1
        final = next((e for e in reversed(events) if e.get("type") == "result"), None)
        metrics = RunMetrics()
        by_model = None
        # per-message usage is the report; the result event's totals say 0 when it is absent
        notes = settle(metrics, requests.values() if final is not None else [], NO_USAGE,
                       notes={"output_tokens per request": OUTPUT_PER_REQUEST})
        if final is not None:
            usage = final.get("usage") if isinstance(final.get("usage"), dict) else None
            if usage is not None and metrics.input_tokens is not None:
                for key, value in _request_usage(usage).items():
                    if getattr(metrics, key) is not None and value is not None:
                        setattr(metrics, key, value)
            metrics.turns = opt_int(final.get("num_turns"))
            if isinstance(final.get("total_cost_usd"), (int, float)) and \
                    metrics.input_tokens is not None:
                metrics.reported_cost_usd = float(final["total_cost_usd"])
            model_usage = final.get("modelUsage")
            if isinstance(model_usage, dict) and model_usage and metrics.input_tokens is not None:
                by_model = {name: {"input_tokens": opt_int(u.get("inputTokens")),
                                   "output_tokens": opt_int(u.get("outputTokens")),
                                   "cache_read_tokens": opt_int(u.get("cacheReadInputTokens")),
                                   "cache_write_tokens": opt_int(
                                       u.get("cacheCreationInputTokens"))}
                            for name, u in model_usage.items() if isinstance(u, dict)}
        if metrics.input_tokens is not None:
            metrics.request_prompt_tokens = [
                r["input_tokens"] + (r["cache_read_tokens"] or 0) + (r["cache_write_tokens"] or 0)
                for r in requests.values()]
        if final is not None or calls:
            metrics.tool_calls = len(calls)
            metrics.tool_failures = failures
        trajectory = build(self.name, self.version(), ctx.model, _steps(ctx.prompt, events, requests),
                           usage_scope="request",
                           session_id=next((e.get("session_id") for e in events
                                            if e.get("session_id")), None), notes=notes)
        if final is not None:
            metrics.skill_loaded = skill_loaded(trajectory, ctx.settings.get("skill_dir")
                                                or ctx.condition.skill)
        timed_out, stop = False, None
        if final is None:
            stop = "no result event" if proc.exit_code == 0 else f"exit {proc.exit_code}"
        else:
            subtype = final.get("subtype")
            if subtype in LIMIT_SUBTYPES:
                timed_out, stop = True, LIMIT_SUBTYPES[subtype]
            else:
                stop = final.get("terminal_reason") or final.get("stop_reason") or subtype
        return AgentResult(exit_code=proc.exit_code, timed_out=timed_out, stop_reason=stop,
                           metrics=metrics, transcript=encode(trajectory),
                           final_report=final.get("result") if final else None,
                           usage_by_model=by_model)


def _steps(prompt: str, events: list[dict[str, Any]],
           requests: dict[str, dict[str, Optional[int]]]) -> list[Step]:
    """Assistant blocks and tool results as trajectory steps, a request's usage on its first
    block. The stream repeats each message with the usage of its start, output not yet
    counted: per-request output is unreported (the run's total comes from the result event)."""
    steps, seen = [Step("user", message=prompt)], set()
    for event in events:
        message = event.get("message") or {}
        when = iso_time(event.get("timestamp"))
        blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
        if event.get("type") == "assistant":
            step = Step("agent", timestamp=when)
            for block in blocks:
                if block.get("type") == "text":
                    step.message += str(block.get("text") or "")
                elif block.get("type") == "tool_use":
                    step.call(block.get("id", ""), block.get("name", ""), block.get("input"))
            if message.get("id") in requests and message.get("id") not in seen:
                seen.add(message.get("id"))
                usage = as_reported(requests[message["id"]])
                step.usage = usage and {**usage, "output_tokens": None}
            steps.append(step)
        elif event.get("type") == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            if results:
                step = Step("system", timestamp=when)
                for block in results:
                    step.result(block.get("tool_use_id", ""), block.get("content"),
                                bool(block.get("is_error")))
                steps.append(step)
    return steps
