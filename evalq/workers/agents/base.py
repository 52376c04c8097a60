"""The agent adapter interface: build a command, run it under its budget, read back what it did.

Adapters plug in by name (see `evalq.workers.agents.ADAPTERS`). An adapter never invents a
number: what its agent does not report stays None.
"""

from __future__ import annotations

import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from evalq.fixtures.fixture import Fixture
from evalq.models import Condition, Limits, RunMetrics
from evalq.pricing import price_run
from evalq.proc import ProcResult, run_bounded
from evalq.workers.profile import Profile
from evalq.workers.redact import Redactor
from evalq.workers.secrets import credentials, secret_values
from evalq.workers.agents.locate import find_executable

OUTPUT_LIMIT = 64 * 1024 * 1024


@dataclass
class AgentContext:
    fixture: Fixture
    condition: Condition
    profile: Profile
    prompt: str
    limits: Limits
    attempt: int = 1
    should_stop: Callable[[], bool] = lambda: False

    @property
    def workspace(self) -> Path:
        return self.profile.workspace

    @property
    def settings(self) -> dict[str, Any]:
        return self.condition.settings

    @property
    def model(self) -> Optional[str]:
        """The model id: the condition's `model`, else its `settings.model`."""
        return self.condition.model or self.settings.get("model")


@dataclass
class AgentResult:
    exit_code: Optional[int]
    timed_out: bool
    stop_reason: Optional[str]
    metrics: RunMetrics
    stdout: bytes = b""
    stderr: bytes = b""
    transcript: Optional[bytes] = None
    final_report: Optional[str] = None
    #: usage per model when the agent reports it so (priced model by model)
    usage_by_model: Optional[dict[str, dict[str, Optional[int]]]] = None
    extra: dict[str, Any] = field(default_factory=dict)


class AgentAdapter(ABC):
    """One coding agent. Subclasses give the command and the parser of its output."""

    name: ClassVar[str]
    executable: ClassVar[Optional[str]] = None
    description: ClassVar[str] = ""
    #: environment variables holding the provider credential this agent needs
    credential_env: ClassVar[tuple[str, ...]] = ()
    #: environment that turns off the agent's telemetry, update checks and other extra traffic
    quiet_env: ClassVar[dict[str, str]] = {}

    @classmethod
    def installed(cls) -> tuple[bool, str]:
        """Whether the agent's executable is found (EVALQ_AGENT_PATH, then PATH), and where."""
        if cls.executable is None:
            return True, "built in"
        found = find_executable(cls.executable)
        return (found is not None), (found or f"'{cls.executable}' not on PATH or EVALQ_AGENT_PATH")

    @classmethod
    def version(cls) -> Optional[str]:
        """The installed agent's version string (`--version`), None when unknown."""
        found = find_executable(cls.executable) if cls.executable else None
        if found is None:
            return None
        try:
            done = subprocess.run([found, "--version"], capture_output=True, text=True,
                                  timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        line = (done.stdout or "").strip().splitlines()
        return line[0][:200] if done.returncode == 0 and line else None

    @classmethod
    def validate_settings(cls, settings: dict[str, Any]) -> tuple[str, str, str] | None:
        """(field, problem, fix) for a bad condition setting, else None."""
        names = settings.get("credential_env")
        if names is not None and not (isinstance(names, list) and
                                      all(isinstance(n, str) for n in names)):
            return "settings.credential_env", "credential_env must be a list of variable names", \
                "write credential_env = [\"ANTHROPIC_API_KEY\"]"
        return None

    def executable_path(self, ctx: AgentContext) -> str:
        from evalq.errors import InfrastructureError

        found = find_executable(self.executable, ctx.settings)
        if found is None:
            wanted = ctx.settings.get("executable") or self.executable
            raise InfrastructureError(f"agent executable '{wanted}' is not installed on this "
                                      "worker (see `evalq agents list`; set EVALQ_AGENT_PATH)")
        return found

    def model_url(self, ctx: AgentContext) -> Optional[str]:
        """The base URL the agent must send its model requests to (the one place to change
        when the sandbox's door replaces the condition's `base_url`)."""
        return ctx.settings.get("base_url")

    def credential_names(self, ctx: AgentContext) -> tuple[str, ...]:
        names = ctx.settings.get("credential_env")
        return tuple(names) if names is not None else self.credential_env

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        """Variables added to the profile's minimal environment (beyond the credential)."""
        return {}

    def prepare(self, ctx: AgentContext) -> None:
        """Write the agent's own config into the fresh profile (skills, instructions, model)."""

    @abstractmethod
    def command(self, ctx: AgentContext) -> list[str]:
        """argv to run with cwd = the workspace."""

    def stdin(self, ctx: AgentContext) -> bytes | None:
        return None

    @abstractmethod
    def parse(self, ctx: AgentContext, proc: ProcResult) -> AgentResult:
        """Read the agent's own output into an AgentResult (None where it reports nothing)."""

    def run(self, ctx: AgentContext) -> AgentResult:
        """Prepare the profile, run under the wall limit, parse, price, check limits, redact."""
        env = ctx.profile.env
        env.update(self.quiet_env)
        env.update(self.environment(ctx))
        granted = credentials(self.credential_names(ctx))
        env.update(granted)
        self.prepare(ctx)
        proc = run_bounded(self.command(ctx), env=env, cwd=str(ctx.workspace),
                           timeout=ctx.limits.wall_seconds, output_limit=OUTPUT_LIMIT,
                           stdin=self.stdin(ctx), should_stop=ctx.should_stop)
        result = self.parse(ctx, proc)
        result.stdout, result.stderr = proc.stdout, proc.stderr
        if proc.timed_out:
            result.timed_out = True
            result.stop_reason = f"wall time limit of {ctx.limits.wall_seconds:g} s"
        result.metrics.duration_seconds = round(proc.duration_seconds, 3)
        price_run(result.metrics, ctx.model, result.usage_by_model)
        limit, cost = ctx.limits.max_cost_usd, result.metrics.cost_usd
        if not result.timed_out and limit is not None and cost is not None and cost > limit:
            result.timed_out = True
            result.stop_reason = f"cost limit of ${limit:g} exceeded (${cost:.4f})"
        result.metrics.stop_reason = result.stop_reason
        return redact_result(result, Redactor([*secret_values(), *granted.values()]),
                             ctx.workspace)


def redact_result(result: AgentResult, redactor: Redactor, workspace: Path) -> AgentResult:
    """Mask credentials in everything the run will store: streams, report, metrics, workspace."""
    if not redactor:
        return result
    result.stdout, result.stderr = redactor.data(result.stdout), redactor.data(result.stderr)
    if result.transcript is not None:
        result.transcript = redactor.data(result.transcript)
    if result.final_report is not None:
        result.final_report = redactor.text(result.final_report)
    if result.stop_reason is not None:
        result.stop_reason = redactor.text(result.stop_reason)
    result.metrics = type(result.metrics).model_validate(
        redactor.obj(result.metrics.model_dump()))
    result.extra = redactor.obj(result.extra)
    if workspace.exists():
        redactor.tree(workspace)
    return result
