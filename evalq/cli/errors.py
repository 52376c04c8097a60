"""How the command line shows evalq's errors: one line, no traceback, a meaningful exit code."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

import click

from evalq.errors import EvalqError, UserError, UserErrors


@contextmanager
def shown_as_one_line() -> Iterator[None]:
    """A user's mistake exits 2, another expected failure exits 1; one line per error."""
    try:
        yield
    except UserError as exc:
        for line in exc.lines() if isinstance(exc, UserErrors) else [exc.one_line()]:
            click.echo(f"evalq: error: {line}", err=True)
        sys.exit(2)
    except EvalqError as exc:
        click.echo(f"evalq: error: {exc}", err=True)
        sys.exit(1)
