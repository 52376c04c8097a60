"""One trial at a time: a no-op trial's latency next to the sum of its floor parts.

Under concurrency a trial's stages overlap (one trial's agent runs while another is graded),
so subtracting a stage timed alone from the pipelined per-trial time means nothing (issue 19:
it printed −1.27×). Sent one at a time, nothing overlaps: the trial's latency is the sum of
its stages, and the floor is the sum of its parts, each also measured alone — three Celery
hops, the agent's sandbox start, the agent's own process and the grading sandbox start.
"""

from __future__ import annotations

from .figures import Figure, ratio
from .noop_study import mean, now, stage_means, wait_finished


def send_one_at_a_time(app, study, engine, timeout_each: float = 60.0) -> dict:
    """Send each planned trial only after the previous one has its outcome; latencies per row."""
    from evalq.queue.launch import send_run_messages
    from evalq.results.store import attempts_of, create_attempts, trials_of

    sent: dict[str, float] = {}
    for index, trial in enumerate(sorted(trials_of(engine, study.id),
                                         key=lambda t: t.order_index)):
        create_attempts(engine, [trial.id], {trial.id: 1}, study.id)
        sent[trial.id] = now()
        send_run_messages(app, study, [(trial, 1)])
        wait_finished(engine, study.id, index + 1, timeout_each)
    rows = attempts_of(engine, study.id)
    outcomes: dict[str, int] = {}
    for row in rows:
        outcomes[row.outcome] = outcomes.get(row.outcome, 0) + 1
    return {"trials": len(rows), "outcomes": outcomes,
            "latency_seconds": mean(r.finished_at - sent[r.trial_id] for r in rows),
            "to_agent_start_seconds": mean(r.started_at - sent[r.trial_id] for r in rows
                                           if r.started_at),
            **stage_means(rows)}


def floor_parts(hops: float, raw: dict[str, float], agent_process: float, sandbox: str,
                agent_sandbox: str) -> dict[str, float]:
    """The floor of one trial, part by part; every part measured one at a time."""
    parts = {"3 Celery hops": hops}
    if agent_sandbox != "none":
        parts[f"agent sandbox start ({agent_sandbox})"] = raw[agent_sandbox]
    parts["no-op agent process"] = agent_process
    parts[f"grading sandbox start ({sandbox})"] = raw[sandbox]
    return parts


def breakdown_figure(sandbox: str, trial: dict, parts: dict[str, float]) -> Figure:
    """Sequential trial latency against the sum of sequential floor parts (both ≥ 0, no overlap)."""
    floor = sum(parts.values())
    listed = " + ".join(f"{name} {value * 1000:.1f} ms" for name, value in parts.items())
    stages = ", ".join(f"{name.removesuffix('_seconds').replace('_', ' ')} "
                       f"{value * 1000:.1f} ms" for name, value in trial.items()
                       if name.endswith("_seconds") and name != "latency_seconds"
                       and value is not None)
    return Figure(f"one trial at a time, {sandbox}: latency of a no-op trial",
                  trial["latency_seconds"], "s", reference=f"critical-path floor "
                  f"({floor * 1000:.1f} ms = {listed})",
                  ratio=ratio(trial["latency_seconds"], floor),
                  note=f"stages: {stages}; evalq's own work = latency − floor = "
                       f"{(trial['latency_seconds'] - floor) * 1000:.1f} ms",
                  extra={"trial": trial, "floor_parts": parts})
