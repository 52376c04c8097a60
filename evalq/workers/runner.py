"""One attempt of one trial on an agent worker: claim, run the agent, store artifacts, hand off.

A delivery is not a licence to run: the attempt is claimed through a database lease first, and
the lease is renewed by a heartbeat while the agent runs. A duplicate delivery finds the live
lease and leaves without doing anything.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Callable, Iterator

from evalq.artifacts import open_store
from evalq.config import Settings, load_settings
from evalq.criteria.evaluate import ungraded as ungraded_criteria
from evalq.errors import AgentDataError, InfrastructureError
from evalq.fixtures.cache import cached_fixture
from evalq.fixtures.fixture import materialize
from evalq.fixtures.harbor.agent_root import agent_sandbox_for
from evalq.fixtures.archive import pack_workspace
from evalq.plaintext import valid_text
from evalq.report.json_text import dumps, finite
from evalq.models import StudyManifest
from evalq.study.budgets import effective_limits
from evalq.ops.run_folders import record_owner
from evalq.queue.messages import result_payload, trial_label
from evalq.queue.outage import BrokerUnavailable
from evalq.results.lease import Heartbeat
from evalq.results.store import claim, is_cancelled, mark_state, read_study, ready_engine
from evalq.workers.agents.base import TOO_LARGE, AgentContext
from evalq.workers.agents.numbers import sane_metrics
from evalq.workers.agents.registry import get_adapter
from evalq.workers.diff import workspace_diff
from evalq.workers.identity import host_name, worker_environment
from evalq.workers.profile import new_profile
from evalq.workers.visible_check.cost import repair_cost
from evalq.graders.first_check import first_check_stored, ungraded_first_check
from evalq.workers.sandbox.base import DEFAULT_DISK_MB
from evalq.workers.redact import default_redactor, install_log_redaction

log = logging.getLogger("evalq.runner")

#: publishes one message: (task name, payload)
Send = Callable[[str, dict], None]


def _db_retry(what, *args, deadline: float = 120.0, **kwargs):
    """Call a store function, retrying while the database is unreachable (a restart, an outage)
    or, on a threads-pool worker, while every pooled connection is busy for a moment."""
    from sqlalchemy.exc import DBAPIError, TimeoutError as PoolTimeout

    end = time.monotonic() + deadline
    delay = 0.5
    while True:
        try:
            return what(*args, **kwargs)
        except (DBAPIError, PoolTimeout) as exc:
            if time.monotonic() + delay > end:
                raise
            log.warning("database unavailable (%s); retrying", type(exc).__name__)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _check_visibility(ref: dict, settings: Settings) -> None:
    """Warn when this worker's visibility timeout is shorter than the study needs."""
    needed = ref.get("visibility_timeout")
    if needed and not settings.embedded and settings.visibility_seconds < needed:
        log.warning("this worker's visibility timeout (%ss) is below the study's %ss: Redis "
                    "will re-deliver long trials (the lease keeps them from running twice); "
                    "set EVALQ_MAX_TRIAL_SECONDS on every worker", settings.visibility_seconds,
                    needed)


class _CancelWatch:
    """Whether a study is cancelled, asked of the database at most every `every` seconds per
    study and process, however many of its trials this process runs at once."""

    def __init__(self, every: float = 2.0):
        self.every = every
        self.lock = threading.Lock()
        self.seen: dict[str, tuple[float, bool]] = {}  # study -> (asked at, answer)

    def cancelled(self, engine, study_id: str) -> bool:
        with self.lock:  # one thread asks; the others wait for its answer
            asked, answer = self.seen.get(study_id, (float("-inf"), False))
            now = time.monotonic()
            if now - asked >= self.every:
                try:
                    answer = is_cancelled(engine, study_id)
                except Exception:  # a database blip: not cancelled as far as we know
                    pass
                self.seen[study_id] = (now, answer)
            return answer


_cancel_watch = _CancelWatch()


