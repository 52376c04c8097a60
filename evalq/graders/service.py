"""The grading worker's task body: fetch the stored workspace, grade it, send the result on."""

from __future__ import annotations

import logging
import time

from evalq.artifacts import open_store
from evalq.config import Settings, load_settings
from evalq.errors import EvalqError
from evalq.fixture_cache import cached_fixture
from evalq.graders.grade import GRADER_VERSION, grade_archive
from evalq.models import GradeResult

log = logging.getLogger("evalq.grading")


def result_fields(result: GradeResult, hostname: str = "") -> tuple[str, str | None, list, dict]:
    """(outcome, reason, criteria, grade record) of a result message; the grade record goes to
    the attempt row as it is, `tampered`, `verdict` and the digests included."""
    criteria = [c.model_dump(mode="json") for c in result.criteria]
    grade = {"exit_code": result.exit_code, "duration_seconds": result.duration_seconds,
             "sandbox": result.sandbox, "grader_version": GRADER_VERSION,
             "output_tail": result.output_tail[-4000:], "grader_host": hostname or None,
             "verdict": result.verdict, "tampered": result.tampered, "digests": result.digests}
    return result.outcome.value, result.reason, criteria, grade


def grade_message(payload: dict, hostname: str = "", settings: Settings | None = None) -> str:
    settings = settings or load_settings()
    from evalq.queue import app

    started = time.time()
    try:
        store = open_store(settings.artifacts_url)
        fixture = cached_fixture(store, settings.home / "cache" / "fixtures",
                                 payload["fixture_ref"], payload["fixture_digest"])
        archive = store.get(payload["artifacts"]["workspace"])
        result = grade_archive(fixture, archive, sandbox=settings.sandbox,
                               label=payload["trial_id"])
        outcome, reason, criteria, grade = result_fields(result, hostname)
    except EvalqError as exc:
        outcome, reason, criteria = "grading_failure", f"{type(exc).__name__}: {exc}", []
        grade = {"grader_version": GRADER_VERSION, "grader_host": hostname or None}
    grade["started_at"] = started
    message = dict(payload, outcome=outcome, reason=reason, criteria=criteria, grade=grade,
                   tampered=grade.get("tampered"), graded_at=time.time())
    app.send_task("evalq.record_result", args=[message])
    return outcome
