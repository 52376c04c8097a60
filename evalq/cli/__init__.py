"""The `evalq` command line. User mistakes print one line and exit 2, never a traceback.

Commands load their modules only when run, so `evalq --help` (and shell completion) does not
import the database, Celery or pydantic. tests/test_cli_lazy.py checks that each short help
below is the one the command itself has.
"""

from __future__ import annotations

import importlib

import click

from evalq.cli.errors import shown_as_one_line
from evalq.cli.logging_opts import add_logging_options
from evalq.urls import mask_log_records

#: name -> (module:attribute, short help shown by `evalq --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "agents": ("evalq.cli.agents_cmd:agents", "Agent adapters on this machine."),
    "artifact": ("evalq.cli.show_cmd:artifact",
                 "Write one stored artifact of a trial: diff, stderr, stdout, transcript, "
                 "workspace (.tar.gz), wire, metrics, final_report."),
    "blind": ("evalq.cli.analysis_cmd:blind",
              "Write blinded rater packets (condition labels stripped), a rubric, and apart, "
              "their key."),
    "cancel": ("evalq.cli.ops_cmd:cancel",
               "Revoke queued attempts and stop running ones; finished attempts are kept."),
    "compare": ("evalq.cli.analysis_cmd:compare",
                "Compare two studies (STUDY or STUDY:CONDITION each), e.g. two commits."),
    "export": ("evalq.cli.analysis_cmd:export", "Export per-trial rows of a study."),
    "fixtures": ("evalq.cli.fixtures_cmd:fixtures", "Check, create and freeze fixtures."),
    "flower": ("evalq.cli.ops_cmd:flower",
               "Flower against evalq's broker: the three queues and every worker (celery "
               "flower)."),
    "grade": ("evalq.cli.fixtures_cmd:grade",
              "Grade a workspace against a fixture's hidden tests."),
    "import": ("evalq.cli.analysis_cmd:import_",
               "Import adjudicated results.jsonl rows, or skill-activation trial rows, as a "
               "study."),
    "plan": ("evalq.cli.plan_cmd:plan",
             "Simulate power and CI width over a grid of designs from a pilot, and forecast "
             "cost and time."),
    "regrade": ("evalq.cli.ops_cmd:regrade",
                "Grade stored final workspaces again without re-running the agent."),
    "report": ("evalq.cli.run_cmd:report", "Write the study's report from the results database."),
    "resubmit": ("evalq.cli.ops_cmd:resubmit",
                 "Enqueue new attempts for failed trials; every earlier attempt stays a "
                 "row."),
    "run": ("evalq.cli.run_cmd:run",
            "Run a study: freeze, plan, enqueue, and (by default) wait and report."),
    "show": ("evalq.cli.show_cmd:show",
             "One trial: outcome and reason, failed checks, diff, the agent's exit status, "
             "model calls and stderr, and its stored artifacts."),
    "status": ("evalq.cli.ops_cmd:status",
               "Planned trials by state, outcome and worker host, from the database (they add "
               "up)."),
    "studies": ("evalq.cli.ops_cmd:studies",
                "Studies in the results database with planned and finished trial counts."),
    "study": ("evalq.cli.study_cmd:study", "Validate and freeze study manifests."),
    "worker": ("evalq.cli.run_cmd:worker",
               "Start a Celery worker with evalq's settings (EVALQ_BROKER_URL must name the "
               "broker)."),
}


def load_command(name: str) -> click.Command:
    """Import a command's module; a failing import is a broken install and is not hidden."""
    module, _, attribute = COMMANDS[name][0].partition(":")
    command = getattr(importlib.import_module(module), attribute)
    add_logging_options(command)  # -v/--log-level on every command (once: it checks)
    return command


class EvalqGroup(click.Group):
    """Commands resolved by name on use; every one runs inside the one-line error handler."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return load_command(name) if name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx):
        with shown_as_one_line():
            return super().invoke(ctx)


@click.group(cls=EvalqGroup)
@click.version_option(package_name="evalq")
def main() -> None:
    """Pre-registered, paired experiments on coding agents."""
    mask_log_records()  # no log line of any command shows a URL's password


add_logging_options(main)
