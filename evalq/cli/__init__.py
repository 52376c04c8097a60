"""The `evalq` command line. User mistakes print one line and exit 2, never a traceback."""

from __future__ import annotations

import click

from evalq.cli.errors import shown_as_one_line


class EvalqGroup(click.Group):
    def invoke(self, ctx):
        with shown_as_one_line():
            return super().invoke(ctx)


@click.group(cls=EvalqGroup)
@click.version_option(package_name="evalq")
def main() -> None:
    """Pre-registered, paired experiments on coding agents."""


def _register() -> None:
    """Every command; an import that fails here is a broken install and must say so."""
    from evalq.cli import ops_cmd, run_cmd, study_cmd
    from evalq.cli.agents_cmd import agents
    from evalq.cli.analysis_cmd import COMMANDS as analysis_commands
    from evalq.cli.fixtures_cmd import fixtures, grade
    from evalq.cli.plan_cmd import plan

    from evalq.cli.logging_opts import add_logging_options

    for command in (study_cmd.study, agents, plan, run_cmd.run, run_cmd.worker, run_cmd.report,
                    ops_cmd.status, ops_cmd.studies, ops_cmd.resubmit, ops_cmd.regrade,
                    ops_cmd.cancel, ops_cmd.flower, *analysis_commands, fixtures, grade):
        main.add_command(command)
    add_logging_options(main)


_register()
