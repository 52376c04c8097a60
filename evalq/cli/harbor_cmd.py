"""`evalq fixtures import harbor` and `evalq fixtures export harbor`: Harbor (Terminal-Bench)
task folders into frozen fixtures and back."""

from __future__ import annotations

from pathlib import Path

import click

from evalq.cli.errors import shown_as_one_line


@click.group("import", short_help="Import tasks of another format as fixtures.")
def import_group() -> None:
    """Import tasks of another format as frozen evalq fixtures."""


@import_group.command("harbor", short_help="Harbor / Terminal-Bench task folders as fixtures.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Folder the fixtures are written into (one folder per task).")
@click.option("--without-internet", is_flag=True,
              help="Import a task asking for internet access anyway, run offline (recorded).")
@click.option("--sandbox", type=click.Choice(("bwrap", "docker")), default=None,
              help="Backend the oracle runs in at import (default: EVALQ_SANDBOX, else bwrap).")
def import_harbor(paths: tuple[str, ...], out: str, without_internet: bool,
                  sandbox: str | None) -> None:
    """Build each task's environment offline, run its oracle once, and write a frozen fixture
    whose grade runs tests/test.sh in a fresh sandbox of that environment. A task evalq
    cannot honour is refused with one line naming the file and field; the rest still import,
    and the exit status is 2 if any was refused."""
    from evalq.fixtures.harbor.importer import import_task
    from evalq.errors import UserError

    refused = 0
    for path in paths:
        try:
            done = import_task(Path(path), Path(out), allow_downgrade=without_internet,
                               sandbox=sandbox)
        except UserError as exc:
            refused += 1
            click.echo(f"refused: {exc.one_line()}", err=True)
            continue
        click.echo(f"imported {done.source} -> {done.path} ({done.digest}; environment "
                   f"{done.rootfs_digest})")
        for line in done.downgraded:
            click.echo(f"  downgraded: {line}")
    if refused:
        raise SystemExit(2)


@click.group("export", short_help="Export fixtures in another format.")
def export_group() -> None:
    """Export fixtures as task folders of another format."""


@export_group.command("harbor", short_help="Fixtures imported from Harbor, as task folders.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="Folder the task folders are written into.")
def export_harbor(paths: tuple[str, ...], out: str) -> None:
    """Write each fixture back as a Harbor task folder, checked against the source digest."""
    from evalq.fixtures.harbor.exporter import export_fixture

    with shown_as_one_line():
        for path in paths:
            click.echo(f"exported {path} -> {export_fixture(Path(path), Path(out))}")


@click.command("environment", short_help="Build imported Harbor tasks' environments here.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
def environment(paths: tuple[str, ...]) -> None:
    """Build each imported Harbor task's environment on this machine (offline, from the task's
    files kept in the fixture) and check it against the digest the fixture pins; exit 2 if
    one differs (that fixture does not grade here until re-imported)."""
    from evalq.fixtures.harbor.rebuild import rebuild_environment

    differs = 0
    with shown_as_one_line():
        for path in paths:
            done = rebuild_environment(Path(path))
            if done.matches:
                click.echo(f"{done.fixture}: environment built, {done.digest} as pinned")
            else:
                differs += 1
                click.echo(f"{path}: field 'rootfs_digest': the environment built here is "
                           f"{done.digest}, the fixture pins {done.pinned} (fix: re-import "
                           f"the task with `evalq fixtures import harbor`)", err=True)
    if differs:
        raise SystemExit(2)
