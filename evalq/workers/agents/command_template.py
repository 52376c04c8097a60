"""Any agent started by a command line: argv with placeholders, usage from a file it writes.

settings.argv is a list; each item may hold {prompt}, {prompt_file}, {workspace}, {model},
{model_url} (the model endpoint: the sandbox's door when sealed), {output_dir} and {agent_dir}
(the condition's agent source, read-only; argv[0] may be a program in it). The command runs
with the workspace as its working directory. If the command writes {output_dir}/usage.json
(keys input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd,
tool_calls, tool_failures, turns), those numbers are used; otherwise they are unavailable, and
so is one that is no count or cost (NaN, negative, huge, text: evalq.workers.agents.numbers),
its reason in `unreported`. {output_dir}/report.txt, if written, is the
final report. settings.credential_env lists the credential variables to pass on. Its
trajectory holds the task, the command's output and the report: a generic command has no
tool calls evalq can see, and no skill activation (null).
"""

from __future__ import annotations

import json
from typing import Any

from evalq.models import RunMetrics
from evalq.proc import ProcResult
from evalq.safe_read import read_left
from evalq.workers.agents.base import AgentAdapter, AgentContext, AgentResult
from evalq.workers.agents.locate import find_executable
from evalq.workers.agents.numbers import cost_or_reason, set_counts
from evalq.workers.sandbox.paths import install_paths
from evalq.workers.agents.trajectory import Step, build, encode

PLACEHOLDERS = ("prompt", "prompt_file", "workspace", "model", "model_url", "output_dir",
                "agent_dir")
#: the most of the agent's usage.json and report.txt evalq reads (larger ones are ignored)
MAX_USAGE_BYTES = 1024 * 1024
MAX_REPORT_BYTES = 16 * 1024 * 1024
COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
          "tool_calls", "tool_failures", "turns")


def _in_source(ctx: AgentContext) -> bool:
    """Whether argv[0] names a program inside the agent source ({agent_dir}/...)."""
    return "{agent_dir}" in ctx.settings["argv"][0]


class CommandTemplate(AgentAdapter):
    name = "command"
    executable = None
    description = ("a command line of your own: argv with {prompt}, {workspace}, {model}, "
                   "{agent_dir} (the condition's source, read-only), …")

    @classmethod
    def validate_settings(cls, settings: dict[str, Any]):
        problem = super().validate_settings(settings)
        if problem:
            return problem
        argv = settings.get("argv")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            return "settings.argv", "the command agent needs argv, a list of strings", \
                "write argv = [\"my-agent\", \"--task\", \"{prompt_file}\"]"
        for item in argv:
            try:
                item.format(**{k: "" for k in PLACEHOLDERS})
            except (KeyError, IndexError, ValueError) as exc:
                return "settings.argv", f"bad placeholder in {item!r}: {exc}", \
                    f"use only {{{'}, {'.join(PLACEHOLDERS)}}} (double braces for literal ones)"
        return None

    def output_dir(self, ctx: AgentContext):
        return ctx.profile.logs / "agent-output"

    def command(self, ctx: AgentContext) -> list[str]:
        out = self.output_dir(ctx)
        out.mkdir(parents=True, exist_ok=True)
        prompt_file = ctx.profile.logs / "prompt.txt"
        prompt_file.write_text(ctx.prompt)
        values = {"prompt": ctx.prompt, "prompt_file": str(prompt_file),
                  "workspace": str(ctx.workspace), "model": ctx.model or "",
                  "model_url": ctx.model_url or "", "output_dir": str(out),
                  "agent_dir": ctx.agent_dir or ""}
        argv = [item.format(**values) for item in ctx.settings["argv"]]
        if _in_source(ctx):  # a program of the agent's own source: nothing to look up
            return argv
        return [self._found(argv[0]), *argv[1:]]

    @staticmethod
    def _found(name: str) -> str:
        from evalq.errors import InfrastructureError

        found = find_executable(name)
        if found is None:
            raise InfrastructureError(f"command '{name}' is not installed on this worker")
        return found

    def readonly_paths(self, ctx: AgentContext):
        """The command's own install (its npm prefix or virtualenv, else the file); none for
        a program in the agent source, which the sandbox mounts by itself."""
        if _in_source(ctx):
            return []
        return install_paths(self._found(ctx.settings["argv"][0].format(
            **{k: "" for k in PLACEHOLDERS})))

    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        out = self.output_dir(ctx)
        metrics = RunMetrics()
        # both files are the agent's: read without following links, FIFOs or huge files
        raw = read_left(ctx.profile.root, out / "usage.json", MAX_USAGE_BYTES)
        try:
            usage = json.loads(raw) if raw is not None else None
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            usage = None
        if isinstance(usage, dict):
            metrics.unreported = _usage_numbers(usage, metrics) or None
        raw = read_left(ctx.profile.root, out / "report.txt", MAX_REPORT_BYTES)
        report = raw.decode("utf-8", "replace") if raw is not None else None
        steps = [Step("user", message=ctx.prompt),
                 Step("agent", message=proc.stdout.decode("utf-8", "replace")),
                 Step("agent", message=report or "", usage={k: getattr(metrics, k)
                                                            for k in COUNTS[:4]})]
        trajectory = build(self.name, None, ctx.model, steps, usage_scope="run",
                           notes={"skill_loaded": "a generic command's skill use is not visible"})
        return AgentResult(exit_code=proc.exit_code, timed_out=False,
                           stop_reason="exit" if proc.exit_code == 0 else f"exit {proc.exit_code}",
                           metrics=metrics, transcript=encode(trajectory), final_report=report)


def _usage_numbers(usage: dict[str, Any], metrics: RunMetrics) -> dict[str, str]:
    """Set the counts and cost usage.json gives; returns why each one it gives is not kept
    (NaN, negative, huge, not a number)."""
    reasons = set_counts(metrics, usage, COUNTS, "usage.json's value")
    metrics.reported_cost_usd, why = cost_or_reason(usage.get("cost_usd"))
    if why:
        reasons["reported_cost_usd"] = f"usage.json's cost_usd is {why}"
    return reasons
