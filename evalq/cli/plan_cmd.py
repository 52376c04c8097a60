"""`evalq plan`: how many tasks and repetitions a study needs, and what it will cost, from a pilot."""

from __future__ import annotations


import click

from evalq.report.json_text import dumps
from evalq.errors import UserError


def _counts(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UserError(f"'{text}' is not a list of positive whole numbers", field=flag,
                        fix=f"give e.g. {flag} 10,20,30")
    return values


@click.command()
@click.argument("study", type=click.Path(dir_okay=False))
@click.option("--pilot", required=True, help="A finished (or imported) study: its id or manifest.")
@click.option("--effect", default=0.10, show_default=True, type=float,
              help="Difference in the primary metric to detect.")
@click.option("--alpha", default=0.05, show_default=True, type=float)
@click.option("--power", "target_power", default=0.8, show_default=True, type=float)
@click.option("--workers", default=None, type=int, help="Agent workers, for the wall-time forecast.")
@click.option("--tasks", "tasks", default=None, help="Task counts to try, e.g. 10,20,50.")
@click.option("--repetitions", "reps", default=None, help="Repetitions to try, e.g. 1,3,5.")
@click.option("--simulations", default=1000, show_default=True, type=int)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--baseline", default=None, help="Pilot condition to use as the baseline.")
@click.option("--candidate", default=None, help="Pilot condition to use as the candidate.")
@click.option("--min-tasks", default=30, show_default=True, type=int,
              help="Fewest tasks a recommended design may have (30 by the rated-study "
                   "protocol; lower only on purpose).")
@click.option("--min-repetitions", default=3, show_default=True, type=int,
              help="Fewest runs per (task, condition) a recommended design may have (3 by the "
                   "rated-study protocol).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--write-lock", is_flag=True, help="Record the plan in the study lock.")
@click.option("--force", is_flag=True,
              help="With --write-lock: record a plan for a study that has already run (marked so).")
def plan(study: str, pilot: str, effect: float, alpha: float, target_power: float,
         workers: int | None, tasks: str | None, reps: str | None, simulations: int, seed: int,
         baseline: str | None, candidate: str | None, min_tasks: int, min_repetitions: int,
         as_json: bool, write_lock: bool, force: bool) -> None:
    """Simulate power and CI width over a grid of designs from a pilot, and forecast cost and time.

    Recommends the cheapest design meeting the power target on every primary metric (each at
    alpha / m for Holm over m primary hypotheses) and the protocol's floors."""
    from evalq.study.manifest import load_manifest
    from evalq.planning import Floors, PlanTarget, attempts_recorded, load_pilot, make_plan, write_planning
    from evalq.planning.lock import preregistration
    from evalq.planning.render import plan_text
    from evalq.cli.common import engine_and_settings, study_id_of

    if workers is not None and workers < 1:
        raise UserError(f"--workers {workers} must be at least 1", field="--workers",
                        fix="give the number of agent worker processes, e.g. --workers 8")
    if simulations < 100:
        raise UserError(f"--simulations {simulations} is too few to estimate power",
                        field="--simulations", fix="use at least 100 (1000 by default)")
    floors = Floors(min_tasks, min_repetitions)
    floors.check()
    manifest = load_manifest(study)
    engine, _ = engine_and_settings()
    attempts = attempts_recorded(engine, manifest.id) if write_lock else 0
    if write_lock:
        preregistration(manifest, attempts, force)  # refuse before simulating, not after
    pilot_data = load_pilot(engine, study_id_of(pilot))
    from evalq.cli.progress import Tally, TrialProgress

    import time

    designs = Tally()
    progress = TrialProgress("designs simulated", designs)
    last = [time.monotonic()]

    def on_design(done: int, total: int) -> None:  # one design at a time: its own duration
        now = time.monotonic()
        designs.add("simulated", now - last[0])
        last[0] = now
        progress(done, total)

    try:
        result = make_plan(manifest, pilot_data, PlanTarget(effect, alpha, target_power),
                           workers=workers, task_counts=_counts(tasks, "--tasks"),
                           repetitions=_counts(reps, "--repetitions"), simulations=simulations,
                           seed=seed, baseline=baseline, candidate=candidate, floors=floors,
                           on_design=on_design)
    finally:
        progress.close()
    lock_path = None
    if write_lock:
        from evalq.results.store import record_planning

        # counted again: a study whose runs began while the designs were simulated is not
        # planned before them
        attempts = attempts_recorded(engine, manifest.id)
        lock, lock_path = write_planning(manifest, result, attempts=attempts, force=force)
        result["lock"] = str(lock_path)
        if record_planning(engine, manifest.id, lock["lock_digest"], lock["planning"]):
            result["recorded_in_database"] = True
    if as_json:
        click.echo(dumps(result, indent=2))
        return
    click.echo(plan_text(result))
    if lock_path is not None:
        click.echo(f"lock: planning section written to {lock_path}")
    if result.get("recorded_in_database"):
        click.echo("results database: the launched study's stored lock has it too (its "
                   "report shows it)")
