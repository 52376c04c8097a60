"""`evalq run`, `evalq worker`, `evalq report` (`evalq status` lives in ops_cmd)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evalq.config import load_settings
from evalq.errors import UserError
from evalq.urls import masked
from evalq.ops.failures import common_reasons, failed_trials, run_summary
from evalq.report.compute import compute_report
from evalq.report.transcripts import transcripts_for
from evalq.report.write import write_reports
from evalq.cli.common import (STUDY, read_engine_and_settings, report_dir, require_study,
                              study_id_of)


def write_study_report(engine, settings, study_id: str, out: Path | None = None,
                       formats=("json", "md", "html"), report=None,
                       transcripts: bool | None = None) -> dict[str, Path]:
    """The report files, and beside the HTML one a transcript page per run it links to
    (`transcripts`: None writes them for a study of up to PAGES_BY_DEFAULT runs)."""
    report = report if report is not None else compute_report(engine, study_id)
    folder = out or report_dir(settings, study_id)
    links = (transcripts_for(engine, settings.artifacts_url, report, folder, transcripts)
             if {"html", "md"} & set(formats) else None)
    return write_reports(report, folder, formats, links)


def echo_reports(paths: dict[str, Path]) -> None:
    for path in paths.values():
        click.echo(f"report: {path}")


@click.command()
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--resume", is_flag=True,
              help="Continue a study already started (stopped, cancelled or interrupted): "
                   "lift its cancellation and send every trial without an outcome that no "
                   "worker holds; finished trials are kept, none runs twice.")
@click.option("--concurrency", default=2, show_default=True,
              help="Worker processes of the embedded default.")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="With a broker: wait for the study to finish and write the report "
                   "(--no-wait needs EVALQ_BROKER_URL: the embedded default's workers live "
                   "inside `evalq run`).")
@click.option("--yes", is_flag=True,
              help="Accept the forecast of a study above EVALQ_CONFIRM_ABOVE trials (200).")
@click.option("--limit", type=int, default=None,
              help="Smoke run: only the first N trials of the planned order, as study "
                   "<id>.smokeN (its own status and report; the full study is untouched).")
@click.option("--dry-run", is_flag=True,
              help="Print the run order and the forecast; enqueue nothing, write nothing.")
@click.option("--check", is_flag=True,
              help="With --dry-run: also start each condition's agent once, in the agent "
                   "sandbox with its agent source, on the first fixture, and say whether it "
                   "started (exit status, model calls, stderr); exit 1 when one did not. "
                   "A real run (it may call the model); not graded, nothing stored.")
@click.option("--allow-dirty", is_flag=True,
              help="Freeze agent sources whose repository has uncommitted changes (the lock "
                   "records it).")
def run(manifest: str, resume: bool, concurrency: int, wait: bool, yes: bool,
        limit: int | None, dry_run: bool, check: bool, allow_dirty: bool) -> None:
    """Run a study: freeze, plan, enqueue, and (by default) wait and report.

    With no EVALQ_BROKER_URL the whole study runs on this machine with no server.
    A study stopped part-way (Ctrl-C, SIGTERM, `evalq cancel`, a lost machine) continues with
    `evalq run MANIFEST --resume`.
    """
    from evalq.study.manifest import load_manifest

    settings = load_settings()
    if not wait and settings.embedded:
        raise UserError("--no-wait needs a broker: without EVALQ_BROKER_URL the study runs in "
                        "workers that `evalq run` starts and stops itself", field="--no-wait",
                        fix="drop --no-wait, or set EVALQ_BROKER_URL to a Redis whose "
                            "`evalq worker` processes run the study")
    if check and not dry_run:
        raise UserError("--check starts each agent once before a launch; it goes with "
                        "--dry-run", field="--check", fix="run `evalq run MANIFEST --dry-run "
                        "--check`, then `evalq run MANIFEST`")
    study = load_manifest(manifest)
    if dry_run:  # reads the manifest only: no server, no lock, nothing under EVALQ_HOME
        from evalq.cli.dry_run import print_dry_run

        print_dry_run(study, limit, workers=concurrency if settings.embedded else None,
                      check_settings=settings if check else None)
        return
    from evalq.ops.preflight import check_servers

    check_servers(settings)  # nothing is written before every server answers
    from evalq.queue.launch import prepare_study, settings_for_study
    from evalq.queue.app import app, configure
    from evalq.planning.gate import check_launch, confirm_threshold

    if not resume and not (limit and limit <= confirm_threshold()):  # a small smoke run: no gate
        check_launch(study, yes=yes, workers=concurrency if settings.embedded else None,
                     echo=lambda line: click.echo(line, err=True),
                     confirm=(lambda q: click.confirm(q, err=True)) if sys.stdin.isatty() else None)
    settings = settings_for_study(settings, study)  # visibility timeout covers the longest trial
    configure(app, settings)
    prepared = prepare_study(study, settings, limit, allow_dirty=allow_dirty)
    from evalq.planning.wall_check import record_at_launch

    record_at_launch(prepared, concurrency if settings.embedded else None)  # the report checks it
    waited = _launch_and_wait(app, prepared, settings, resume, concurrency, wait)
    if waited is None:
        return
    _report_and_exit(prepared.engine, settings, prepared.study.id, manifest, *waited)


def _launch_and_wait(app, prepared, settings, resume: bool, concurrency: int,
                     wait: bool) -> tuple[int, int] | None:
    """Send the study's trials, and unless told not to (with a broker) wait for them to settle
    with the embedded workers or the broker's; (finished, planned), or None when not waiting."""
    from evalq.cli.progress import TrialProgress
    from evalq.cli.refusal_notice import RefusalNotice
    from evalq.queue.embedded import LocalWorkers, wait_for_study
    from evalq.queue.launch import launch_study, make_sweeper, send_trials
    from evalq.results.progress import SettledCounter

    engine, lock, study = prepared.engine, prepared.lock, prepared.study
    mode = ("embedded (no server)" if settings.embedded
            else f"broker {masked(settings.broker_url)}")
    workers = LocalWorkers.start(settings, concurrency) if settings.embedded else None
    interrupted = False
    try:
        summary = launch_study(app, prepared, resume)
        click.echo(f"study {study.id}: {summary.planned} trials planned, {summary.sent} sent, "
                   f"{summary.finished} already finished ({mode}); lock "
                   f"{lock['lock_digest'][:23]}…", err=True)
        if workers is None and not wait:
            click.echo(f"follow it with: evalq status {study.id} --watch")
            click.echo(f"report it with: evalq report {study.id}")
            return None
        counter = SettledCounter(engine, study.id)
        progress = TrialProgress("trials", counter)
        sweeper, notice = make_sweeper(app, study, engine, settings), RefusalNotice(engine,
                                                                                    study.id)
        waited = wait_for_study(counter, progress, workers=workers,
                                resend=lambda: send_trials(app, study, engine, resume=True),
                                stall_seconds=max(90.0, settings.lease_seconds * 1.5),
                                sweep=lambda: (sweeper(), notice()),
                                stop_when=_cancelled_and_quiet(engine, study.id))
        progress.close()
        return waited
    except KeyboardInterrupt:  # Ctrl-C: stopped like SIGTERM
        interrupted = True
        raise
    finally:
        if workers is not None:
            # its queued messages stay in the home's broker: no later run's workers may take
            # them (`--resume` lifts the cancellation)
            if workers.terminated or interrupted:
                from evalq.results.store import set_cancelled

                set_cancelled(engine, study.id)
            workers.stop()


