"""The agent adapter interface: build a command, run it under its budget, read back what it did.

Adapters plug in by name (see `evalq.workers.agents.ADAPTERS`). An adapter never invents a
number: what its agent does not report stays None.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from ...fixtures import Fixture
from ...models import Condition, Limits, RunMetrics
from ...proc import ProcResult, run_bounded
from ..profile import Profile

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
    extra: dict[str, Any] = field(default_factory=dict)


class AgentAdapter(ABC):
    """One coding agent. Subclasses give the command and the parser of its output."""

    name: ClassVar[str]
    executable: ClassVar[Optional[str]] = None
    description: ClassVar[str] = ""

    @classmethod
    def installed(cls) -> tuple[bool, str]:
        """Whether the agent's executable is on PATH, and where."""
        if cls.executable is None:
            return True, "built in"
        found = shutil.which(cls.executable)
        return (found is not None), (found or f"'{cls.executable}' not on PATH")

    @classmethod
    def validate_settings(cls, settings: dict[str, Any]) -> tuple[str, str, str] | None:
        """(field, problem, fix) for a bad condition setting, else None."""
        return None

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
        self.prepare(ctx)
        proc = run_bounded(self.command(ctx), env=ctx.profile.env, cwd=str(ctx.workspace),
                           timeout=ctx.limits.wall_seconds, output_limit=OUTPUT_LIMIT,
                           stdin=self.stdin(ctx), should_stop=ctx.should_stop)
        result = self.parse(ctx, proc)
        result.stdout, result.stderr = proc.stdout, proc.stderr
        if proc.timed_out:
            result.timed_out = True
            result.stop_reason = f"wall time limit of {ctx.limits.wall_seconds:g} s"
        result.metrics.duration_seconds = round(proc.duration_seconds, 3)
        result.metrics.stop_reason = result.stop_reason
        return result
