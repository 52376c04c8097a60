"""`evalq run --dry-run`: the run order and the forecast, with nothing frozen, sent or stored."""

from __future__ import annotations

from typing import Optional

import click

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


def print_dry_run(study, limit: Optional[int], workers: Optional[int]) -> None:
    """Print order and forecast; the lock is only checked (verify_lock reads, never writes)."""
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
    click.echo("nothing was enqueued or written")
