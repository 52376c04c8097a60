"""opencode (npm `opencode-ai`), run as `opencode run --format json`.

Each JSON line is an event with a `part`: `step-finish` parts carry one request's tokens
(input without cache, output, cache read/write) and cost; `tool` parts a tool's input, state
and output; every event has a timestamp (ms). The adapter writes the provider into the
profile's opencode.json, shaped per endpoint (`api` setting): `@ai-sdk/openai-compatible` for
chat completions (default), `@ai-sdk/openai` for the Responses API. Title generation (an
extra model request absent from the JSON stream) is turned off (`agent.title.disable`), so
every request opencode sends is one it reports. opencode prints 0 for counts the provider did
not send: all-zero steps are "not reported", and cache counts of 0 are too (indistinguishable).
Settings: base_url, model (provider/model), api ("chat" | "responses"), extra_args, executable.
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
from evalq.workers.gateway import PROVIDERS

ZEROS = ("cache_read_tokens", "cache_write_tokens")
PROVIDER_PACKAGES = {"chat": "@ai-sdk/openai-compatible", "responses": "@ai-sdk/openai"}
#: opencode's built-in providers: the SDK each one needs, and whether its base URL ends in /v1
#: where the door's does not (Anthropic's SDK wants https://api.anthropic.com/v1)
BUILT_IN = {"openai": ("@ai-sdk/openai", False), "anthropic": ("@ai-sdk/anthropic", True)}
NO_USAGE = "opencode's step-finish tokens were all zero (the provider sent no usage)"


def _step_usage(part: dict[str, Any]) -> Optional[dict[str, Optional[int]]]:
    tokens = part.get("tokens")
    if not isinstance(tokens, dict):
        return None
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    return {"input_tokens": opt_int(tokens.get("input")),
            "output_tokens": opt_int(tokens.get("output")),
            "cache_read_tokens": opt_int(cache.get("read")),
            "cache_write_tokens": opt_int(cache.get("write"))}


class OpenCode(AgentAdapter):
    name = "opencode"
    executable = "opencode"
    description = "opencode (npm opencode-ai), `opencode run --format json`"
    credential_env = ("OPENAI_API_KEY",)
    default_base_url = "https://api.openai.com/v1"
    wire_api = "openai"  # a custom provider's SDK speaks OpenAI's API (settings.api)
    quiet_env = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1",
                 "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                 "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
                 # opencode npm-installs @opencode-ai/plugin into every config dir in the
                 # background, on each fresh profile: its npm gets a closed loopback port, so
                 # the attempt fails at once and no run reaches a registry
                 "npm_config_registry": "http://127.0.0.1:9/"}

    @classmethod
    def validate_settings(cls, settings: dict[str, Any]):
        problem = super().validate_settings(settings)
        if problem is None and settings.get("api", "chat") not in PROVIDER_PACKAGES:
            return "settings.api", f"unknown api {settings['api']!r}", \
                'write api = "chat" (chat completions) or api = "responses"'
        return problem

    @staticmethod
    def provider_name(ctx: AgentContext) -> Optional[str]:
        model = ctx.model or ""
        return model.split("/", 1)[0] if "/" in model else None

    def known_provider(self, ctx: AgentContext):
        """The gateway's upstream of a built-in provider the model names, else None."""
        name = self.provider_name(ctx)
        return PROVIDERS.get(name) if name in BUILT_IN else None

    def credential_names(self, ctx: AgentContext) -> tuple[str, ...]:
        known = self.known_provider(ctx)
        if ctx.settings.get("credential_env") is None and known is not None:
            return (known.credential,)
        return super().credential_names(ctx)

    def config_dir(self, ctx: AgentContext):
        return ctx.profile.home / ".config" / "opencode"

    def prepare(self, ctx: AgentContext) -> None:
        folder = self.config_dir(ctx)
        folder.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {"$schema": "https://opencode.ai/config.json",
                                  "autoupdate": False, "share": "disabled",
                                  "agent": {"title": {"disable": True}}}
        if ctx.model:
            config["model"] = ctx.model
        url = self.model_url(ctx)
        if url and ctx.model and "/" in ctx.model:
            provider, model = ctx.model.split("/", 1)
            names = self.credential_names(ctx)
            package, versioned = BUILT_IN.get(provider) or \
                (PROVIDER_PACKAGES[ctx.settings.get("api", "chat")], False)
            if versioned and not url.rstrip("/").endswith("/v1"):
                url = url.rstrip("/") + "/v1"
            options = {"baseURL": url}
            if names:
                options["apiKey"] = "{env:" + names[0] + "}"
            config["provider"] = {provider: {
                "npm": package, "name": provider,
                "options": options, "models": {model: {"name": model}}}}
        (folder / "opencode.json").write_text(dumps(config, indent=2))
        source = skill_source(ctx.settings.get("skill_dir") or ctx.condition.skill)
        if source is not None:
            install_skill(source, folder / "skill")

    def command(self, ctx: AgentContext) -> list[str]:
        argv = [self.executable_path(ctx), "run", "--format", "json"]
        if ctx.model:
            argv += ["-m", ctx.model]
        return argv + [str(a) for a in ctx.settings.get("extra_args", [])] + [ctx.prompt]

    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        events = jsonl_events(proc.stdout)
        parts = [e.get("part") or {} for e in events]
        finished = [p for p in parts if p.get("type") == "step-finish"]
        tools = [p for p in parts if p.get("type") == "tool"]
        metrics = RunMetrics()
        usages = [_step_usage(p) for p in finished]
        notes = settle(metrics, usages, NO_USAGE,
                       zero_means_missing=ZEROS)
        if metrics.input_tokens is not None:
            costs = [p.get("cost") for p in finished]
            if all(isinstance(c, (int, float)) for c in costs) and sum(costs) > 0:
                metrics.reported_cost_usd = float(sum(costs))
            metrics.request_prompt_tokens = [u["input_tokens"] + (u["cache_read_tokens"] or 0) +
                                             (u["cache_write_tokens"] or 0) for u in usages]
        if events:
            metrics.tool_calls = len(tools)
            metrics.tool_failures = sum(1 for p in tools
                                        if (p.get("state") or {}).get("status") == "error")
            metrics.turns = len(finished)
        steps = [Step("user", message=ctx.prompt)]
        for event, part in zip(events, parts):
            when = iso_time(event.get("timestamp"))
            if part.get("type") == "text" and part.get("text"):
                steps.append(Step("agent", message=str(part["text"]), timestamp=when))
            elif part.get("type") == "tool":
                state = part.get("state") or {}
                step = Step("agent", timestamp=when)
                step.call(part.get("callID", ""), part.get("tool", ""), state.get("input"))
                step.result(part.get("callID", ""), state.get("output") or state.get("error")
                            or "", state.get("status") == "error")
                steps.append(step)
            elif part.get("type") == "step-finish":
                steps.append(Step("system", message=f"request finished: {part.get('reason')}",
                                  timestamp=when, usage=as_reported(_step_usage(part), ZEROS)))
        session = next((e.get("sessionID") for e in events if e.get("sessionID")), None)
        trajectory = build(self.name, self.version(), ctx.model, steps, usage_scope="request",
                           session_id=session, notes=notes)
        metrics.skill_loaded = skill_loaded(trajectory, ctx.settings.get("skill_dir")
                                            or ctx.condition.skill)
        texts = [p.get("text") for p in parts if p.get("type") == "text" and p.get("text")]
        stop = (finished[-1].get("reason") if finished else None) or \
            ("completed" if proc.exit_code == 0 else f"exit {proc.exit_code}")
        return AgentResult(exit_code=proc.exit_code, timed_out=False, stop_reason=stop,
                           metrics=metrics, transcript=encode(trajectory),
                           final_report=texts[-1] if texts else None)
