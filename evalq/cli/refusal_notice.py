"""While `evalq run` waits: say once per grader and fixture when a grader refuses the study's
trials (its self-check of the fixture failed), since those trials wait for a grader that
passes and the wait would otherwise look like a hang."""

from __future__ import annotations

import time
from typing import Callable

import click

from evalq.results.grader_checks import refusal_line, refusals


class RefusalNotice:
    """Callable from the wait loop; asks the database at most every `every` seconds."""

    def __init__(self, engine, study_id: str, every: float = 5.0,
                 echo: Callable[[str], None] = lambda line: click.echo(line, err=True)):
        self.engine, self.study_id, self.every, self.echo = engine, study_id, every, echo
        self.asked = float("-inf")
        self.said: set[tuple[str, str, str]] = set()

    def __call__(self) -> None:
        if time.monotonic() - self.asked < self.every:
            return
        self.asked = time.monotonic()
        try:
            rows = refusals(self.engine, self.study_id)
        except Exception:  # a database blip: the next call asks again
            return
        for row in rows:
            key = (row["grader"], row["fixture_digest"], row["reason"] or "")
            if key not in self.said:
                self.said.add(key)
                self.echo(f"waiting: {refusal_line(row)}; its trials wait for a grader that "
                          "passes its self-check (`evalq status` lists the refusals)")
