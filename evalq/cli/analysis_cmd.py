"""`evalq compare`, `evalq import`, `evalq blind`, `evalq export`: analysis beyond one report."""

from __future__ import annotations

from pathlib import Path

import click

from evalq.errors import UserError
from evalq.cli.common import STUDY, engine_and_settings, study_id_of
from evalq.models import check_study_id


def _study_and_condition(value: str, field: str) -> str:
    """STUDY or STUDY:CONDITION, with the study part checked like every study id."""
    check_study_id(value.split(":", 1)[0], field)
    return value


@click.command()
@click.argument("baseline", callback=lambda _c, _p, v: _study_and_condition(v, "BASELINE"))
@click.argument("candidate", callback=lambda _c, _p, v: _study_and_condition(v, "CANDIDATE"))
@click.option("--out", multiple=True, type=click.Path(dir_okay=False),
              help="Write the comparison here, as its suffix says: .md Markdown, .html a "
                   "self-contained page, anything else JSON. Repeat for several.")
def compare(baseline: str, candidate: str, out: tuple[str, ...]) -> None:
    """Compare two studies (STUDY or STUDY:CONDITION each), e.g. two commits.

    Refuses, naming the differing field, when their pinned inputs differ. Conditions with an
    agent `source` may differ in it (its commit and digest are printed): that is the
    comparison; everything else must be equal.
    """
    from evalq.analysis.condition_metrics import label
    from evalq.analysis.studies import compare_studies
    from evalq.report import fmt
    from evalq.report.comparison import describe_side, write_comparison

    engine, _ = engine_and_settings()
    result = compare_studies(engine, baseline, candidate)
    for path in out:
        write_comparison(result, Path(path))
    comp = result["comparison"]
    click.echo(f"{candidate} - {baseline}: pinned inputs compatible; k={result['k']}")
    for role, name in (("baseline", baseline), ("candidate", candidate)):
        click.echo(f"  {role:9} {name}: {describe_side(comp['pinned'][role])}")
    for warning in result.get("warnings") or []:
        click.echo(f"  warning: {warning}: that side measured a broken agent, not a weak one")
    for metric, m in comp["metrics"].items():
        line = (f"  {label(metric, m.get('k')):8} delta "
                f"{fmt.with_reason(fmt.signed(m['delta']), m['reason'])}"
                f"  95% CI {fmt.interval(m['ci_low'], m['ci_high'], True)}")
        if result["tests"]:
            line += f"  p {fmt.number(m['p_value'], 4)}"
        click.echo(line)
    for path in out:
        click.echo(f"comparison: {path}")


@click.command(name="import")
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--study", "study_id", required=True, help="Id of the study to create.",
              callback=lambda _ctx, _param, value: check_study_id(value, "--study"))
@click.option("--raters", type=click.Path(dir_okay=False), default=None,
              help="raters.jsonl: one row per (run, rater).")
@click.option("--adjudications", type=click.Path(dir_okay=False), default=None,
              help="adjudications.jsonl: the third rater's final values.")
@click.option("--mode", type=click.Choice(["controlled", "workflow-lift", "commit-comparison"]),
              default="controlled", show_default=True)
@click.option("--baseline", default=None,
              help="Baseline condition (default: single_prompt if the results hold it, else the "
                   "first condition in sorted order).")
@click.option("--candidate", default=None,
              help="Candidate condition (default: every other condition, each compared with "
                   "the baseline; Holm over all their primary hypotheses).")
@click.option("--suite-id", default=None, help="Task-suite identifier to record.")
@click.option("--format", "fmt_", type=click.Choice(["results", "trials"]), default="results",
              show_default=True,
              help="results: adjudicated results.jsonl rows (with --raters, --adjudications); "
                   "trials: skill-activation trial rows (case_id, condition, skill_commit, "
                   "model, trial, skill_loaded, criteria, ...), one model per file.")
