"""The `evalq` command line. User mistakes print one line and exit 2, never a traceback."""

from __future__ import annotations

import sys

import click

from ..errors import EvalqError, UserError


class EvalqGroup(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UserError as exc:
            click.echo(f"evalq: error: {exc.one_line()}", err=True)
            sys.exit(2)
        except EvalqError as exc:
            click.echo(f"evalq: error: {exc}", err=True)
            sys.exit(1)


@click.group(cls=EvalqGroup)
@click.version_option(package_name="evalq")
def main() -> None:
    """Pre-registered, paired experiments on coding agents."""


def _register() -> None:
    from . import run_cmd, study_cmd

    main.add_command(study_cmd.study)
    for command in (run_cmd.run, run_cmd.worker, run_cmd.report, run_cmd.status):
        main.add_command(command)
    try:
        from .fixtures_cmd import fixtures, grade
    except ImportError:
        return
    main.add_command(fixtures)
    main.add_command(grade)


_register()
