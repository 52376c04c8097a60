"""Whether the judge gave a verdict at all: when it did not, the grader failed, not the agent.

Judged apart (graders/split.py), the judge is evalq's own code: its boot, pytest and the
fixture's hidden tests, with the agent's code only at the far end of a data channel. So a judge
that never started (its boot did not write its started mark: the helpers missing or
unreadable), ended without a report, or ended with an exit status its report does not account
for (not one failed check in it) is a grading_failure quoting its stderr, never `incorrect`.
The subject cannot bring any of these about: it has no path to the judge's report folder, and
its answers can only fail checks (tests/hostile/test_subject_cannot_fail_the_grader.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from evalq.graders.sandbox.base import ExecResult
from evalq.graders.split import STARTED_MARK
from evalq.graders.tamper import read_regular
from evalq.models import Criterion

#: characters of the judge's stderr quoted in the reason
STDERR_TAIL = 400


def quoted(what: str, result: ExecResult) -> str:
    """`what`, with how the judge ended and the tail of what it wrote to stderr."""
    ended = (f"killed by signal {result.signal}" if result.signal is not None
             else f"exit status {result.exit_code}")
    tail = result.stderr.strip()[-STDERR_TAIL:] or "nothing on stderr"
    return f"{what} ({ended}); its stderr ends: {tail}"


def missing_verdict(result: ExecResult, report_dir: Path, report: str) -> str | None:
    """Why the judge's run gave no report to read (`report`, its file name), or None."""
    if read_regular(report_dir / STARTED_MARK, 64) is None:
        return quoted("the judge never started: its boot wrote no start mark", result)
    if not os.path.lexists(report_dir / report):
        return quoted("the judge ended without writing its report", result)
    return None


def unexplained_exit(result: ExecResult, criteria: list[Criterion] | None) -> str | None:
    """A failing exit status (after the canaries' own failures are allowed for) with no failed
    check in the report: the judge crashed, not the agent's code; None when it is explained."""
    if result.exit_code == 0 and result.signal is None:
        return None
    if any(c.passed is False for c in criteria or []):
        return None
    return quoted("the judge failed with no failed check in its report", result)