def _report_and_exit(engine, settings, study_id: str, manifest: str, finished: int,
                     planned: int) -> None:
    """Write the report, say what evalq itself failed, and exit with a code that tells the
    truth: 3 when cancelled with trials pending, 1 when evalq failed some, else 0."""
    report = compute_report(engine, study_id)
    paths = write_study_report(engine, settings, study_id, report=report)
    for line in run_summary(report, common_reasons(engine, study_id)):
        click.echo(line, err=True)
    echo_reports(paths)
    failed = failed_trials(report)
    if failed:
        click.echo(f"evalq: {failed} trial(s) of study {study_id} ended in an infrastructure or "
                   "grading failure (reasons above); after fixing the cause: `evalq resubmit "
                   f"{study_id} --outcome infrastructure_failure` or `evalq regrade {study_id} "
                   "--outcome grading_failure`", err=True)
    if finished < planned:
        click.echo(f"evalq: study {study_id} was cancelled with {planned - finished} of "
                   f"{planned} trials pending; continue it with `evalq run {manifest} --resume`",
                   err=True)
        sys.exit(3)
    if failed:
        sys.exit(1)


def _cancelled_and_quiet(engine, study_id: str):
    """True once the study is cancelled and none of its agents is still running."""
    from evalq.results.store import count_by, is_cancelled

    return lambda: is_cancelled(engine, study_id) and count_by(engine, study_id).get(
        "running", 0) == 0


#: trials one threads-pool agent worker holds at once unless --concurrency says otherwise
THREADS_CONCURRENCY = 100


def worker_pool(pool: str, queues: list[str], embedded: bool) -> str:
    """prefork or threads. Threads suit the agents queue: an agent trial mostly waits
    (for its sandboxed agent, which waits for the model), and evalq enforces wall time itself,
    so Celery's prefork-only time limits are not missed; grading is CPU-bound and stays in
    processes. `auto` picks threads for an agents-only worker on a broker.

    A results-only worker also runs threads: each task waits for the group commit its payload
    joined (results/batch.py); on Redis, results/drain.py serves that queue instead."""
    threaded = queues == ["agents"] and not embedded or queues == ["results"]
    if pool == "auto":
        return "threads" if threaded else "prefork"
    if pool == "threads" and queues not in (["agents"], ["results"]):
        raise UserError(f"--pool threads serves the agents or the results queue alone, not "
                        f"{','.join(queues)}", field="--pool", fix="run grading in a prefork "
                        "worker of its own: evalq worker --queues grading")
    return pool