class _StopPoll:
    """Cheap stop check for the agent's loop: lease lost, or the study cancelled."""

    def __init__(self, engine, study_id: str, heartbeat: Heartbeat,
                 watch: _CancelWatch = _cancel_watch):
        self.engine, self.study_id, self.heartbeat, self.watch = engine, study_id, heartbeat, watch
        self.reason: str | None = None

    def __call__(self) -> bool:
        if self.heartbeat.lost:
            self.reason = "lease lost"
            return True
        if self.watch.cancelled(self.engine, self.study_id):
            self.reason = "study cancelled"
            return True
        return False


def _with_installed_skill(store, lock: dict, condition, profile):
    """The condition with its skill unpacked (from the store, digest-checked) into this run."""
    from evalq.study.skills import install_published_skill

    entry = (lock.get("published_skills") or {}).get(condition.name)
    if entry is None:
        raise InfrastructureError(f"condition {condition.name} names a skill the study did not "
                                  "publish; re-run `evalq run` to register it")
    path = install_published_skill(store, entry, profile.root / "skill-source")
    return condition.model_copy(update={"skill": str(path)})


def _agent_source(store, lock: dict, condition, settings: Settings):
    """The condition's agent source on this worker, checked against the lock (or None)."""
    from evalq.workers.agent_source import checked_source

    if condition.source is None:
        return None
    locked = (lock.get("agent_sources") or {}).get(condition.name)
    entry = (lock.get("published_agent_sources") or {}).get(condition.name)
    if locked is None or entry is None:
        raise InfrastructureError(f"condition {condition.name} names an agent source the study "
                                  "did not publish; re-run `evalq run` to register it")
    return checked_source(store, entry, locked["digest"],
                          settings.home / "cache" / "agent-sources")


