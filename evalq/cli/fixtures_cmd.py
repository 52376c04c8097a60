"""`evalq fixtures check|new|freeze` and `evalq grade FIXTURE WORKSPACE`."""

from __future__ import annotations

import functools
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from evalq.report.json_text import dumps
from evalq.errors import UserError
from evalq.cli.errors import shown_as_one_line
from evalq.fixtures.fixture import freeze_fixture, load_fixture
from evalq.fixtures.scaffold import TOOLCHAINS, create_fixture
from evalq.fixtures.selfcheck import SelfCheck, self_check
from evalq.fixtures.suite import (LOCK_NAME, default_suite_dir, enclosing_lock, find_fixtures,
                                  freeze_suite, is_fixture_dir, load_suite, lock_fixture,
                                  lock_problems, read_lock)

SANDBOXES = ("bwrap", "docker")
sandbox_option = click.option(
    "--sandbox", type=click.Choice(SANDBOXES), default=None,
    help="Sandbox backend for the hidden tests (default: EVALQ_SANDBOX, else bwrap).")


def one_line_errors(fn):
    """Print a user's mistake as one line and exit 2, also when run outside `evalq`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with shown_as_one_line():
            return fn(*args, **kwargs)
    return wrapper


def _targets(paths: tuple[str, ...]) -> tuple[list[Path], list[Path]]:
    """(fixture directories, suite directories with a lock) named by the arguments."""
    roots = [Path(p) for p in paths] or [default_suite_dir()]
    fixtures: list[Path] = []
    suites: list[Path] = []
    for root in roots:
        if not root.exists():
            raise UserError("no such file or directory", file=root, fix="check the path")
        found = find_fixtures(root)
        if not found:
            raise UserError("no fixtures here (no fixture.toml in it or below it)", file=root,
                            fix="point at a fixture directory or a directory of fixtures")
        if not is_fixture_dir(root) and (root / LOCK_NAME).is_file():
            suites.append(root.resolve())
        fixtures += [p for p in found if p not in fixtures]
    return fixtures, suites


# ------------------------------------------------------------------ fixtures
@click.group(short_help="Check, create and freeze fixtures.")
def fixtures() -> None:
    """Check, create and freeze fixtures: coding tasks with hidden tests."""


def _checked_with_progress(fixture_dirs: list, sandbox: str | None, jobs: int) -> list:
    """self_check every fixture, `jobs` at a time, with a progress bar (ok/failed tally)."""
    import time
    from concurrent.futures import as_completed

    from evalq.cli.progress import Tally, TrialProgress

    tally = Tally()
    progress = TrialProgress("fixtures checked", tally)

    def timed(path):
        start = time.monotonic()
        return self_check(path, sandbox=sandbox), time.monotonic() - start

    results: dict[int, object] = {}
    progress(0, len(fixture_dirs))
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(timed, p): i for i, p in enumerate(fixture_dirs)}
            for future in as_completed(futures):
                check, seconds = future.result()
                results[futures[future]] = check
                tally.add("ok" if check.ok else "failed", seconds)
                progress(len(results), len(fixture_dirs))
    finally:
        progress.close()
    return [results[i] for i in range(len(fixture_dirs))]


@fixtures.command(short_help="Grader self-check of every fixture (table or --json).")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@sandbox_option
@click.option("--jobs", default=4, show_default=True, type=click.IntRange(1, 64),
              help="Fixtures graded at the same time.")
@one_line_errors
def check(paths: tuple[str, ...], as_json: bool, sandbox: str | None, jobs: int) -> None:
    """Grader self-check: for every fixture, grade the untouched workspace and both reference
    solutions in the sandbox. The correct reference must be `correct`, the incorrect one and
    the untouched workspace `incorrect`. Exits 1 if any fixture fails or is refused.

    PATHS are fixture directories or directories of fixtures (default: fixtures/). A fixture
    whose files do not match its recorded digest or its suite lock, or that breaks the
    contract limits, is refused with a one-line reason.
    """
    fixture_dirs, suites = _targets(paths)
    suite_messages: list[str] = []
    missing: list[SelfCheck] = []
    for root in suites:
        problems, gone = lock_problems(root)
        suite_messages += problems
        lock = read_lock(root) if not problems else None
        for fid in gone:
            entry = lock["fixtures"][fid] if lock else {"path": fid}
            missing.append(SelfCheck(
                path=root / entry["path"], fixture=fid, refused=True,
                digest=entry.get("digest"),
                failures=[UserError(f"fixture '{fid}' is in the suite lock but its directory "
                                    f"{entry['path']} is missing", file=root / LOCK_NAME,
                                    fix=f"restore it, or run `evalq fixtures freeze {root}`"
                                    ).one_line()]))
    checks = _checked_with_progress(fixture_dirs, sandbox, jobs)
    checks += missing
    failed = [c for c in checks if not c.ok]
    if as_json:
        click.echo(dumps([c.to_json() for c in checks], indent=2))
    else:
        _print_table(checks)
        for c in failed:
            for failure in c.failures or []:
                click.echo(f"{c.fixture}: {'refused: ' if c.refused else ''}{failure}")
        click.echo(f"{len(checks)} fixture(s) checked, {len(failed)} failed")
    for message in suite_messages:
        click.echo(f"evalq: suite: {message}", err=True)
    if failed or suite_messages:
        sys.exit(1)


def _print_table(checks: list[SelfCheck]) -> None:
    header = ("fixture", "kind", "toolchain", "initial", "correct", "incorrect", "ok")
    rows = []
    for c in checks:
        verdicts = c.verdicts or {}
        rows.append((c.fixture, c.kind or "-", c.toolchain or "-",
                     verdicts.get("initial") or "-", verdicts.get("correct") or "-",
                     verdicts.get("incorrect") or "-",
                     "ok" if c.ok else ("REFUSED" if c.refused else "FAIL")))
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())


@fixtures.command(short_help="Create a fixture from a template (python, node or make).")
@click.argument("name")
@click.option("--dir", "parent", default="fixtures", show_default=True,
              type=click.Path(file_okay=False), help="Directory the fixture is created in.")
@click.option("--toolchain", type=click.Choice(TOOLCHAINS), default="python",
              show_default=True)
@one_line_errors
def new(name: str, parent: str, toolchain: str) -> None:
    """Create fixture NAME from a template with every part in place, and freeze it.

    The template is a small working task (it passes `evalq fixtures check`); replace the
    task, the tests and both reference solutions with your own, then freeze and check.
    """
    fixture = create_fixture(name, parent, toolchain)
    click.echo(f"{fixture.path}: created fixture '{fixture.id}' ({toolchain}), "
               f"digest {fixture.digest}")
    click.echo(f"next: replace the task, then `evalq fixtures freeze {fixture.path}` (records "
               f"the digests, and in the suite lock beside it) and "
               f"`evalq fixtures check {fixture.path}`")


@fixtures.command(short_help="Record digests in fixtures and the suite lock.")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--suite-id", default=None,
              help="Suite id for a new lock (default: kept from the lock, else evalq-core "
                   "for the shipped suite or the directory's name).")
@click.option("--note", default=None,
              help="Why the fixtures changed: kept in the suite lock's notes for the new "
                   "version (ignored when the suite did not change).")
@one_line_errors
def freeze(paths: tuple[str, ...], suite_id: str | None, note: str | None) -> None:
    """Record the current digests after a deliberate change.

    A PATH that is a fixture has its digests written to its fixture.toml (and the suite
    lock beside it, if any, updated); a directory of fixtures has every fixture re-frozen
    and its suite.lock.json written. A changed suite gets a new suite_version.
    """
    roots = [Path(p) for p in paths] or [default_suite_dir()]
    for root in roots:
        if not root.exists():
            raise UserError("no such file or directory", file=root, fix="check the path")
        if is_fixture_dir(root):
            fixture = freeze_fixture(root)
            click.echo(f"{fixture.path}: frozen {fixture.id} {fixture.digest}")
            beside = enclosing_lock(root)
            if beside is None:
                continue
            lock = lock_fixture(beside[0], fixture, note)
            root = beside[0]
        else:
            lock = freeze_suite(root, suite_id, note)
        click.echo(f"{Path(root).resolve() / LOCK_NAME}: suite {lock['suite_id']} "
                   f"version {lock['suite_version']}, {len(lock['fixtures'])} fixtures, "
                   f"{lock['suite_digest']}")


# ------------------------------------------------------------------ grade
def _resolve_fixture(argument: str):
    path = Path(argument)
    if path.is_dir() and not is_fixture_dir(path):
        raise UserError("not a fixture directory (no fixture.toml)", file=path,
                        fix="give a fixture directory or the id of a fixture in the suite")
    if path.exists():
        return load_fixture(path)
    if "/" not in argument:
        return load_suite(default_suite_dir()).fixture(argument)
    raise UserError("fixture not found", file=path,
                    fix="give a fixture directory or the id of a fixture in the suite")


@click.command(short_help="Grade a workspace against a fixture's hidden tests.")
@click.argument("fixture")
@click.argument("workspace", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the grade result as JSON.")
@sandbox_option
@one_line_errors
def grade(fixture: str, workspace: str, as_json: bool, sandbox: str | None) -> None:
    """Grade WORKSPACE against FIXTURE's hidden tests (a fixture directory or a suite id).

    The workspace is copied, the hidden tests are overlaid and run in the sandbox; prints the
    outcome and every hidden check. Exit status: 0 correct, 1 incorrect or timed out,
    3 grading or infrastructure failure.
    """
    from evalq.graders.grade import grade_workspace

    loaded = _resolve_fixture(fixture)
    result = grade_workspace(loaded, Path(workspace), sandbox=sandbox,
                             label=f"grade-{loaded.id}")
    if as_json:
        data = {"fixture": loaded.id, "digest": loaded.digest, "workspace": str(workspace),
                **result.model_dump(mode="json")}
        click.echo(dumps(data, indent=2))
    else:
        from evalq.plaintext import one_line  # the code under test may have written these

        reason = f": {one_line(result.reason)}" if result.reason else ""
        click.echo(f"{loaded.id}: {result.outcome.value}{reason}")
        for criterion in result.criteria:
            mark = {True: "pass", False: "FAIL", None: "skip"}[criterion.passed]
            click.echo(f"  {mark}  {one_line(criterion.name)}")
            if criterion.passed is False and criterion.evidence:
                for line in criterion.evidence.splitlines()[:8]:
                    click.echo(f"        {one_line(line)}")
        if not result.criteria and result.output_tail:
            click.echo("output:")
            for line in result.output_tail.splitlines()[-30:]:
                click.echo(f"  {line}")
        took = (f"{result.duration_seconds:.2f} s" if result.duration_seconds is not None
                else "unavailable")
        click.echo(f"sandbox {result.sandbox}, {took}, exit code {result.exit_code}")
        weaker = " (in-process: the weaker guarantee)" if result.verdict == "in-process" else ""
        tampered = {True: "TAMPERED", False: "no sign of tampering", None: "not examined"}
        click.echo(f"verdict {result.verdict}{weaker}; {tampered[result.tampered]}")
    outcome = result.outcome.value
    sys.exit(0 if outcome == "correct" else 1 if outcome in ("incorrect", "timed_out") else 3)


__all__ = ["fixtures", "grade"]


def _harbor_commands() -> None:
    """`fixtures import harbor` and `fixtures export harbor` (evalq/cli/harbor_cmd.py)."""
    from evalq.cli.harbor_cmd import environment, export_group, import_group

    fixtures.add_command(import_group)
    fixtures.add_command(export_group)
    fixtures.add_command(environment)


_harbor_commands()
