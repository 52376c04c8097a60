"""`evalq status`, `resubmit`, `regrade`, `cancel`, `flower`: operating a study from the DB."""

from __future__ import annotations

import os
import sys
import time

import click

from evalq.report.json_text import dumps
from evalq.errors import UserError
from evalq.urls import masked
from evalq.cli.common import (STUDY, engine_and_settings, read_engine_and_settings,
                              require_study, study_id_of)


def _app(settings):
    from evalq.queue.app import app, configure

    return configure(app, settings)


class _AttemptProgress:
    """(settled, total) over the attempts in `keys`: settled once their regrade count passes the
    recorded one (regrade) or they have an outcome (new attempts, recorded as -1); with a live
    tally per outcome and the settled attempts' durations, for the progress bar."""

    def __init__(self, engine, study_id: str, keys: dict[tuple[str, int], int]):
        self.engine, self.study_id, self.keys = engine, study_id, keys
        self.tally: dict[str, int] = {}
        self.durations: list[float] = []

    def __call__(self) -> tuple[int, int]:
        from evalq.results.store import attempts_of

        rows = {(a.trial_id, a.attempt): a for a in attempts_of(self.engine, self.study_id)}
        tally: dict[str, int] = {}
        durations: list[float] = []
        for key, before in self.keys.items():
            row = rows.get(key)
            if row is None or row.outcome is None or not (before < 0 or row.regrades > before):
                continue
            tally[row.outcome] = tally.get(row.outcome, 0) + 1
            start = row.started_at if before < 0 else (row.grade or {}).get("started_at")
            end = row.finished_at if before < 0 else row.graded_at
            if start is not None and end is not None:
                durations.append(end - start)
        self.tally, self.durations = tally, durations
        return sum(tally.values()), len(self.keys)


def _drain_embedded(settings, engine, study_id: str, keys: dict[tuple[str, int], int],
                    what: str) -> None:
    """With no broker, run local workers until the sent attempts settle, then rewrite the report."""
    if not settings.embedded or not keys:
        return
    from evalq.queue.embedded import LocalWorkers, wait_for_study
    from evalq.cli.progress import TrialProgress
    from evalq.cli.run_cmd import echo_reports, write_study_report

    workers = LocalWorkers.start(settings)
    counter = _AttemptProgress(engine, study_id, keys)
    progress = TrialProgress(what, counter)
    try:
        wait_for_study(counter, progress, workers=workers)
    finally:
        progress.close()
        workers.stop()
    echo_reports(write_study_report(engine, settings, study_id))  # every format, not only JSON


@click.command()
@click.argument("study", type=STUDY)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable counts.")
@click.option("--watch", is_flag=True, help="Redraw until every planned trial has finished.")
@click.option("--interval", default=2.0, show_default=True, help="Seconds between redraws.")
def status(study: str, as_json: bool, watch: bool, interval: float) -> None:
    """Planned trials by state, outcome and worker host, from the database (they add up)."""
    from evalq.ops.failures import common_reasons, reason_lines
    from evalq.ops.status import AgentErrorsEvery, render, study_status, with_refusals
    from evalq.ops.status_watch import StatusWatch

    engine, settings = read_engine_and_settings()
    study_id = require_study(engine, settings, study_id_of(study))
    # once: SQL aggregates; watching: the first tick reads the study, later ones what changed
    tick = StatusWatch(engine, study_id).tick if watch else lambda: study_status(engine, study_id)
    agent_errors = AgentErrorsEvery(engine)  # a watch counts them every 30 s, not every tick
    while True:
        current = agent_errors.add(with_refusals(engine, tick()))
        reasons = common_reasons(engine, study_id)
        text = "\n".join([render(current), *(["  failures:"] if reasons else []),
                          *reason_lines(reasons, "    ")])
        if as_json:
            data = dict(current.as_dict(), failure_reasons=[
                {"outcome": o, "reason": r, "attempts": n} for o, r, n in reasons])
            click.echo(dumps(data, sort_keys=True))
        elif watch and sys.stdout.isatty():
            click.echo("\x1b[2J\x1b[H" + text)
        else:
            click.echo(text)
        sys.stdout.flush()
        if not watch or current.finished >= current.planned or current.cancelled_flag and \
                current.by_state["running"] == 0:
            return
        time.sleep(max(0.2, interval))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable rows.")
def studies(as_json: bool) -> None:
    """Studies in the results database with planned and finished trial counts."""
    from evalq.results.tallies import studies_overview

    engine, settings = read_engine_and_settings()
    rows = studies_overview(engine)
    if as_json:
        click.echo(dumps(rows, sort_keys=True))
        return
    if not rows:
        click.echo(f"no studies yet in {masked(settings.database_url)}: start one with "
                   "`evalq run study.toml`")
        return
    width = max(len(r["study"]) for r in rows)
    for r in rows:
        notes = [n for n in ("cancelled" if r["cancelled"] else "",
                             f"smoke run of {r['smoke_of']}" if r["smoke_of"] else "") if n]
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(r["created_at"]))
        click.echo(f"{r['study']:<{width}}  {r['finished']:>7}/{r['planned']:<7} finished  "
                   f"{when} UTC" + (f"  ({', '.join(notes)})" if notes else ""))


