"""`evalq run --dry-run`: the run order and the forecast, with nothing frozen, sent or stored;
with `--check`, each condition's agent started once first (evalq/workers/agent_check.py)."""

from __future__ import annotations

import sys
from typing import Optional

import click

from evalq.analysis.agent_errors import describe_exit
from evalq.plaintext import one_line
from evalq.planning.forecast import RunDistributions, forecast, forecast_lines
from evalq.planning.gate import launch_forecast
from evalq.planning.lock import read_planning
from evalq.queue.launch import planned_rows, smoke_study
from evalq.study.lock import verify_lock


def _forecast(study, trials: int, workers: Optional[int]) -> list[str]:
    """The lock's forecast for `trials` trials (a smoke run's count), as `evalq run` shows it."""
    planning = read_planning(study)
    if not planning or "run_distributions" not in planning:
        return launch_forecast(study, workers)[1:]
    if workers is None:
        workers = (planning.get("forecast") or {}).get("workers")
    dists = RunDistributions.from_dict(planning["run_distributions"])
    return forecast_lines(forecast(dists, trials, workers))


def _indent(line: str) -> str:
    """A stderr line's own indentation (a traceback's), kept but bounded."""
    return " " * min(len(line) - len(line.lstrip(" ")), 12)


def _check_lines(check) -> list[str]:
    """One condition's check: started or not, its exit, model calls and stderr (the agent's
    text, each line made safe for a terminal)."""
    calls = "unavailable" if check.model_calls is None else check.model_calls
    source = ""
    if check.source_digest:
        source = (f"; source commit {check.source_commit}" if check.source_commit
                  else "; source") + f" ({check.source_digest})"
    if check.exit_code is None and check.problem:  # evalq could not run it
        head = f"  {check.condition}: FAILED: {one_line(check.problem, 400)}{source}"
    else:
        verdict = "started" + (" (stopped at its limit)" if check.timed_out else "") \
            if check.started else f"FAILED: {check.problem}"
        head = (f"  {check.condition}: {verdict}; {describe_exit(check.exit_code)}, model calls "
                f"{calls}, stop reason {one_line(check.stop_reason, 80) or 'unavailable'}, "
                f"{check.duration_seconds} s{source}")
    lines = [head]
    if not check.started and check.stderr_tail:
        lines.append("    stderr (last lines):")
        lines += [f"      {_indent(line)}{one_line(line, 300)}"
                  for line in check.stderr_tail.splitlines()]
    return lines


def run_checks(study, settings) -> list[str]:
    """Start each condition's agent once; print how each went; the conditions that failed."""
    from evalq.workers.agent_check import check_agents

    click.echo(f"agent check: each condition's agent started once on fixture "
               f"{study.fixtures[0].id} in the agent sandbox {settings.agent_sandbox} "
               "(not graded, nothing kept)")
    failed = []
    for check in check_agents(study, settings):
        for line in _check_lines(check):
            click.echo(line)
        if not check.started:
            failed.append(check.condition)
    return failed


def print_dry_run(study, limit: Optional[int], workers: Optional[int],
                  check_settings=None) -> None:
    """Print order and forecast; the lock is only checked (verify_lock reads, never writes).
    With `check_settings` (the worker settings), also start each condition's agent once, and
    exit 1 when one did not run cleanly."""
    frozen = verify_lock(study) is not None
    total = len(planned_rows(study))
    shown = smoke_study(study, limit) if limit else study
    rows = planned_rows(shown, limit)
    click.echo(f"dry run of study {shown.id}: {len(rows)} trials"
               + (f" (smoke run: the first {len(rows)} of {total} in the planned order)"
                  if limit else "")
               + ("" if frozen else "; not frozen yet (`evalq run` would freeze it)"))
    click.echo(f"{'order':>6} {'block':>5}  trial")
    for row in rows:
        click.echo(f"{row.order_index:>6} {row.block:>5}  {row.trial_id}")
    for line in _forecast(study, len(rows), workers):
        click.echo(line)
    failed = run_checks(study, check_settings) if check_settings is not None else []
    click.echo("nothing was enqueued or written")
    if failed:
        click.echo(f"evalq: the agent of condition(s) {', '.join(failed)} did not run cleanly "
                   "(above); fix it before launching the study", err=True)
        sys.exit(1)
