"""A study's agent errors counted by the database, for `evalq status`: per condition, runs
whose agent itself broke (evalq/analysis/agent_errors.py decides which), and the first few of
them with what they left.

The counts come from a GROUP BY over the counted attempts' exit status and whether they made
no model call: a few rows whatever the study's size; only the runs shown are read whole.
"""

from __future__ import annotations

from typing import Any, Iterable

from sqlalchemy import and_, func, or_, select

from evalq.analysis.agent_errors import NOT_COUNTED, AgentErrorCount, agent_error, \
    count_by_condition
from evalq.results.store import AttemptRow, TrialRow, snapshot
from evalq.results.tallies import counted_attempts

FAILURES = [o for o in NOT_COUNTED if o is not None]


def _counted(study_id: str):
    """The attempts table, the trials table, and their join on each settled trial's counted
    attempt (outcomes that say something about the agent only)."""
    a, t = AttemptRow.__table__, TrialRow.__table__
    pick = counted_attempts(a, study_id)
    joined = a.join(pick, and_(a.c.trial_id == pick.c.trial_id, a.c.attempt == pick.c.n)) \
        .join(t, t.c.id == a.c.trial_id)
    return a.c, t.c, joined, [a.c.study_id == study_id, a.c.outcome.notin_(FAILURES)]


def agent_error_counts(engine, study_id: str,
                       conditions: Iterable[str] = ()) -> dict[str, AgentErrorCount]:
    """Condition -> its AgentErrorCount over the counted attempts."""
    c, t, joined, where = _counted(study_id)
    # one row per run in a subquery, grouped outside it: PostgreSQL would not match a JSON
    # path's bound parameter in GROUP BY with the same path in the select list
    runs = (select(t.condition.label("condition"), c.outcome.label("outcome"),
                   c.metrics["exit_code"].as_integer().label("code"),
                   (c.metrics["model_calls"].as_integer() == 0).label("no_call"))
            .select_from(joined).where(*where).subquery())
    r = runs.c
    with snapshot(engine) as conn:
        rows = conn.execute(select(r.condition, r.outcome, r.code, r.no_call, func.count())
                            .group_by(r.condition, r.outcome, r.code, r.no_call)).all()
    facts = [{"condition": cond, "outcome": outcome, "n": n,
              "metrics": {"exit_code": code,
                          "model_calls": None if no_call is None else 0 if no_call else 1}}
             for cond, outcome, code, no_call, n in rows]
    return count_by_condition(facts, conditions)


def agent_error_runs(engine, study_id: str, limit: int) -> list[dict[str, Any]]:
    """The first `limit` agent-error runs in planned order: trial, condition, outcome, kind,
    exit status, model calls, stop reason and its stderr's tail (the agent's text)."""
    c, t, joined, where = _counted(study_id)
    # exactly agent_error's cases: a non-zero exit, or no model call, and not timed out
    errors = and_(c.outcome != "timed_out",
                  or_(c.metrics["exit_code"].as_integer() != 0,
                      c.metrics["model_calls"].as_integer() == 0))
    with snapshot(engine) as conn:
        rows = conn.execute(select(c.trial_id, t.condition, c.outcome, c.metrics)
                            .select_from(joined).where(*where, errors)
                            .order_by(t.order_index).limit(limit)).all()
    out = []
    for trial_id, condition, outcome, metrics in rows:
        kind = agent_error(metrics, outcome)
        if kind is not None:
            out.append({"trial_id": trial_id, "condition": condition, "outcome": outcome,
                        "agent_error": kind, "exit_code": metrics.get("exit_code"),
                        "model_calls": metrics.get("model_calls"),
                        "stop_reason": metrics.get("stop_reason"),
                        "stderr_tail": metrics.get("stderr_tail")})
    return out