def resubmit_effect(outcome: str) -> str:
    """What a resubmission changes in the results under the counting rule (the first valid
    attempt counts, else the latest failure)."""
    if outcome == "timed_out":
        return ("a timed-out run is a valid result and stays counted: the new attempts are "
                "extra rows reported beside it and replace nothing (only infrastructure and "
                "grading failures are replaced by a re-run)")
    return (f"each new attempt replaces its trial's {outcome} in the results once it ends "
            "correct, incorrect or timed_out; the earlier attempt stays a row")


@click.command()
@click.argument("study", type=STUDY)
@click.option("--outcome", required=True,
              type=click.Choice(["infrastructure_failure", "grading_failure", "timed_out"]),
              help="Resubmit trials whose latest attempt ended so.")
def resubmit(study: str, outcome: str) -> None:
    """Enqueue new attempts for failed trials; every earlier attempt stays a row.

    What counts for a trial is its first valid attempt (correct, incorrect or timed_out), else
    its latest failure. So a new attempt replaces an infrastructure or grading failure, but
    never a timed-out run: a timeout is the agent's result and stays counted; the new attempt
    is only reported beside it."""
    from evalq.ops.actions import resubmit as do_resubmit

    from evalq.results.store import attempts_of

    engine, settings = engine_and_settings()
    study_id = study_id_of(study)
    before = {(a.trial_id, a.attempt) for a in attempts_of(engine, study_id)}
    summary = do_resubmit(_app(settings), engine, settings, study_id, outcome)
    click.echo(f"study {summary.study}: {summary.sent} trial(s) with outcome {outcome} "
               "resubmitted as new attempts")
    click.echo(f"counting: {resubmit_effect(outcome)}")
    new = {(a.trial_id, a.attempt): -1 for a in attempts_of(engine, study_id)
           if (a.trial_id, a.attempt) not in before}
    _drain_embedded(settings, engine, study_id, new, "resubmitted attempts")


@click.command()
@click.argument("study", type=STUDY)
@click.option("--outcome", default="grading_failure", show_default=True,
              type=click.Choice(["grading_failure", "correct", "incorrect"]))
def regrade(study: str, outcome: str) -> None:
    """Grade stored final workspaces again without re-running the agent."""
    from evalq.ops.actions import regrade as do_regrade

    from evalq.results.store import attempts_of

    engine, settings = engine_and_settings()
    study_id = study_id_of(study)
    chosen = {(a.trial_id, a.attempt): a.regrades for a in attempts_of(engine, study_id)
              if a.outcome == outcome and a.artifacts and a.artifacts.get("workspace")}
    summary = do_regrade(_app(settings), engine, study_id, outcome)
    click.echo(f"study {summary.study}: {summary.sent} attempt(s) with outcome {outcome} sent "
               f"to grading" + (f"; {summary.note}" if summary.note else ""))
    _drain_embedded(settings, engine, study_id, chosen, "regrades")


@click.command()
@click.argument("study", type=STUDY)
def cancel(study: str) -> None:
    """Revoke queued attempts and stop running ones; finished attempts are kept."""
    from evalq.ops.actions import cancel as do_cancel

    engine, _ = engine_and_settings()
    summary = do_cancel(engine, study_id_of(study))
    click.echo(f"study {summary.study} cancelled: {summary.note}; resume with "
               "`evalq run <manifest> --resume`")


@click.command()
@click.option("--port", default=5555, show_default=True)
@click.option("--address", default="127.0.0.1", show_default=True)
@click.option("--unauthenticated-api", is_flag=True,
              help="Open Flower's HTTP API without auth (only on a trusted loopback address).")
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
def flower(port: int, address: str, unauthenticated_api: bool,
           flower_args: tuple[str, ...]) -> None:
    """Flower against evalq's broker: the three queues and every worker (celery flower)."""
    from evalq.config import load_settings

    settings = load_settings()
    if settings.embedded:
        raise UserError("Flower needs a broker", field="EVALQ_BROKER_URL",
                        fix="set EVALQ_BROKER_URL to the Redis the workers use")
    argv = [sys.executable, "-m", "celery", "-A", "evalq.ops.flower_app", "flower",
            f"--port={port}", f"--address={address}",
            *flower_args]
    if unauthenticated_api:
        os.environ["FLOWER_UNAUTHENTICATED_API"] = "true"
    sys.stdout.flush()
    os.execv(sys.executable, argv)
