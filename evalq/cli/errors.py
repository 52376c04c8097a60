"""How the command line shows evalq's errors: one line, no traceback, a meaningful exit code,
and no URL's password."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

import click

from evalq.errors import EvalqError, UserError, UserErrors
from evalq.urls import masked

#: set to see the traceback of an unexpected error instead of its one line
TRACEBACK_ENV = "EVALQ_TRACEBACK"


@contextmanager
def shown_as_one_line() -> Iterator[None]:
    """A user's mistake exits 2, any other failure exits 1; one line per error."""
    try:
        yield
    except UserError as exc:
        for line in exc.lines() if isinstance(exc, UserErrors) else [exc.one_line()]:
            click.echo(f"evalq: error: {masked(line)}", err=True)
        sys.exit(2)
    except EvalqError as exc:
        click.echo(f"evalq: error: {masked(str(exc))}", err=True)
        sys.exit(1)
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise  # click's own: usage errors (exit 2), --help, Ctrl-C
    except Exception as exc:  # a bug or an unforeseen environment: still one line, exit 1
        if os.environ.get(TRACEBACK_ENV):
            raise
        first = masked((str(exc).strip().splitlines() or [""])[0])
        click.echo(f"evalq: error: {type(exc).__name__}: {first} (this is a bug or an "
                   f"unexpected environment; {TRACEBACK_ENV}=1 shows the traceback)", err=True)
        sys.exit(1)
