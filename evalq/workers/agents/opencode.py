"""opencode (npm `opencode-ai`), run as `opencode run --format json`.

Each JSON line is an event with a `part`: `step_finish` parts carry tokens (input, output,
cache read/write) and cost; `tool_use` parts carry a tool's name and state. The provider and
model go into the profile's opencode.json. Settings: base_url, model (provider/model),
extra_args, executable. Parsing follows opencode's JSON output; not yet run end to end here.
"""

from __future__ import annotations

import json
from typing import Any

from evalq.models import RunMetrics
from evalq.proc import ProcResult
from evalq.workers.agents.base import AgentAdapter, AgentContext, AgentResult
from evalq.workers.agents.streams import jsonl_events, opt_int, opt_sum


class OpenCode(AgentAdapter):
    name = "opencode"
    executable = "opencode"
    description = "opencode (npm opencode-ai), `opencode run --format json`"
    credential_env = ("OPENAI_API_KEY",)
    default_base_url = "https://api.openai.com/v1"
    quiet_env = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1",
                 "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}

    def prepare(self, ctx: AgentContext) -> None:
        folder = ctx.profile.home / ".config" / "opencode"
        folder.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {"$schema": "https://opencode.ai/config.json",
                                  "autoupdate": False, "share": "disabled"}
        if ctx.model:
            config["model"] = ctx.model
        if ctx.model_url and ctx.model and "/" in ctx.model:
            provider, model = ctx.model.split("/", 1)
            config["provider"] = {provider: {"options": {"baseURL": ctx.model_url},
                                             "models": {model: {}}}}
        (folder / "opencode.json").write_text(json.dumps(config, indent=2))

    def command(self, ctx: AgentContext) -> list[str]:
        argv = [self.executable_path(ctx), "run", "--format", "json"]
        if ctx.model:
            argv += ["-m", ctx.model]
        return argv + [str(a) for a in ctx.settings.get("extra_args", [])] + [ctx.prompt]

    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        events = jsonl_events(proc.stdout)
        parts = [e.get("part") or {} for e in events]
        steps = [p for p in parts if p.get("type") == "step-finish"]
        tools = [p for p in parts if p.get("type") == "tool"]
        metrics = RunMetrics()
        tokens = [p.get("tokens") if isinstance(p.get("tokens"), dict) else None for p in steps]
        if tokens and None not in tokens:
            metrics.input_tokens = opt_sum(opt_int(t.get("input")) for t in tokens)
            metrics.output_tokens = opt_sum(opt_int(t.get("output")) for t in tokens)
            caches = [t.get("cache") if isinstance(t.get("cache"), dict) else {} for t in tokens]
            metrics.cache_read_tokens = opt_sum(opt_int(c.get("read")) for c in caches)
            metrics.cache_write_tokens = opt_sum(opt_int(c.get("write")) for c in caches)
            costs = [p.get("cost") for p in steps]
            if all(isinstance(c, (int, float)) for c in costs) and sum(costs) > 0:
                metrics.reported_cost_usd = float(sum(costs))
        if events:
            metrics.tool_calls = len(tools)
            metrics.tool_failures = sum(1 for p in tools
                                        if (p.get("state") or {}).get("status") == "error")
            metrics.turns = len(steps)
        texts = [p.get("text") for p in parts if p.get("type") == "text" and p.get("text")]
        stop = (steps[-1].get("reason") if steps else None) or \
            ("completed" if proc.exit_code == 0 else f"exit {proc.exit_code}")
        return AgentResult(exit_code=proc.exit_code, timed_out=False, stop_reason=stop,
                           metrics=metrics, transcript=proc.stdout,
                           final_report=texts[-1] if texts else None)
