"""Per-run transcript pages beside the HTML report: what the agent said, called and got back.

A page opens with how the run ended (outcome and reason, failed checks, exit status, model
calls, whether the agent itself broke), then its diff and the tail of its stderr, then the
run's normalized trajectory (ATIF shape, see workers/agents/trajectory.py); a transcript in
another shape is shown as text. Nearly everything in it is the agent's output and so hostile:
all of it is escaped, the page loads nothing and runs no script (same CSP as the report).

Pages come with the report for a study of up to PAGES_BY_DEFAULT runs; a larger one gets
them on demand (`evalq report STUDY --transcripts`), since writing a file per run takes
several times as long as the report itself (bench/ report: 120,000 pages took 54 s where
computing that report took 7). Either way they are written one run at a time, read from the database in
batches, so no study is held in memory for them; transcripts.html lists every page.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any, Iterator, Optional

from sqlalchemy import select

from evalq.analysis.agent_errors import agent_error, describe_exit
from evalq.artifacts import open_store
from evalq.criteria.review import resolved
from evalq.fileio import write_text_atomic
from evalq.results.store import AttemptRow
from evalq.report.json_text import dumps, finite

CSP = "default-src 'none'; style-src 'unsafe-inline'"
STYLE = """
body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
.step{border-left:4px solid #ccc;margin:.6em 0;padding:.2em .8em}.agent{border-color:#4a7}
.user{border-color:#47a}.system{border-color:#aaa}.error{background:#fee}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:.4em;margin:.3em 0}
small{color:#666}.run li{margin:.2em 0}b.error{color:#a00}
"""
MAX_TEXT = 20_000


def _pre(text: Any) -> str:
    text = text if isinstance(text, str) else dumps(finite(text), indent=1, default=str)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + f"\n… ({len(text) - MAX_TEXT:,} more characters)"
    return f"<pre>{escape(text)}</pre>"


def _arguments(arguments: Any) -> str:
    """A call's arguments, each text argument as written (a command or a file reads as such)."""
    if not isinstance(arguments, dict):
        return _pre(arguments)
    return "".join(f"<div><small>{escape(str(k))}</small>{_pre(v)}</div>"
                   for k, v in arguments.items())


def _step(step: dict[str, Any]) -> str:
    source = str(step.get("source", ""))
    head = f"<b>{escape(source)}</b> <small>step {escape(str(step.get('step_id', '')))}"
    if step.get("timestamp"):
        head += f" · {escape(str(step['timestamp']))}"
    if step.get("metrics"):
        usage = ", ".join(f"{k} {'unavailable' if v is None else v}"
                          for k, v in step["metrics"].items())
        head += f" · {escape(usage)}"
    parts = [head + "</small>"]
    if step.get("message"):
        parts.append(_pre(step["message"]))
    for call in step.get("tool_calls") or []:
        parts.append(f"<div>calls <code>{escape(str(call.get('function_name')))}</code></div>"
                     + _arguments(call.get("arguments")))
    for result in (step.get("observation") or {}).get("results") or []:
        css = " class=\"error\"" if result.get("is_error") else ""
        parts.append(f"<div{css}>result{' (error)' if result.get('is_error') else ''}"
                     f"{_pre(result.get('content', ''))}</div>")
    kind = source if source in ("agent", "user", "system") else "system"
    return f'<div class="step {kind}">' + "".join(parts) + "</div>"


#: failed checks named on a page; the rest are counted
CHECKS_SHOWN = 50


def _failed_checks(criteria: Any) -> str:
    failed = [c for c in criteria or [] if isinstance(c, dict) and c.get("passed") is False]
    if not failed:
        return "none" if criteria else "none recorded"
    items = "".join(f"<li>{escape(str(c.get('name')))}"
                    + (_pre(c["evidence"]) if c.get("evidence") else "") + "</li>"
                    for c in failed[:CHECKS_SHOWN])
    more = f"<li>… {len(failed) - CHECKS_SHOWN} more</li>" if len(failed) > CHECKS_SHOWN else ""
    return f"{len(failed)}<ul>{items}{more}</ul>"


def _named_criteria(results: list[dict[str, Any]]) -> str:
    """Each named criterion with its verdict and evidence (the steps a trace rule matched)."""
    items = "".join(
        f"<li>{escape(str(r.get('name')))} [{escape(str(r.get('kind')))}"
        f"{', required' if r.get('required') else ''}]: "
        f"{ {True: 'met', False: 'not met'}.get(r.get('passed'), 'unresolved') }; "
        f"{escape(str(r.get('evidence') or ''))}</li>" for r in results)
    met = sum(1 for r in results if r.get("passed") is True)
    return f"{met} of {len(results)} met<ul>{items}</ul>"


def run_summary(attempt: Any, diff: Optional[bytes]) -> str:
    """How the run ended, as HTML: outcome and reason, failed checks, exit status, model calls,
    stop reason and the agent error if it is one, then its diff and its stderr's tail."""
    metrics = getattr(attempt, "metrics", None) or {}
    outcome = getattr(attempt, "outcome", None)
    kind = agent_error(metrics, outcome)
    calls = metrics.get("model_calls")
    facts = [("outcome", escape(str(outcome or "pending"))),
             ("reason", escape(str(getattr(attempt, "reason", None) or "none given"))),
             ("failed checks", _failed_checks(getattr(attempt, "criteria", None))),
             ("exit status", escape(describe_exit(metrics.get("exit_code")))),
             ("model calls", "unavailable" if calls is None else escape(str(calls))),
             ("stop reason", escape(str(metrics.get("stop_reason") or "unavailable")))]
    named = resolved(getattr(attempt, "criterion_results", None), getattr(attempt, "grade", None))
    if named:
        facts.append(("named criteria", _named_criteria(named)))
    if kind is not None:
        facts.append(("agent error", f'<b class="error">the agent {escape(kind)}</b>'))
    body = ['<h2>Run</h2><ul class="run">'
            + "".join(f"<li>{name}: {value}</li>" for name, value in facts) + "</ul>",
            "<h2>Diff</h2>",
            _pre(diff.decode("utf-8", "replace")) if diff
            else "<p>no diff: the agent changed nothing, or none was stored</p>",
            "<h2>Stderr (last lines)</h2>",
            _pre(metrics["stderr_tail"]) if metrics.get("stderr_tail")
            else "<p>the agent wrote nothing to stderr (or it was not recorded)</p>",
            "<h2>Transcript</h2>"]
    return "\n".join(body)


def render_transcript(trial_id: str, data: Optional[bytes], summary: str = "") -> str:
    """One run's transcript page (a trajectory document, other text as is, or none), after
    `summary` (run_summary's HTML) when given."""
    try:
        doc = json.loads(data) if data else None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("steps"), list):
        agent = doc.get("agent") or {}
        notes = (doc.get("extra") or {}).get("notes") or {}
        body = [f"<p>agent {escape(str(agent.get('name')))} "
                f"{escape(str(agent.get('version') or 'version unavailable'))}, model "
                f"{escape(str(agent.get('model_name') or 'unavailable'))}; usage per "
                f"{escape(str((doc.get('extra') or {}).get('usage_scope')))}</p>"]
        if notes:
            body.append("<ul>" + "".join(f"<li>{escape(str(k))}: not reported ({escape(str(v))})"
                                         "</li>" for k, v in sorted(notes.items())) + "</ul>")
        body += [_step(s) for s in doc["steps"] if isinstance(s, dict)]
    elif data:
        body = ["<p>raw transcript (not a trajectory document)</p>",
                _pre(data.decode("utf-8", "replace"))]
    else:
        body = ["<p>no transcript was recorded for this run</p>"]
    title = escape(f"transcript: {trial_id}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{title}</title><style>{STYLE}</style></head><body>\n"
            f'<p><a href="../report.html">report</a></p><h1>{title}</h1>\n'
            + summary + "\n".join(body) + "\n</body></html>\n")


def page_name(trial_id: str) -> str:
    """A file name for a trial's page that cannot leave the transcripts folder."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in trial_id).lstrip(".")
    return f"transcripts/{safe or 'trial'}.html"


#: a study of at most this many runs gets its transcript pages with every report (about a
#: second of writing); a larger one when asked (`evalq report --transcripts`)
PAGES_BY_DEFAULT = 2_000
#: the page that links every transcript page, beside the report (outside transcripts/, so no
#: trial's page can take its name)
INDEX = "transcripts.html"
#: what a page shows of an attempt, read per batch of rows
PAGE_COLUMNS = ("trial_id", "outcome", "reason", "criteria", "criterion_results", "metrics",
                "grade", "artifacts")


def pages_wanted(runs: int, asked: Optional[bool]) -> bool:
    """Whether a report writes transcript pages: as asked, else by the study's size."""
    return asked if asked is not None else runs <= PAGES_BY_DEFAULT


def transcripts_for(engine, artifacts_url: str, report: dict[str, Any], out_dir: Path,
                    asked: Optional[bool] = None) -> Optional[dict[str, str]]:
    """The report's transcript pages when wanted (pages_wanted), written under `out_dir`;
    their links, or None when none were written (the report then says how to get them)."""
    if not pages_wanted(report["trials"]["planned"], asked):
        return None
    return write_transcripts(engine, artifacts_url, report["study"]["id"], out_dir)


def latest_attempt_rows(engine, study_id: str, batch: int = 500) -> Iterator[Any]:
    """Each trial's latest attempt (PAGE_COLUMNS only), in trial order, fetched `batch` rows
    at a time: memory stays that of a batch however large the study."""
    columns = [getattr(AttemptRow, name) for name in PAGE_COLUMNS]
    statement = (select(*columns).where(AttemptRow.study_id == study_id)
                 .order_by(AttemptRow.trial_id, AttemptRow.attempt))
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=batch).execute(statement)
        previous = None
        for row in result:
            if previous is not None and previous.trial_id != row.trial_id:
                yield previous
            previous = row
        if previous is not None:
            yield previous


def _index_page(study_id: str, links: dict[str, str]) -> Iterator[str]:
    """transcripts/index.html in pieces: every run's page, in trial order, with its outcome."""
    title = escape(f"transcripts: {study_id}")
    yield ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
           f"<title>{title}</title><style>{STYLE}</style></head><body>\n"
           f'<p><a href="report.html">report</a></p><h1>{title}</h1>\n'
           f"<p>{len(links):,} runs, each its latest attempt</p><ul>\n")
    for trial_id, link in links.items():
        yield f'<li><a href="{escape(link)}">{escape(trial_id)}</a></li>\n'
    yield "</ul>\n</body></html>\n"


def write_transcripts(engine, artifacts_url: str, study_id: str,
                      out_dir: Path) -> dict[str, str]:
    """Write a page per trial (its latest attempt) under out_dir/transcripts, one at a time,
    and the index page that lists them; {trial: link}."""
    store = open_store(artifacts_url)
    links = {}

    def stored(attempt, name: str) -> Optional[bytes]:
        ref = (getattr(attempt, "artifacts", None) or {}).get(name)
        return store.get(ref) if ref and store.exists(ref) else None

    for attempt in latest_attempt_rows(engine, study_id):
        trial_id = attempt.trial_id
        link = page_name(trial_id)
        summary = run_summary(attempt, stored(attempt, "diff"))
        page = render_transcript(trial_id, stored(attempt, "transcript"), summary)
        write_text_atomic(out_dir / link, page)
        links[trial_id] = link
    write_text_atomic(out_dir / INDEX, _index_page(study_id, links))
    return links
