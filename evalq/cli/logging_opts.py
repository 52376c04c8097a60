"""`-v/--verbose` and `--log-level` on every evalq command, added when the commands register.

Without them evalq logs warnings only; -v shows INFO (which trial runs, is graded, re-sent),
-vv DEBUG. --log-level names a level outright and wins over -v.
"""

from __future__ import annotations

import logging

import click

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _configure(ctx: click.Context, param: click.Parameter, value) -> None:
    if value is None or value == 0:
        return
    level = value if isinstance(value, str) else ("INFO" if value == 1 else "DEBUG")
    current = ctx.meta.get("evalq.log_level")
    if isinstance(value, int) and current is not None:
        return  # --log-level given: it wins
    ctx.meta["evalq.log_level"] = level
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger().setLevel(level)
    logging.getLogger("evalq").setLevel(level)


def _options() -> list[click.Option]:
    return [click.Option(["--log-level"], type=click.Choice(LEVELS, case_sensitive=False),
                         default=None, expose_value=False, is_eager=True, callback=_configure,
                         help="Log at this level (to stderr)."),
            click.Option(["-v", "--verbose"], count=True, expose_value=False, callback=_configure,
                         help="More log output: -v info, -vv debug.")]


def add_logging_options(command: click.Command) -> None:
    """Give `command` and, for a group, each of its subcommands the two options."""
    names = {p.name for p in command.params}
    if not names & {"verbose", "log_level", "loglevel"}:  # `worker` passes its own to Celery
        command.params.extend(_options())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_logging_options(sub)