def run_trial_message(ref: dict, send: Send, hostname: str = "",
                      settings: Settings | None = None) -> str:
    """Run one attempt; `send(task_name, payload)` hands the next message to the queue."""
    settings = settings or load_settings()

    def _send(task_name: str, payload: dict) -> None:
        send(task_name, default_redactor().obj(payload))  # no credential in a DB row

    install_log_redaction()
    engine = _db_retry(ready_engine, settings.database_url)
    _check_visibility(ref, settings)
    host = host_name(hostname)
    label = trial_label(ref["trial_id"], ref["attempt"])
    # process and thread: a threads-pool worker runs many attempts in one process
    owner = f"{host}:{os.getpid()}:{threading.get_native_id()}-{uuid.uuid4().hex[:8]}"
    ok, why = _db_retry(claim, engine, ref["trial_id"], ref["attempt"], owner,
                        settings.lease_seconds, max_claims=ref.get("max_claims", 3))
    if not ok:
        log.info("not running %s: %s", label, why)
        if why == "claim cap reached":
            _send("evalq.record_result", result_payload(
                ref, outcome="infrastructure_failure", worker_host=host,
                reason="the trial was claimed too many times (its worker keeps dying)"))
        return why
    heartbeat = Heartbeat(engine, ref, owner, settings.lease_seconds)
    heartbeat.start()
    log.info("running %s", label)
    started = time.time()
    # which agent sandbox ran it: `none` marks the attempt (and the report) unsealed
    common = dict(worker_host=host, started_at=started)
    profile = None
    handed_off = False  # the attempt is in 'grading', its artifacts stored
    try:  # from here on, every failure ends the attempt with its reason
        common["worker_env"] = dict(worker_environment(settings.agent_sandbox),
                                    agent_sandbox=settings.agent_sandbox)
        store = open_store(settings.artifacts_url)
        fixture = cached_fixture(store, settings.home / "cache" / "fixtures", ref["fixture_ref"],
                                 ref["fixture_digest"])
        study_row = _db_retry(read_study, engine, ref["study_id"])
        manifest = StudyManifest.model_validate(study_row.manifest)
        condition = next(c for c in manifest.conditions if c.name == ref["condition"])
        limits = effective_limits(fixture.spec.limits, manifest)
        profile = new_profile(settings.home / "runs", disk_mb=DEFAULT_DISK_MB)
        record_owner(profile.root)  # a SIGKILLed run's folder is swept once this process is gone
        if condition.skill:
            condition = _with_installed_skill(store, study_row.lock, condition, profile)
        agent_source = _agent_source(store, study_row.lock, condition, settings)
        materialize(fixture, profile.workspace)
        change = _stage_change(manifest, fixture, profile, limits, settings)
        stop = _StopPoll(engine, ref["study_id"], heartbeat)
        ctx = AgentContext(fixture=fixture, condition=condition, profile=profile,
                           prompt=fixture.spec.prompt.strip(), limits=limits,
                           attempt=ref["attempt"], should_stop=stop,
                           sandbox=agent_sandbox_for(fixture, settings.agent_sandbox),
                           evalq_home=settings.home,
                           budgets=manifest.budgets, agent_source=agent_source)
        result = get_adapter(condition.agent).run(ctx)
        if stop.reason == "study cancelled":
            mark_state(engine, ref["trial_id"], ref["attempt"], state="cancelled",
                       lease_expires_at=None)
            return "cancelled"
        if stop.reason == "lease lost":
            return "lease lost to another worker"
        artifacts, refused = stored_run(store, fixture, profile, result)
        finished = time.time()
        checks = session_checks(result, finished)
        if checks is not None:
            common["session_checks"] = checks
        if change is not None:  # what the stage's change did, beside what the agent did
            artifacts["change"] = store.put(dumps(change, sort_keys=True).encode())
        if refused is not None:  # what the agent left cannot be stored: its doing
            _send("evalq.record_result", result_payload(
                ref, **common, agent_finished_at=finished, outcome="incorrect",
                reason=f"not graded: {refused}; the agent's workspace is not stored",
                metrics=result.metrics.model_dump(mode="json"), artifacts=artifacts,
                **ungraded_first_check(fixture, checks, "the final workspace was refused"),
                **_named(fixture, result.transcript, "its workspace was refused")))
            return "incorrect"
        payload = result_payload(ref, **common, agent_finished_at=finished,
                                  metrics=result.metrics.model_dump(mode="json"),
                                  artifacts=artifacts)
        if result.timed_out and not first_check_stored(checks, artifacts):
            payload.update(outcome="timed_out", reason=result.stop_reason,
                           **ungraded_first_check(fixture, checks, "the run timed out"),
                           **_named(fixture, result.transcript, "the run timed out"))
            _send("evalq.record_result", payload)
            return "timed_out"
        if result.timed_out:  # it stays timed out; the grader grades its first check alone
            checks["ended"] = {"outcome": "timed_out", "reason": result.stop_reason}
        still_owner = _db_retry(mark_state, engine, ref["trial_id"], ref["attempt"],
                                owner=owner, state="grading", agent_finished_at=finished,
                                artifacts=artifacts, metrics=payload["metrics"],
                                worker_host=host, worker_env=common["worker_env"],
                                started_at=started, lease_expires_at=None,
                                **({"session_checks": checks} if checks is not None else {}))
        if not still_owner:
            return "lease lost to another worker"
        handed_off = True
        _send("evalq.grade_trial", payload)
        log.info("%s sent to grading", label)
        return "timed_out" if result.timed_out else "sent to grading"
    except BrokerUnavailable as exc:  # not the agent's doing: the trial stays pending
        if handed_off:  # an expired grading lease: the next grading sweep re-sends it
            _db_retry(mark_state, engine, ref["trial_id"], ref["attempt"], state="grading",
                      lease_expires_at=time.time())
        log.warning("%s left pending for the sweeps to send again: %s", label, exc)
        return "left pending: broker unavailable"
    except AgentDataError as exc:  # the agent's data, refused past the workspace: its outcome
        log.warning("%s: the agent's output is refused: %s", label, exc)
        _send("evalq.record_result", result_payload(ref, **common, outcome="incorrect",
                                                     reason=f"not graded: {exc}"))
        return "incorrect"
    except Exception as exc:  # evalq's own fault: the attempt ends recorded with its reason
        reason = valid_text(f"{type(exc).__name__}: {exc}")
        log.warning("infrastructure failure in %s: %s", label, reason)
        _send("evalq.record_result", result_payload(ref, **common, outcome=
                                                     "infrastructure_failure", reason=reason))
        return "infrastructure_failure"
    finally:
        heartbeat.stop()
        if profile is not None:
            profile.cleanup()


