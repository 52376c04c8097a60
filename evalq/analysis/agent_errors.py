"""Agent errors: runs where the agent itself broke rather than tried and failed.

Such a run keeps its outcome (usually `incorrect`: an agent that crashes has not solved the
task), but a condition whose runs are mostly agent errors measured a broken agent, not a weak
one, so the report counts them beside the outcomes and makes its claims exploratory.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

#: the kinds, worst first: the one a run is counted under when several apply
BEFORE_ANY_MODEL_CALL = "exited with an error before any model call"
ERROR_EXIT = "exited with an error"
KILLED = "was killed"
NO_MODEL_CALL = "made no model call"
KINDS = (BEFORE_ANY_MODEL_CALL, ERROR_EXIT, KILLED, NO_MODEL_CALL)

#: stderr kept per run: the last lines, each bounded, the whole bounded
STDERR_TAIL_LINES, STDERR_TAIL_LINE_CHARS, STDERR_TAIL_CHARS = 20, 300, 4000

#: outcomes that say nothing about the agent: not counted among its runs
NOT_COUNTED = (None, "infrastructure_failure", "grading_failure")

#: a condition with more than this share of agent errors gets the warning
MOSTLY = 0.5


def stderr_tail(stderr: bytes) -> Optional[str]:
    """The last lines of an agent's stderr as text (None when it wrote nothing)."""
    text = stderr[-64 * 1024:].decode("utf-8", "replace").replace("\x00", "")
    lines = [line[:STDERR_TAIL_LINE_CHARS] for line in text.rstrip().splitlines()]
    tail = "\n".join(lines[-STDERR_TAIL_LINES:])[-STDERR_TAIL_CHARS:]
    return tail or None


def agent_error(metrics: Optional[Mapping[str, Any]], outcome: Optional[str]) -> Optional[str]:
    """Which kind of agent error a run is (one of KINDS), or None when the agent ran and
    finished. A run evalq failed (infrastructure or grading failure) is never the agent's, and
    a run stopped at its wall time or budget is `timed_out`, its own outcome (evalq's kill
    there is no crash of the agent's)."""
    if not metrics or outcome in NOT_COUNTED or outcome == "timed_out":
        return None
    code, calls = metrics.get("exit_code"), metrics.get("model_calls")
    if isinstance(code, int) and code < 0:
        return KILLED  # a signal evalq did not send ended it (out of memory, a crash)
    if isinstance(code, int) and code > 0:
        return BEFORE_ANY_MODEL_CALL if calls == 0 else ERROR_EXIT
    if calls == 0:
        return NO_MODEL_CALL
    return None


def describe_exit(code: Optional[int]) -> str:
    """An exit status as words: `exit 2`, `killed by signal 9 (SIGKILL)`, `unavailable`."""
    if code is None:
        return "unavailable"
    if code >= 0:
        return f"exit {code}"
    try:
        name = f" ({signal.Signals(-code).name})"
    except ValueError:
        name = ""
    return f"killed by signal {-code}{name}"


def last_line(tail: Optional[str]) -> Optional[str]:
    """The last non-blank line of a stderr tail (the exception of a traceback), or None."""
    lines = [line for line in (tail or "").splitlines() if line.strip()]
    return lines[-1] if lines else None


@dataclass
class AgentErrorCount:
    """One condition's agent errors among its graded runs."""

    condition: str
    runs: int = 0
    errors: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def warning(self) -> Optional[str]:
        """The sentence that makes the claims exploratory, when most runs are agent errors."""
        if not self.runs or self.errors / self.runs <= MOSTLY:
            return None
        kind, count = max(self.by_kind.items(), key=lambda kv: (kv[1], -KINDS.index(kv[0])))
        what = kind if count == self.errors else "ended in an agent error"
        return f"condition {self.condition}: {self.errors}/{self.runs} runs {what}"

    def add(self, kind: Optional[str], n: int = 1) -> None:
        """Count `n` finished runs of the condition, agent errors of `kind` (None: none)."""
        self.runs += n
        if kind is not None:
            self.errors += n
            self.by_kind[kind] = self.by_kind.get(kind, 0) + n

    def as_dict(self) -> dict[str, Any]:
        """The report's shape: {runs, errors, by_kind} (kinds worst first, zero ones left out)."""
        return {"runs": self.runs, "errors": self.errors,
                "by_kind": {k: self.by_kind[k] for k in KINDS if self.by_kind.get(k)}}


def count_by_condition(rows: Iterable[Mapping[str, Any]],
                       conditions: Iterable[str] = ()) -> dict[str, AgentErrorCount]:
    """Agent errors per condition over rows with `condition`, `outcome` and `metrics` (and
    optionally `n`, the runs the row stands for: a database's GROUP BY). `conditions` are
    listed first, in that order, with zero runs when none finished."""
    counts = {name: AgentErrorCount(name) for name in conditions}
    for row in rows:
        if row.get("outcome") in NOT_COUNTED:
            continue
        count = counts.get(row["condition"]) or \
            counts.setdefault(row["condition"], AgentErrorCount(row["condition"]))
        count.add(agent_error(row.get("metrics"), row.get("outcome")), row.get("n", 1))
    return counts


def count_runs(runs: Iterable[Any], names: Iterable[str] = ()
               ) -> tuple[dict[str, AgentErrorCount], dict[str, str]]:
    """Per condition, the agent errors among analysis runs (evalq.analysis.runs.Run), each
    run classified once; and each agent-error run's kind by trial id. `names` are listed
    even with no run."""
    counts = {name: AgentErrorCount(name) for name in names}
    kinds: dict[str, str] = {}
    for run in runs:
        if run.outcome in NOT_COUNTED:
            continue
        kind = agent_error(run.counted_metrics, run.outcome)
        count = counts.get(run.condition) or \
            counts.setdefault(run.condition, AgentErrorCount(run.condition))
        count.add(kind)
        if kind is not None:
            kinds[run.view.trial_id] = kind
    return counts, kinds
