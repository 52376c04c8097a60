"""mini-swe-agent (PyPI `mini-swe-agent`): one bash tool, a JSON trajectory file per run.

Runs `mini --yolo --exit-immediately` with the trajectory written into the run's logs dir; the
trajectory keeps each model response with its usage, which is where tokens are read from.
litellm fills zeros when the provider sends no usage: an all-zero response is "not reported".
`mini --version` exits 2, so the version is read from the package metadata in mini's own venv.
mini-swe-agent loads no skills (skill activation is null). Settings: model (litellm name, e.g. openai/gpt-5), base_url, config (a mini config file or
builtin name, default mini.yaml), extra_config (list of key=value), executable.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any, Optional

from evalq.models import RunMetrics
from evalq.proc import ProcResult
from evalq.safe_read import read_left
from evalq.workers.agents.base import AgentAdapter, AgentContext, AgentResult
from evalq.workers.agents.context_estimate import per_request
from evalq.workers.agents.locate import find_executable
from evalq.workers.agents.streams import opt_int
from evalq.workers.agents.trajectory import Step, build, encode, iso_time
from evalq.workers.agents.usage import as_reported, settle
from evalq.workers.gateway import PROVIDERS

PROVIDER_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
                 "openrouter": "OPENROUTER_API_KEY", "gemini": "GEMINI_API_KEY"}
PACKAGE = "mini-swe-agent"
NO_USAGE = "litellm's usage was absent or all zeros (the provider sent none)"
#: the largest trajectory file evalq reads (a larger one is treated as missing)
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
LIMIT_STATUSES = {"LimitsExceeded": "step or cost limit reached",
                  "TimeExceeded": "agent time limit reached"}


def _usage(message: dict[str, Any]) -> Optional[dict[str, Optional[int]]]:
    """evalq-convention usage of one assistant message (OpenAI-style prompt includes cache)."""
    response = (message.get("extra") or {}).get("response") or {}
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, completion = opt_int(usage.get("prompt_tokens")), opt_int(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = opt_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    return {"prompt": prompt,
            "input_tokens": None if prompt is None else prompt - (cached or 0),
            "output_tokens": completion, "cache_read_tokens": cached}


class MiniSweAgent(AgentAdapter):
    name = "mini-swe-agent"
    executable = "mini"
    description = "mini-swe-agent (PyPI mini-swe-agent), bash-only agent via litellm"
    #: litellm speaks Anthropic's API to anthropic/ models (known_provider), OpenAI chat to
    #: the rest
    wire_api = "openai"
    quiet_env = {"MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1",
                 "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
                 "MSWEA_COST_TRACKING": "ignore_errors", "HF_HUB_OFFLINE": "1",
                 "HF_HUB_DISABLE_TELEMETRY": "1", "PIP_PROGRESS_BAR": "off",
                 "PYTHONUNBUFFERED": "1"}

    @classmethod
    def version(cls, sandbox: Optional[str] = None) -> Optional[str]:
        """The mini-swe-agent package version in the venv beside the `mini` executable (read
        from its metadata, not run, so no sandbox is needed: `mini --version` exits 2)."""
        found = find_executable(cls.executable)
        if found is None:
            return None
        venv = Path(found).resolve().parent.parent
        for site in sorted(venv.glob("lib/python*/site-packages")):
            for dist in metadata.distributions(path=[str(site)]):
                if (dist.metadata["Name"] or "").lower() == PACKAGE:
                    return dist.version
        return None

    def known_provider(self, ctx: AgentContext):
        """The gateway's upstream of the provider the litellm model id names, else None."""
        return PROVIDERS.get((ctx.model or "").split("/")[0]) if "/" in (ctx.model or "") \
            else None

    def credential_names(self, ctx: AgentContext) -> tuple[str, ...]:
        if ctx.settings.get("credential_env") is not None:
            return tuple(ctx.settings["credential_env"])
        provider = (ctx.model or "").split("/")[0]
        return (PROVIDER_KEYS[provider],) if provider in PROVIDER_KEYS else ()

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        return {"MSWEA_GLOBAL_CONFIG_DIR": str(ctx.profile.home / ".config" / "mini-swe-agent")}

    def readonly_paths(self, ctx: AgentContext):
        """Its virtualenv, and the mini config file the condition names, if it is a file."""
        config = Path(str(ctx.settings.get("config", "mini.yaml")))
        extra = [config.resolve()] if config.is_absolute() and config.is_file() else []
        return [*super().readonly_paths(ctx), *extra]

    def trajectory_path(self, ctx: AgentContext):
        return ctx.profile.logs / "mini.traj.json"

    def command(self, ctx: AgentContext) -> list[str]:
        argv = [self.executable_path(ctx), "--yolo", "--exit-immediately",
                "-t", ctx.prompt, "-o", str(self.trajectory_path(ctx)),
                "-c", str(ctx.settings.get("config", "mini.yaml")),
                "-c", f"environment.cwd={ctx.workspace}",
                "-l", f"{ctx.limits.max_cost_usd:g}" if ctx.limits.max_cost_usd else "0"]
        if ctx.model:
            argv += ["-m", ctx.model]
        if self.model_url(ctx):
            argv += ["-c", f"model.model_kwargs.api_base={self.model_url(ctx)}"]
        if ctx.limits.max_steps:
            argv += ["-c", f"agent.step_limit={ctx.limits.max_steps}"]
        for item in ctx.settings.get("extra_config", []):
            argv += ["-c", str(item)]
        return argv

    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        # the agent wrote it: read without following links, FIFOs or huge files
        raw = read_left(ctx.profile.root, self.trajectory_path(ctx), MAX_TRAJECTORY_BYTES)
        try:
            trajectory = json.loads(raw.decode("utf-8")) if raw is not None else None
        except ValueError:
            trajectory = None
        metrics = RunMetrics()
        if not isinstance(trajectory, dict):
            stop = "no trajectory" if not proc.timed_out else None
            return AgentResult(exit_code=proc.exit_code, timed_out=False, stop_reason=stop,
                               metrics=metrics)
        messages = [m for m in trajectory.get("messages") or [] if isinstance(m, dict)]
        replies = [m for m in messages if m.get("role") == "assistant"]
        usages = [_usage(m) for m in replies]
        notes = settle(metrics, usages, NO_USAGE,
                       notes={"skill_loaded": "mini-swe-agent loads no skills"})
        if metrics.input_tokens is not None:
            prompts = [u["prompt"] for u in usages]
            metrics.request_prompt_tokens = prompts if None not in prompts else None
        if replies:  # the trajectory holds the messages sent: an estimate, kept apart
            metrics.estimated_context_tokens = per_request(messages)
        actions = [a for m in replies for a in (m.get("extra") or {}).get("actions") or []]
        outputs = [m for m in messages if m.get("role") == "tool"]
        metrics.tool_calls = len(actions)
        metrics.tool_failures = sum(1 for m in outputs if _failed(m))
        metrics.turns = len(replies)
        cost = ((trajectory.get("info") or {}).get("model_stats") or {}).get("instance_cost")
        # with cost tracking off for unknown models mini reports 0.0: that is "unknown", not free
        if isinstance(cost, (int, float)) and cost > 0:
            metrics.reported_cost_usd = float(cost)
        exit_info = next((m.get("extra") or {} for m in reversed(messages)
                          if m.get("role") == "exit"), {})
        status = exit_info.get("exit_status") or (trajectory.get("info") or {}).get("exit_status")
        timed_out = status in LIMIT_STATUSES
        stop = LIMIT_STATUSES.get(status, (status or "").lower() or None)
        report = exit_info.get("submission") or next(
            (m.get("content") for m in reversed(replies) if m.get("content")), None)
        trajectory = build(self.name, self.version(), ctx.model, _steps(messages, usages),
                           usage_scope="request", notes=notes)
        return AgentResult(exit_code=proc.exit_code, timed_out=timed_out, stop_reason=stop,
                           metrics=metrics, transcript=encode(trajectory),
                           final_report=report if isinstance(report, str) else None)