def session_checks(result, finished: float) -> dict | None:
    """What the worker saw of the fixture's visible check, with the repair cost after the
    first check (None when the fixture declares no check)."""
    record = result.visible_check
    if record is None:
        return None
    return dict(record.as_json(), repair_cost=repair_cost(
        record, finished, result.transcript, result.extra.get("wire_records")))
def _stage_change(manifest, fixture, profile, limits, settings) -> dict | None:
    """A stage's change applied in the agent sandbox before the agent (None: no change)."""
    if manifest.stage is None:
        return None
    from evalq.workers.stage_change import apply_change

    return apply_change(fixture, profile, limits, manifest.budgets, settings.agent_sandbox)


def _named(fixture, transcript: bytes | None, why: str) -> dict:
    """The criterion results of a run that is not graded, as payload fields (none without
    named criteria)."""
    results = ungraded_criteria(fixture.spec.criteria, transcript, why)
    return {} if results is None else {"criterion_results": results}


def stored_run(store, fixture, profile, result) -> tuple[dict, str | None]:
    """The run's artifacts by reference, and why its workspace was refused (None: stored).

    Everything here is the agent's data: a workspace that cannot be stored (over the limits,
    a credential that cannot be redacted) is refused with the reason, which makes the attempt
    the agent's `incorrect`; its output streams, transcript and metrics are stored still."""
    result.metrics = sane_metrics(result.metrics)  # the gateway's and the price's too
    refused = result.extra.get(TOO_LARGE)  # redaction stopped at the limit
    if refused is None:
        try:
            return _store_artifacts(store, fixture, profile, result), None
        except AgentDataError as exc:
            refused = str(exc)
    return _store_artifacts(store, fixture, profile, result, workspace=False), refused


def _store_artifacts(store, fixture, profile, result, workspace: bool = True) -> dict:
    """Final workspace, diff, transcript, report and output streams, by reference;
    without the workspace and its diff for one over the size limit."""
    refs = {}
    if workspace:
        with agent_data("the workspace"):
            packed = pack_workspace(profile.workspace)
        refs["workspace"] = store.put(packed)
        # The fixture's own workspace folder is the initial state (checked against its digest
        # when the fixture was loaded), so the diff needs no second copy of it.
        with agent_data("the workspace diff"):
            diff = workspace_diff(fixture.workspace_dir, profile.workspace).encode()
        refs["diff"] = store.put(diff)
    first = result.visible_check.snapshot if result.visible_check is not None else None
    if first is not None:  # the workspace at the first visible check, packed by the worker
        refs["first_check_workspace"] = store.put(first)
    refs["stdout"] = store.put(result.stdout)
    refs["stderr"] = store.put(result.stderr)
    if result.transcript is not None:
        refs["transcript"] = store.put(result.transcript)
    if result.final_report is not None:
        refs["final_report"] = store.put(valid_text(result.final_report).encode())
    refs["metrics"] = store.put(dumps(result.metrics.model_dump(mode="json"),
                                      sort_keys=True).encode())
    if result.extra.get("wire_records") is not None:  # the gateway's record of every request
        refs["wire"] = store.put("".join(dumps(finite(r), sort_keys=True, default=str) + "\n"
                                         for r in result.extra["wire_records"]).encode())
    return refs


@contextmanager
def agent_data(what: str) -> Iterator[None]:
    """Reading the agent's tree into `what`: a value error there (text that will not encode,
    a tree past the recursion limit) is the agent's data refused, not evalq's failure. The
    artifact store's own errors (a full disk) happen outside and stay evalq's."""
    try:
        yield
    except (UnicodeError, ValueError, RecursionError, OverflowError) as exc:
        raise AgentDataError(f"{what} cannot be stored ({type(exc).__name__}: "
                             f"{valid_text(str(exc))[:200]})") from exc