@click.command()
@click.option("--queues", "-Q", default="agents,grading,results", show_default=True,
              help="Comma-separated: agents, grading, results.")
@click.option("--pool", "-P", "pool", type=click.Choice(["auto", "prefork", "threads"]),
              default="auto", show_default=True,
              help="threads: many in-flight agent trials in one process (agents queue only); "
                   "auto: threads for `--queues agents` with a broker, else prefork.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=None,
              help=f"Trials at once: prefork processes (default 1) or threads (default "
                   f"{THREADS_CONCURRENCY}).")
@click.option("--hostname", "-n", default=None, help="Worker node name (name@host).")
@click.option("--log-level", "--loglevel", "-l", "loglevel", default="INFO", show_default=True,
              help="The worker's log level (Celery's and evalq's).")
def worker(queues: str, pool: str, concurrency: int | None, hostname: str | None,
           loglevel: str) -> None:
    """Start a Celery worker with evalq's settings (EVALQ_BROKER_URL must name the broker).

    An agents-only worker runs its trials in threads (`--pool threads`, default
    --concurrency 100): each trial's thread waits on its sandboxed agent, leases are renewed
    for the whole process in one UPDATE, and a SIGKILL loses nothing (the unacknowledged
    messages return and the leases expire). SIGTERM waits for the running trials to end
    (Celery's warm shutdown); SIGQUIT stops at once and leaves them to be re-run elsewhere.
    """
    from evalq.queue.app import QUEUES, app, configure

    settings = load_settings()
    wanted = [q.strip() for q in queues.split(",") if q.strip()]
    unknown = [q for q in wanted if q not in QUEUES]
    if unknown:
        raise UserError(f"unknown queue(s) {', '.join(unknown)}", field="--queues",
                        fix=f"use {', '.join(QUEUES)}")
    chosen = worker_pool(pool, wanted, settings.embedded)
    if concurrency is None:
        concurrency = THREADS_CONCURRENCY if chosen == "threads" else 1
    if settings.embedded:
        click.echo("evalq: note: no EVALQ_BROKER_URL; this worker serves the embedded "
                   f"filesystem broker under {settings.home}", err=True)
    # No gossip or mingle: evalq coordinates through the database, and Celery's gossip step
    # fails to restart after a broker reconnect (kombu#582: closing its auto-delete queue on a
    # dead connection raises AttributeError, logged as "Error on restarting Gossip").
    configure(app, settings)
    if wanted == ["results"] and not settings.embedded:  # batches off Redis, not Celery's loop
        from evalq.results.drain import serve_results

        serve_results(app, settings, hostname, loglevel)
        return
    argv = ["worker", "-Q", ",".join(wanted), "-c", str(concurrency), "-P", chosen,
            "-l", loglevel, "-E", "--without-gossip", "--without-mingle"]
    if hostname:
        argv += ["-n", hostname]
    app.worker_main(argv)


@click.command()
@click.argument("study", type=STUDY)
@click.option("--format", "fmt", type=click.Choice(["json", "md", "html", "all"]),
              default="all", show_default=True, help="all = json, md and html.")
@click.option("--out", type=click.Path(), default=None,
              help="A file (with one --format) or a directory; the Markdown and HTML "
                   "reports' transcript pages go beside it, in transcripts/.")
@click.option("--transcripts/--no-transcripts", default=None,
              help="Write a transcript page per run (listed in transcripts.html) or none. "
                   "Default: pages for a study of up to 2,000 runs; a larger one gets them "
                   "only when asked, since they take longer to write than the report.")
def report(study: str, fmt: str, out: str | None, transcripts: bool | None) -> None:
    """Write the study's report from the results database."""
    engine, settings = read_engine_and_settings()
    study_id = require_study(engine, settings, study_id_of(study))
    formats = ("json", "md", "html") if fmt == "all" else (fmt,)
    if out and fmt != "all" and not Path(out).is_dir():
        from evalq.report.write import write_one

        target = Path(out)  # its transcript pages go beside it, linked relative to it
        computed = compute_report(engine, study_id)
        links = (transcripts_for(engine, settings.artifacts_url, computed, target.parent,
                                 transcripts) if fmt in ("md", "html") else None)
        write_one(computed, fmt, target, links)
        click.echo(f"report: {out}")
        return
    paths = write_study_report(engine, settings, study_id, Path(out) if out else None, formats,
                               transcripts=transcripts)
    for path in paths.values():
        click.echo(f"report: {path}")