def _failed(output: dict[str, Any]) -> bool:
    """A command that ran and failed (mini's submit command is "not executed": no failure)."""
    extra = output.get("extra") or {}
    return extra.get("returncode") not in (0, None) and \
        "not executed" not in str(extra.get("exception_info") or "")


def _steps(messages: list[dict[str, Any]], usages: list) -> list[Step]:
    """mini's messages as trajectory steps: its bash actions are the tool calls."""
    steps, replies = [], iter(usages)
    for message in messages:
        extra = message.get("extra") or {}
        role, when = message.get("role"), iso_time(extra.get("timestamp"))
        text = message.get("content") if isinstance(message.get("content"), str) else ""
        if role == "assistant":
            step = Step("agent", message=text, timestamp=when,
                        usage=as_reported(next(replies, None)))
            for index, action in enumerate(extra.get("actions") or []):
                step.call(action.get("tool_call_id") or f"action-{index}", "bash",
                          {"command": action.get("command")})
            steps.append(step)
        elif role == "tool":
            step = Step("system", timestamp=when)
            step.result(message.get("tool_call_id", ""), extra.get("raw_output", text),
                        _failed(message))
            steps.append(step)
        elif role in ("system", "user"):
            steps.append(Step(role, message=text, timestamp=when))
        elif role == "exit":
            steps.append(Step("system", message=f"exit: {extra.get('exit_status')}",
                              timestamp=when))
    return steps
