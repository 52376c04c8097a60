"""Live progress of trials for `evalq run`, `regrade` and `resubmit` (rich), or log lines.

On a terminal: a rich bar with done/total, elapsed time, an ETA and a tally per outcome. The
ETA comes from the trials finished while watching: their mean duration divided by how many
ran side by side (their summed durations over the elapsed time), times what is left; until one
has finished it is unavailable. Not on a terminal: one line per tenth of the work, as a log
reads best.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional

import click


def eta_seconds(remaining: int, durations: list[float], elapsed: float) -> Optional[float]:
    """Seconds left, from finished trials' durations; None (unavailable) before any finished."""
    if not durations or elapsed <= 0:
        return None
    mean = sum(durations) / len(durations)
    side_by_side = max(1.0, sum(durations) / elapsed)
    return remaining * mean / side_by_side


def _clock(seconds: Optional[float]) -> str:
    if seconds is None:
        return "unavailable"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def tally_text(tally: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(tally.items()) if n) or "no outcome yet"


class TrialProgress:
    """`on_progress(done, total)` for wait_for_study; reads tallies and durations from `source`
    (an object with `tally` and `durations`, such as SettledCounter) when it has them."""

    def __init__(self, what: str, source: object = None, tty: Optional[bool] = None,
                 echo: Callable[[str], None] = lambda line: click.echo(line, err=True)):
        self.what, self.source, self.echo = what, source, echo
        self.tty = sys.stderr.isatty() if tty is None else tty
        self.started = time.monotonic()
        self.bar = None
        self.task = None

    def _fields(self, done: int, total: int) -> tuple[str, str]:
        durations = list(getattr(self.source, "durations", []) or [])
        eta = eta_seconds(total - done, durations, time.monotonic() - self.started)
        return _clock(eta), tally_text(dict(getattr(self.source, "tally", {}) or {}))

    def __call__(self, done: int, total: int) -> None:
        eta, tally = self._fields(done, total)
        if self.tty:
            self._draw(done, total, eta, tally)
            return
        step = max(1, total // 10)
        if done in (0, total) or done // step != (done - 1) // step:
            self.echo(f"{done}/{total} {self.what} finished; elapsed "
                      f"{_clock(time.monotonic() - self.started)}, eta {eta}; {tally}")

    def _draw(self, done: int, total: int, eta: str, tally: str) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)

        if self.bar is None:
            self.bar = Progress(TextColumn(f"{self.what}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TextColumn("eta {task.fields[eta]}"),
                                TextColumn("{task.fields[tally]}"),
                                console=Console(stderr=True), transient=False)
            self.bar.start()
            self.task = self.bar.add_task(self.what, total=total, eta=eta, tally=tally)
        self.bar.update(self.task, completed=done, total=total, eta=eta, tally=tally)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


class Tally:
    """A progress source for work counted in this process (fixtures checked, grid points)."""

    def __init__(self):
        self.tally: dict[str, int] = {}
        self.durations: list[float] = []

    def add(self, outcome: str, duration: Optional[float] = None) -> None:
        self.tally[outcome] = self.tally.get(outcome, 0) + 1
        if duration is not None:
            self.durations.append(duration)
