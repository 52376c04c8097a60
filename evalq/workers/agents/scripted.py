"""A deterministic scripted agent for demos and tests; it runs as a real child process.

Settings (condition.settings):
  action = "solution" | "noop" | "sleep" | "patch" | "infra_fail"
  solution = "correct" | "incorrect"      (action "solution": apply that reference overlay)
  patch = "<unified diff text>"           (action "patch": applied with `patch -p1`)
  seconds = <float>                       (action "sleep"; with "solution", a pause before it)
  usage = {input_tokens=…, output_tokens=…, cache_read_tokens=…, cache_write_tokens=…,
           cost_usd=…, tool_calls=…}       (reported back as the agent's own usage; absent ⇒ None)
  fail_attempts = <int>                   (action "infra_fail": attempts up to this number fail)
  action "probe"                          reports its HOME/TMPDIR/workspace and whether a marker
                                          an earlier run might have left there is visible, then
                                          leaves markers of its own (profile isolation tests)
  spawn_child = true                      (action "sleep": sleep in a grandchild process too)
  echo_env = ["NAME", …]                  print these variables' values to stdout, stderr, the
                                          report and a workspace file (redaction tests)
  credential_env = ["NAME", …]            credentials to pass on (default: none)
  load_skill = true                       read the condition's installed SKILL.md and say so in
                                          the trace (skill activation tests)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from evalq.report.json_text import dumps
from evalq.errors import InfrastructureError
from evalq.models import RunMetrics
from evalq.proc import ProcResult
from evalq.workers.agents.base import AgentAdapter, AgentContext, AgentResult
from evalq.workers.agents.numbers import cost_or_reason, set_counts
from evalq.workers.agents.streams import jsonl_events
from evalq.workers.sandbox.paths import evalq_python_paths
from evalq.workers.agents.trajectory import Step, build, encode, skill_loaded

ACTIONS = ("solution", "noop", "sleep", "patch", "infra_fail", "probe")
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
              "tool_calls", "tool_failures", "turns")


class ScriptedAgent(AgentAdapter):
    name = "scripted"
    description = "deterministic: applies a reference solution or patch, does nothing, or sleeps"

    @classmethod
    def validate_settings(cls, settings: dict[str, Any]):
        problem = super().validate_settings(settings)
        if problem:
            return problem
        action = settings.get("action", "noop")
        if action not in ACTIONS:
            return "settings.action", f"unknown scripted action '{action}'", \
                f"use one of {', '.join(ACTIONS)}"
        if action == "solution" and settings.get("solution") not in ("correct", "incorrect"):
            return "settings.solution", "the solution action needs solution = correct|incorrect", \
                "set solution = \"correct\" or \"incorrect\""
        if action == "sleep" and not isinstance(settings.get("seconds"), (int, float)):
            return "settings.seconds", "the sleep action needs a number of seconds", \
                "set seconds = 5"
        if action == "patch" and not isinstance(settings.get("patch"), str):
            return "settings.patch", "the patch action needs the diff text", "set patch = \"…\""
        return None

    def command(self, ctx: AgentContext) -> list[str]:
        settings = ctx.settings
        if settings.get("action") == "infra_fail" and \
                ctx.attempt <= int(settings.get("fail_attempts", 10**6)):
            raise InfrastructureError(f"scripted infrastructure failure on attempt {ctx.attempt}")
        plan = dict(settings)
        if plan.get("action") == "solution":
            plan["overlay"] = str(ctx.fixture.solution_dir(plan["solution"]))
        if ctx.condition.skill:
            plan["skill_path"] = ctx.condition.skill
        return [sys.executable, "-m", "evalq.workers.agents.scripted_process", dumps(plan)]

    def readonly_paths(self, ctx: AgentContext) -> list[Path]:
        """The interpreter, its venv and the evalq package; the one overlay it applies."""
        return evalq_python_paths() + self.overlays(ctx)

    def overlays(self, ctx: AgentContext) -> list[Path]:
        if ctx.settings.get("action") == "solution":
            return [ctx.fixture.solution_dir(ctx.settings["solution"])]
        return []

    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        events = jsonl_events(proc.stdout)
        final = next((e for e in reversed(events) if e.get("type") == "result"), {})
        usage = final.get("usage") if isinstance(final.get("usage"), dict) else {}
        metrics = RunMetrics()
        reasons = set_counts(metrics, usage, USAGE_KEYS, "the reported value")
        trajectory = build(self.name, None, ctx.model, _steps(ctx.prompt, events),
                           usage_scope="turn")
        # Activation as the trace shows it: a skill call, or none although one was installed.
        loaded = skill_loaded(trajectory, ctx.condition.skill)
        metrics.skill_loaded = loaded if (ctx.condition.skill or loaded) else None
        metrics.reported_cost_usd, why = cost_or_reason(usage.get("cost_usd"))
        if why:
            reasons["reported_cost_usd"] = f"the reported value is {why}"
        metrics.unreported = reasons or None
        stop = final.get("stop_reason") or ("exit" if proc.exit_code == 0 else "error")
        report = final.get("report")
        return AgentResult(exit_code=proc.exit_code, timed_out=False, stop_reason=str(stop),
                           metrics=metrics, transcript=encode(trajectory),
                           final_report=None if report is None else str(report))


def _steps(prompt: str, events: list[dict[str, Any]]) -> list[Step]:
    """The scripted process's events as trajectory steps (its tools, skill reads and report)."""
    steps = [Step("user", message=prompt)]
    for index, event in enumerate(events):
        kind = event.get("type")
        if kind in ("tool", "skill"):
            step = Step("agent")
            name = "skill" if kind == "skill" else str(event.get("name"))
            step.call(f"call-{index}", name, {k: v for k, v in event.items() if k != "type"})
            step.result(f"call-{index}", "exit 0" if not event.get("exit") else
                        f"exit {event['exit']}", bool(event.get("exit")))
            steps.append(step)
        elif kind == "result":
            usage = event.get("usage") if isinstance(event.get("usage"), dict) else None
            steps.append(Step("agent", message=str(event.get("report") or ""), usage=usage and {
                k: usage.get(k) for k in USAGE_KEYS[:4]}))
    return steps