def import_(results: str, study_id: str, raters: str | None, adjudications: str | None,
            mode: str, baseline: str | None, candidate: str | None,
            suite_id: str | None, fmt_: str) -> None:
    """Import adjudicated results.jsonl rows, or skill-activation trial rows, as a study.

    One transaction: a bad row (each is named with its line) leaves the database unchanged.
    Importing the same files with the same options again is a no-op; other inputs under an
    existing study id are refused. Raters who disagree need an adjudication, and nobody may
    rate a run they executed (its executor_id).
    """
    from evalq.analysis.adjudicated_import import import_results
    from evalq.analysis.trial_import import import_trials
    from evalq.config import load_settings
    from evalq.results.store import removed_if_failed

    settings = load_settings()
    if fmt_ == "trials" and (raters or adjudications):
        raise UserError("trial rows carry no rater scores", field="--raters",
                        fix="leave out --raters and --adjudications with --format trials")
    with removed_if_failed(settings.database_url):  # a refused import leaves no new database
        if fmt_ == "trials":
            summary = import_trials(settings.database_url, results, study_id)
        else:
            summary = import_results(settings.database_url, results, study_id,
                                     raters_path=raters, adjudications_path=adjudications,
                                     mode=mode, baseline=baseline, candidate=candidate,
                                     suite_id=suite_id)
    if summary.unchanged:
        click.echo(f"study {summary.study_id}: already imported from these files; unchanged "
                   f"({summary.runs} runs)")
        return
    click.echo(f"study {summary.study_id}: imported {summary.runs} runs of {summary.tasks} "
               f"tasks ({', '.join(summary.conditions)}), {summary.ratings} ratings, "
               f"{summary.adjudications} adjudications; report with "
               f"`evalq report {summary.study_id}`")
    if summary.under_two_raters:
        click.echo(f"warning: ratings incomplete: {summary.under_two_raters} of {summary.runs} "
                   "runs have fewer than two raters (each run needs two independent raters); "
                   "the report's claims are exploratory until they are scored")


@click.command()
@click.argument("study", type=STUDY)
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="The folder that goes to raters: packets/, RUBRIC.md, raters.template.jsonl.")
@click.option("--key", "key_path", type=click.Path(dir_okay=False), default=None,
              help="Where the unblinding key goes (default: OUT.key.jsonl beside OUT; never "
                   "inside OUT).")
@click.option("--rater", "raters", multiple=True,
              help="A rater of the pool (repeat; at least two): each packet is assigned to two "
                   "of them, never to the person who executed its run.")
def blind(study: str, out: str, key_path: str | None, raters: tuple[str, ...]) -> None:
    """Write blinded rater packets (condition labels stripped), a rubric, and apart, their key."""
    from evalq.analysis.blind import write_packets
    from evalq.analysis.runs import study_runs
    from evalq.artifacts import open_store

    engine, settings = engine_and_settings()
    store = open_store(settings.artifacts_url)

    def fetch(ref: str):
        return store.get(ref) if store.exists(ref) else None

    row, runs = study_runs(engine, study_id_of(study))
    result = write_packets(row, runs, Path(out), fetch, Path(key_path) if key_path else None,
                           list(raters) or None)
    click.echo(f"{result['packets']} packets: {result['packets_dir']}")
    if result["assigned"]:
        click.echo(f"two raters per packet (none scores a run they executed): "
                   f"{Path(out) / 'raters.template.jsonl'}")
    click.echo(f"rubric (fill in the decision rules before scoring): {result['rubric']}")
    click.echo(f"key (keep it from the raters): {result['key']}")


@click.command()
@click.argument("study", type=STUDY)
@click.option("--format", "fmt_", type=click.Choice(["jsonl", "results", "evidence"]),
              required=True,
              help="jsonl: skill-activation trial rows; results: adjudicated results.jsonl rows; "
                   "evidence: the adoption evidence record of each trial (a study run from a "
                   "task manifest, or a stage of one).")
@click.option("--out", type=click.Path(dir_okay=False), required=True)
def export(study: str, fmt_: str, out: str) -> None:
    """Export per-trial rows of a study."""
    from evalq.analysis.export import activation_row, adjudicated_row
    from evalq.analysis.jsonl import write_jsonl
    from evalq.analysis.runs import study_runs

    engine, _ = engine_and_settings()
    row, runs = study_runs(engine, study_id_of(study))
    if fmt_ == "evidence":
        from evalq.analysis.export import evidence_rows

        rows = evidence_rows(engine, row, runs)  # refused before anything is written
        if not runs:
            raise UserError(f"study '{row.id}' has no trials", fix="run it first")
        click.echo(f"{write_jsonl(rows, out)} rows: {out}")
        return
    if fmt_ == "jsonl":
        from evalq.analysis.tracks import task_labels

        labels = task_labels(row)

        def make(study, run):
            return activation_row(study, run, labels)
    else:
        make = adjudicated_row
    if not runs:
        raise UserError(f"study '{row.id}' has no trials", fix="run or import it first")
    n = write_jsonl((make(row, r) for r in runs), out)
    click.echo(f"{n} rows: {out}")


COMMANDS = (compare, import_, blind, export)
