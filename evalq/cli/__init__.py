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
    from evalq.cli import ops_cmd, run_cmd, study_cmd

    main.add_command(study_cmd.study)
    from evalq.cli.agents_cmd import agents

    main.add_command(agents)
    from evalq.cli.plan_cmd import plan

    main.add_command(plan)
    for command in (run_cmd.run, run_cmd.worker, run_cmd.report, ops_cmd.status,
                    ops_cmd.resubmit, ops_cmd.regrade, ops_cmd.cancel, ops_cmd.flower):
        main.add_command(command)
    from evalq.cli.analysis_cmd import COMMANDS as analysis_commands

    for command in analysis_commands:
        main.add_command(command)
    try:
        from evalq.cli.fixtures_cmd import fixtures, grade
    except ImportError:
        return
    main.add_command(fixtures)
    main.add_command(grade)


_register()
