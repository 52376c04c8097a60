"""`evalq show TRIAL` and `evalq artifact TRIAL NAME`: one run, from the database and the store.

The daily loop after a study: see why a trial ended as it did (outcome, reason, failed
checks, the agent's exit status, model calls and stderr, its diff), then fetch any stored
artifact. Everything shown that the agent wrote reaches the terminal with its control
characters made visible (evalq.plaintext.terminal_text), never acting on the terminal.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

import click

from evalq.errors import UserError
from evalq.plaintext import one_line, terminal_text
from evalq.urls import masked

#: what `show` prints of the diff and of each failed check's evidence before pointing at the rest
DIFF_LINES = 120
EVIDENCE_CHARS = 300
#: the longest line shown of a diff or of stderr, and the most of a diff --json carries
LINE_CHARS = 400
JSON_DIFF_CHARS = 256 * 1024
#: artifacts that are bytes, not text: written only to a file or a pipe
BINARY = frozenset({"workspace", "first_check_workspace"})


def trial_attempts(engine, settings, trial_id: str) -> tuple[Any, list[Any]]:
    """The trial's row and its attempts (oldest first); one line naming the database read
    when it has no such trial."""
    from sqlmodel import Session, select

    from evalq.results.store import AttemptRow, TrialRow

    with Session(engine) as session:
        trial = session.get(TrialRow, trial_id)
        attempts = [] if trial is None else list(session.exec(
            select(AttemptRow).where(AttemptRow.trial_id == trial_id)
            .order_by(AttemptRow.attempt)).all())
    if trial is None:
        raise UserError(f"no trial '{one_line(trial_id, 200)}' in the results database "
                        f"{masked(settings.database_url)}", field="TRIAL",
                        fix="give a trial id as `evalq export STUDY` or the report's runs "
                            "table show it (STUDY/TASK/CONDITION/rN)")
    return trial, attempts


def pick_attempt(trial_id: str, attempts: list[Any], number: Optional[int]) -> Any:
    """The attempt numbered `number`, else the latest one."""
    if not attempts:
        raise UserError(f"trial '{trial_id}' has no attempt yet", field="TRIAL",
                        fix="wait until it is sent (`evalq status STUDY`)")
    if number is None:
        return attempts[-1]
    for attempt in attempts:
        if attempt.attempt == number:
            return attempt
    raise UserError(f"trial '{trial_id}' has no attempt {number}", field="--attempt",
                    fix=f"use one of {', '.join(str(a.attempt) for a in attempts)}")


def counted_attempt(trial, attempts: list[Any]) -> Optional[int]:
    """The number of the attempt the results count for this trial (first valid one)."""
    from evalq.report.attempts import TrialView

    view = TrialView(trial.id, trial.fixture_id, trial.condition, trial.repetition,
                     trial.order_index, attempts)
    return view.counted.attempt if view.counted is not None else None


def _read(store, ref: Optional[str]) -> tuple[Optional[bytes], Optional[str]]:
    """(bytes, None), or (None, why not)."""
    if not ref:
        return None, "not stored"
    try:
        return store.get(ref), None
    except Exception as exc:  # noqa: BLE001 - a missing or corrupt blob is shown, not fatal
        return None, one_line(str(exc), 200)


def trial_details(trial, attempts: list[Any], attempt, store) -> dict[str, Any]:
    """What `show` prints, as plain data (its --json)."""
    from evalq.analysis.agent_errors import agent_error, stderr_tail
    from evalq.criteria.review import resolved

    metrics = attempt.metrics or {}
    tail = metrics.get("stderr_tail")
    if tail is None and (attempt.artifacts or {}).get("stderr"):  # a run from before the tail
        stored, _ = _read(store, attempt.artifacts["stderr"])  # was kept in its metrics
        tail = stderr_tail(stored) if stored else None
    criteria = attempt.criteria or []
    failed = [c for c in criteria if isinstance(c, dict) and c.get("passed") is False]
    diff, diff_missing = _read(store, (attempt.artifacts or {}).get("diff"))
    return {
        "trial": trial.id, "study": trial.study_id, "task": trial.fixture_id,
        "condition": trial.condition, "repetition": trial.repetition,
        "attempt": attempt.attempt, "attempts": [a.attempt for a in attempts],
        "counted_attempt": counted_attempt(trial, attempts),
        "state": attempt.state, "outcome": attempt.outcome, "reason": attempt.reason,
        "exit_code": metrics.get("exit_code"), "model_calls": metrics.get("model_calls"),
        "stop_reason": metrics.get("stop_reason"),
        "agent_error": agent_error(metrics, attempt.outcome),
        "stderr_tail": tail,
        "checks": {"total": len(criteria), "failed": len(failed)},
        "criteria": resolved(getattr(attempt, "criterion_results", None), attempt.grade),
        "failed_checks": [{"name": c.get("name"), "evidence": c.get("evidence") or ""}
                          for c in failed],
        "diff": None if diff is None else diff.decode("utf-8", "replace")[:JSON_DIFF_CHARS],
        "diff_truncated": diff is not None and len(diff) > JSON_DIFF_CHARS,
        "diff_unavailable": diff_missing,
        "worker_host": attempt.worker_host,
        "times": {k: getattr(attempt, k) for k in ("enqueued_at", "started_at",
                                                     "agent_finished_at", "graded_at",
                                                     "finished_at")},
        "artifacts": sorted(attempt.artifacts or {}),
        "session": {k: getattr(attempt, k, None) for k in (
            "first_check_result", "first_check_reason", "eventual_result", "session_checks")},
    }


def _value(value: Any, unit: str = "") -> str:
    return "unavailable" if value is None else f"{value}{unit}"


def _seconds(times: dict[str, Any], start: str, end: str) -> str:
    a, b = times.get(start), times.get(end)
    return "unavailable" if a is None or b is None else f"{b - a:.1f} s"


def _lines(text: str) -> list[str]:
    """Lines split at newlines only: a carriage return or form feed the agent wrote stays in
    its line, to be shown as an escape."""
    return text.rstrip("\n").split("\n") if text.strip("\n") else []


def _bounded(line: str) -> str:
    """One line of agent text for the terminal: escapes visible, at most LINE_CHARS long."""
    return terminal_text(line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + "…")


def detail_lines(d: dict[str, Any], fetch_hint: str) -> list[str]:
    """The details as terminal lines; every text the agent could have written goes through
    one_line or terminal_text, bounded."""
    safe = terminal_text
    others = [str(n) for n in d["attempts"] if n != d["attempt"]]
    counted = d["counted_attempt"]
    lines = [f"trial {safe(d['trial'])}",
             f"  study {safe(d['study'])}, task {safe(d['task'])}, condition "
             f"{safe(d['condition'])}, repetition {d['repetition']}",
             f"  attempt {d['attempt']} of {len(d['attempts'])}"
             + (" (the one the results count)" if counted == d["attempt"] else
                f" (the results count attempt {counted})" if counted else
                " (no attempt has an outcome yet)")
             + (f"; others: --attempt {', '.join(others)}" if others else ""),
             f"outcome: {d['outcome'] or 'none yet (' + d['state'] + ')'}"
             + (f": {one_line(d['reason'], 400)}" if d["reason"] else ""),
             f"agent: exit status {_value(d['exit_code'])}, model calls "
             f"{_value(d['model_calls'])}, stop reason "
             f"{one_line(d['stop_reason'], 200) or 'unavailable'}"
             + (f"; agent error: it {d['agent_error']}" if d["agent_error"] else ""),
             f"times: queued {_seconds(d['times'], 'enqueued_at', 'started_at')}, agent "
             f"{_seconds(d['times'], 'started_at', 'agent_finished_at')}, grading "
             f"{_seconds(d['times'], 'agent_finished_at', 'graded_at')}"
             + (f"; worker host {one_line(d['worker_host'], 100)}" if d["worker_host"] else "")]
    checks = d["checks"]
    if checks["total"]:
        lines.append(f"failed checks: {checks['failed']} of {checks['total']}")
        lines += [f"  - {one_line(c['name'], 200)}"
                  + (f": {one_line(c['evidence'], EVIDENCE_CHARS)}" if c["evidence"] else "")
                  for c in d["failed_checks"]]
    else:
        lines.append("failed checks: unavailable (no per-check verdicts recorded)")
    lines += criterion_lines(d.get("criteria"))
    lines += session_lines(d.get("session") or {})
    if d["diff"] is None:
        lines.append(f"diff: unavailable ({d['diff_unavailable']})")
    else:
        diff = _lines(d["diff"])
        lines.append(f"diff: {len(diff)} lines" if diff else "diff: empty (no file changed)")
        lines += ["  " + _bounded(line) for line in diff[:DIFF_LINES]]
        if len(diff) > DIFF_LINES:
            lines.append(f"  … {len(diff) - DIFF_LINES} more lines: {fetch_hint} diff")
    if d["stderr_tail"]:
        lines.append("agent stderr (last lines):")
        lines += ["  " + _bounded(line) for line in _lines(d["stderr_tail"])]
    else:
        lines.append("agent stderr: empty or unavailable")
    if d["artifacts"]:
        lines.append("artifacts:")
        width = max(len(n) for n in d["artifacts"])
        lines += [f"  {safe(name):<{width}}  {fetch_hint} {safe(name)}"
                  + ("  (a .tar.gz: add -o FILE)" if name in BINARY else "")
                  for name in d["artifacts"]]
    else:
        lines.append("artifacts: none stored")
    return lines


def session_lines(session: dict[str, Any]) -> list[str]:
    """The session's first visible check and its eventual result, apart (none when the
    fixture declares no visible check)."""
    checks = session.get("session_checks")
    if not isinstance(checks, dict):
        return []
    first = session.get("first_check_result") or "unavailable"
    why = session.get("first_check_reason")
    lines = [f"first visible check: {first}" + (f" ({one_line(why, 400)})" if why else "")
             + f"; eventual: {session.get('eventual_result') or 'unavailable'}"]
    cost = checks.get("repair_cost")
    if isinstance(cost, dict):
        lines.append(f"  repair: {_value(cost.get('repair_check_runs'))} check run(s) after the "
                     f"first, {_value(cost.get('elapsed_seconds'), ' s')} from the first check "
                     f"to the end, commands {_value(cost.get('commands_after_first_check'))}, "
                     f"tokens in/out {_value(cost.get('input_tokens_after_first_check'))}/"
                     f"{_value(cost.get('output_tokens_after_first_check'))}, human "
                     f"interventions {_value(cost.get('human_interventions'))}")
    return lines


def criterion_lines(results: Optional[list[dict[str, Any]]]) -> list[str]:
    """One line per named criterion: its verdict and evidence (none without named criteria)."""
    if not results:
        return []
    met = sum(1 for r in results if r.get("passed") is True)
    lines = [f"criteria: {met} of {len(results)} met"]
    for r in results:
        verdict = {True: "met", False: "not met"}.get(r.get("passed"), "unresolved")
        tags = str(r.get("kind")) + (", required" if r.get("required") else "")
        lines.append(f"  - {one_line(str(r.get('name')), 120)} [{tags}]: {verdict}; "
                     f"{one_line(str(r.get('evidence') or ''), EVIDENCE_CHARS)}")
    return lines


def _hint(trial_id: str, attempt: int, latest: int) -> str:
    quoted = trial_id if all(ch.isalnum() or ch in "._-/" for ch in trial_id) else \
        json.dumps(trial_id)
    return f"evalq artifact {quoted}" + ("" if attempt == latest else f" --attempt {attempt}")


def _opened(trial_id: str, attempt: Optional[int]):
    from evalq.artifacts import open_store
    from evalq.cli.common import read_engine_and_settings

    engine, settings = read_engine_and_settings()
    trial, attempts = trial_attempts(engine, settings, trial_id)
    return trial, attempts, pick_attempt(trial_id, attempts, attempt), \
        open_store(settings.artifacts_url)


@click.command()
@click.argument("trial")
@click.option("--attempt", type=click.IntRange(min=1), default=None,
              help="Which attempt (default: the latest).")
@click.option("--json", "as_json", is_flag=True, help="The same details as one JSON object.")
def show(trial: str, attempt: Optional[int], as_json: bool) -> None:
    """One trial: outcome and reason, failed checks, diff, the agent's exit status, model
    calls and stderr, and its stored artifacts.

    TRIAL is a trial id (STUDY/TASK/CONDITION/rN), as the report's runs table and `evalq
    export` show it.
    """
    row, attempts, chosen, store = _opened(trial, attempt)
    details = trial_details(row, attempts, chosen, store)
    if as_json:
        click.echo(json.dumps(details, sort_keys=True))  # JSON escapes control characters
        return
    hint = _hint(row.id, chosen.attempt, attempts[-1].attempt)
    for line in detail_lines(details, hint):
        click.echo(line)


@click.command()
@click.argument("trial")
@click.argument("name")
@click.option("--attempt", type=click.IntRange(min=1), default=None,
              help="Which attempt (default: the latest).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write it to this file instead of standard output.")
def artifact(trial: str, name: str, attempt: Optional[int], output: Optional[str]) -> None:
    """Write one stored artifact of a trial: diff, stderr, stdout, transcript, workspace
    (.tar.gz), wire, metrics, final_report.

    To a terminal, text comes with its control characters made visible, and the workspace
    archive is refused (give -o FILE, or redirect); to a file or a pipe, the exact bytes.
    """
    row, attempts, chosen, store = _opened(trial, attempt)
    refs = chosen.artifacts or {}
    if name not in refs:
        stored = ", ".join(sorted(refs)) or "none"
        raise UserError(f"attempt {chosen.attempt} of trial '{one_line(row.id, 200)}' has no "
                        f"artifact '{one_line(name, 60)}'", field="NAME",
                        fix=f"use one of: {stored}")
    data = store.get(refs[name])  # a missing or corrupt blob fails in one line (exit 1)
    if output is not None:
        from evalq.fileio import write_bytes_atomic

        write_bytes_atomic(output, data)
        click.echo(f"{name}: {len(data)} bytes written to {output}", err=True)
        return
    out = click.get_binary_stream("stdout")
    if not out.isatty():
        out.write(data)
        out.flush()
        return
    if name in BINARY:
        raise UserError(f"'{name}' is a .tar.gz archive, not text for a terminal",
                        field="-o", fix=f"add -o {name}.tar.gz, or redirect it to a file")
    text = terminal_text(data.decode("utf-8", "replace"))
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    sys.stdout.flush()
