"""A result row holds whatever text an agent's output put in it, and both databases take it:
a lone surrogate (a file name's byte that is not UTF-8, a \\udcff escape in the agent's JSON)
is stored as visible text, in the JSON columns and in the reason, where PostgreSQL refused the
escape and the driver the character (the result was lost and the trial stuck)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from evalq.results.store import (StudyRow, create_attempts, get_engine, init_db,
                                 record_attempt, save_study)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'r.db'}"
    return request.getfixturevalue("postgres_url")


def test_agent_text_with_lone_surrogates_is_stored_as_text(db_url):
    engine = init_db(db_url)
    save_study(engine, StudyRow(id="s", manifest={}, lock={}, lock_digest="sha256:s"),
               [dict(id="s/f/c/r0", study_id="s", fixture_id="f", fixture_digest="d",
                     fixture_ref="r", condition="c", repetition=0, block=0, order_index=0)])
    create_attempts(engine, ["s/f/c/r0"], {"s/f/c/r0": 1}, "s")
    payload = {"study_id": "s", "trial_id": "s/f/c/r0", "attempt": 1, "outcome": "incorrect",
               "reason": "dropped: bad-\udcff.py", "metrics": {"stop_reason": "exit \udc80",
                                                               "unreported": {"k\udcfe": "x"}},
               "criteria": [{"name": "t\ud800", "passed": False, "evidence": "😀"}]}
    assert record_attempt(engine, payload)
    with get_engine(db_url).connect() as conn:
        reason, metrics, criteria = conn.execute(text(
            "select reason, metrics, criteria from attempts")).one()
    metrics = metrics if isinstance(metrics, dict) else json.loads(metrics)
    criteria = criteria if isinstance(criteria, list) else json.loads(criteria)
    assert reason == "dropped: bad-\\udcff.py"
    assert metrics == {"stop_reason": "exit \\udc80", "unreported": {"k\\udcfe": "x"}}
    assert criteria == [{"name": "t\\ud800", "passed": False, "evidence": "😀"}]
