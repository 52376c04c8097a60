"""Errors meant for people: one line naming the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path


class EvalqError(Exception):
    """Base class for every error evalq expects to show a user."""


class UserError(EvalqError):
    """Bad input from a user: printed as one line, exit code 2, no traceback."""

    def __init__(self, message: str, *, file: str | Path | None = None,
                 field: str | None = None, fix: str | None = None):
        self.file = str(file) if file is not None else None
        self.field = field
        self.fix = fix
        self.message = message
        super().__init__(self.one_line())

    def one_line(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file)
        if self.field:
            parts.append(f"field '{self.field}'")
        head = ": ".join(parts)
        text = f"{head}: {self.message}" if head else self.message
        if self.fix:
            text = f"{text} (fix: {self.fix})"
        return " ".join(text.split())


class InfrastructureError(EvalqError):
    """Something outside the agent's control failed; the attempt is an infrastructure_failure."""


class AgentDataError(EvalqError):
    """What the agent left cannot be stored as it is (a workspace over the limits, a file
    that cannot be read or redacted): the run is the agent's `incorrect`, with this reason.

    Raised only where agent data is refused: every other exception after the agent exits is
    evalq's own fault and stays an infrastructure_failure."""


class SandboxError(EvalqError):
    """The sandbox could not be started or crashed; the attempt is a grading_failure."""


class UserErrors(UserError):
    """Several bad rows of one input, one line each, so a user can fix them all in one go."""

    def __init__(self, errors: list[UserError], more: int = 0):
        self.errors = list(errors)
        self.more = more
        first = self.errors[0]
        super().__init__(first.message, file=first.file, field=first.field, fix=first.fix)

    def lines(self) -> list[str]:
        out = [e.one_line() for e in self.errors]
        if self.more:
            out.append(f"{self.errors[0].file}: and {self.more} more bad row(s) not shown")
        return out
