"""The results database (SQLite by default, PostgreSQL for several machines), via SQLModel.

The database is the source of truth: a planned trial without a terminal attempt is pending,
whatever the queue says. Outcomes are written only by the results service (record_attempt),
as upserts keyed by (trial_id, attempt), so a re-delivered message never makes a second row.
"""

from __future__ import annotations

import json
from collections import namedtuple
from contextlib import contextmanager

import threading
import time
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

from sqlalchemy import (JSON, Column, Index, Text, UniqueConstraint, bindparam, cast, event, func,
                        or_, text, update)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlmodel import Field, Session, SQLModel, create_engine, select

from evalq.plaintext import valid_text
from evalq.report.json_text import dumps
from evalq.results import pg_liveness
from evalq.results.bulk import copy_rows, insert_missing
from evalq.results.schema import add_missing
from evalq.errors import UserError
from evalq.urls import normalized_database_url


class StudyRow(SQLModel, table=True):
    __tablename__ = "studies"
    id: str = Field(primary_key=True)
    manifest: dict = Field(sa_column=Column(JSON, nullable=False))
    manifest_path: Optional[str] = None
    lock: dict = Field(sa_column=Column(JSON, nullable=False))
    lock_digest: str
    mode: str = "controlled"
    created_at: float = Field(default_factory=time.time)
    cancelled: bool = False


class TrialRow(SQLModel, table=True):
    __tablename__ = "trials"
    id: str = Field(primary_key=True)
    study_id: str = Field(index=True, foreign_key="studies.id")
    fixture_id: str
    fixture_digest: str
    fixture_ref: str
    condition: str
    repetition: int
    block: int
    order_index: int


class AttemptRow(SQLModel, table=True):
    __tablename__ = "attempts"
    # Each index slows every launch's rows and every result's write, so there is none that
    # another one's leading columns already give: uq_trial_attempt serves lookups by trial,
    # ix_attempt_study_updated those by study (every query by outcome names a study or trial).
    # A database made before keeps its older single-column indexes (results/schema.py never
    # drops), which costs only write speed.
    __table_args__ = (UniqueConstraint("trial_id", "attempt", name="uq_trial_attempt"),
                      # sweeps look for stranded gradings by state and lease, not per study
                      Index("ix_attempt_state_lease", "state", "lease_expires_at"),
                      Index("ix_attempt_study_updated", "study_id", "updated_at"))
    id: Optional[int] = Field(default=None, primary_key=True)
    trial_id: str = Field(foreign_key="trials.id")
    study_id: str
    attempt: int
    state: str = "queued"  # queued | running | grading | done | cancelled
    outcome: Optional[str] = None
    reason: Optional[str] = None
    lease_owner: Optional[str] = None
    lease_expires_at: Optional[float] = None
    claims: int = 0
    worker_host: Optional[str] = None
    worker_env: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    enqueued_at: Optional[float] = None
    started_at: Optional[float] = None
    agent_finished_at: Optional[float] = None
    graded_at: Optional[float] = None
    finished_at: Optional[float] = None
    metrics: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    criteria: Optional[list] = Field(default=None, sa_column=Column(JSON))
    #: one result per named criterion of the fixture (evalq/criteria/); None without any
    criterion_results: Optional[list] = Field(default=None, sa_column=Column(JSON))
    artifacts: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    grade: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    regrades: int = 0
    #: the fixture's visible check within the agent's session (workers/visible_check/): the
    #: worker's count of its runs and the repair cost; None when the fixture declares none.
    #: Not the queue's attempt numbering: that is `attempt`, whose first valid one counts.
    session_checks: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    #: the hidden tests' verdict on the workspace at the agent's first visible check
    #: (correct, incorrect, grading_failure); None when there is none, first_check_reason
    #: saying why (graders/first_check.py)
    first_check_result: Optional[str] = None
    first_check_reason: Optional[str] = None
    first_check_grade: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    #: the session's eventual result: the outcome when it judges the agent (correct,
    #: incorrect, timed_out), None for an evalq failure
    eventual_result: Optional[str] = None
    #: set by every write (Column onupdate, and explicitly where Core bypasses it): what a
    #: watching status reads to stay current in O(changes) (ops/status_watch.py)
    updated_at: Optional[float] = Field(default=None, sa_column_kwargs={
        "default": time.time, "onupdate": time.time})


class AttemptEvent(SQLModel, table=True):
    """Append-only: an attempt was created (outcome None) or got an outcome.

    Progress counters read only the events after their cursor, so a launcher's tick costs
    O(changes) rather than re-reading every trial (results/progress.py, bench/).
    """
    __tablename__ = "attempt_events"
    __table_args__ = (Index("ix_event_study_seq", "study_id", "id"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    study_id: str
    trial_id: str
    attempt: int
    outcome: Optional[str] = None
    duration: Optional[float] = None  # seconds from the attempt's start to its result


class GraderCheckRow(SQLModel, table=True):
    """A grader's latest self-check of a fixture (results/grader_checks.py): what `evalq status`
    shows while a grader refuses a fixture's trials. One row per grader and fixture digest."""
    __tablename__ = "grader_checks"
    grader: str = Field(primary_key=True)  # the worker's name, grading@host
    fixture_digest: str = Field(primary_key=True)
    fixture_id: str
    sandbox: str
    toolchain: Optional[str] = None  # rootfs or image digest the references were graded in
    ok: bool
    reason: Optional[str] = None  # why it refuses (None when ok)
    verdicts: Optional[dict] = Field(default=None, sa_column=Column(JSON))
    checked_at: float


TERMINAL_STATES = ("done", "cancelled")


@lru_cache(maxsize=8)
def get_engine(url: str) -> Engine:
    """One engine per URL per process; SQLite in WAL mode so several processes can share it.
    JSON columns are written strict (evalq.report.json_text.dumps): what a row holds, any
    parser and PostgreSQL read back."""
    url = normalized_database_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 60, "check_same_thread": False},
                               json_serializer=dumps)

        @event.listens_for(engine, "connect")
        def _pragmas(conn, _record):  # noqa: ANN001
            cursor = conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=60000")
            cursor.close()
    else:  # psycopg2 sends an INSERT without RETURNING row by row unless batched explicitly
        engine = create_engine(url, pool_pre_ping=True, executemany_mode="values_plus_batch",
                               json_serializer=dumps, connect_args=pg_liveness.client_args(url))
        event.listen(engine, "connect", pg_liveness.apply_server_settings)
    return engine


@contextmanager
def removed_if_failed(url: str) -> Iterator[None]:
    """For a block that may create the SQLite database: if it fails, a database file that did
    not exist before is removed again (the store is left as it was)."""
    url = normalized_database_url(url)
    path = Path(url.split(":///", 1)[1]) if url.startswith("sqlite:///") else None
    fresh = path is not None and not path.exists()
    try:
        yield
    except BaseException:
        if fresh:
            get_engine(url).dispose()
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        raise


#: URLs whose schema this process has brought up to date (add_missing) since it started
_CHECKED: set[str] = set()
_CHECKING = threading.Lock()


def init_db(url: str) -> Engine:
    """The engine, its tables created if missing, and once per process a database from an
    earlier evalq given the columns and indexes it lacks."""
    engine = get_engine(url)
    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    try:
        _create_tables(engine)
        with _CHECKING:  # trial threads start together; one checks, the others wait for it
            if url not in _CHECKED:
                add_missing(engine, SQLModel.metadata)
                _CHECKED.add(url)
    except (OperationalError, InterfaceError) as exc:
        first = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else "refused"
        raise UserError(f"cannot open the results database: {first}", field="EVALQ_DATABASE_URL",
                        fix="check the URL and that the server is running") from None
    return engine


#: the PostgreSQL advisory lock taken while evalq creates its tables ("evalq" in ASCII)
SCHEMA_LOCK = 0x6576616C71


def _create_tables(engine: Engine) -> None:
    """The tables, created where missing. On PostgreSQL under an advisory lock: a launcher and
    its workers starting together on a new database would otherwise race in CREATE TABLE, and
    all but one fail on the catalog's unique index (pg_type_typname_nsp_index)."""
    if engine.dialect.name != "postgresql":
        SQLModel.metadata.create_all(engine)
        return
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
        SQLModel.metadata.create_all(conn)


def ready_engine(url: str) -> Engine:
    """init_db once per URL and process: workers run hundreds of trials or thousands of
    results a second through one process, and each table check costs queries and a connection.
    (init_db itself still creates missing tables on every call: a command may find its
    database file removed and made anew.)"""
    if url not in _CHECKED:
        init_db(url)
    return get_engine(url)


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection whose reads all see one committed state, for counts made of several
    queries: under READ COMMITTED a trial that finishes between two of them is counted both as
    pending and as finished (status once summed 61 of 60 this way)."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn
            return
        conn.exec_driver_sql("BEGIN")  # pysqlite starts no transaction for a SELECT
        try:
            yield conn
        finally:
            conn.exec_driver_sql("ROLLBACK")


def dialect_insert(engine: Engine | Connection):
    """The INSERT with ON CONFLICT of the engine's database (PostgreSQL or SQLite)."""
    return postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert


# ------------------------------------------------------------------ planning (CLI side)
def save_study(engine: Engine, study: StudyRow, trials: Iterable[TrialRow | dict]) -> None:
    """Insert a study and its planned trials once; re-running the same frozen study is a no-op.

    Trials may be plain dicts of TrialRow's columns: building 100,000 validated models costs
    seconds that a plan does not need (bench/).
    """
    with Session(engine) as session:
        existing = session.get(StudyRow, study.id)
        if existing is not None and existing.lock_digest != study.lock_digest:
            raise UserError(f"study '{study.id}' already exists with a different lock "
                            f"({existing.lock_digest[:19]}…)", field="id",
                            fix="give the changed study a new id; frozen studies are immutable")
        if existing is None:
            session.add(study)
            session.commit()
        rows = [t if isinstance(t, dict) else t.model_dump() for t in trials]
        insert_missing(session.connection(), TrialRow.__table__, rows)
        session.commit()


def record_planning(engine: Engine, study_id: str, lock_digest: str, section: dict) -> bool:
    """Put a planning section into the stored lock of a study already launched (the one with
    this lock digest), where the report reads it: the lock file alone would leave a plan
    written after the launch, and so every plan forced after the runs began, out of the
    report. The section lies outside lock_digest, which stays as it is. True if a row changed."""
    with Session(engine) as session:
        row = session.get(StudyRow, study_id)
        if row is None or row.lock_digest != lock_digest:
            return False
        row.lock = dict(row.lock or {}, planning=section)  # a new dict: JSON columns see no edit
        session.add(row)
        session.commit()
        return True


def first_started_at(engine: Engine, study_id: str) -> Optional[float]:
    """When the study's first attempt started running, or None if none has."""
    with engine.connect() as conn:
        return conn.execute(select(func.min(AttemptRow.started_at))
                            .where(AttemptRow.study_id == study_id)).scalar()


def study_exists(engine: Engine, study_id: str) -> bool:
    with Session(engine) as session:
        return session.get(StudyRow, study_id) is not None


def save_new_study(engine: Engine, study: Optional[StudyRow], trials: Sequence[dict]) -> None:
    """Planned trials (plain dicts of TrialRow's columns) of a study never launched before,
    each with its first attempt, queued, in one transaction; with the study's row when given
    (the first such call), so a second launcher of the same new study fails on its key."""
    with Session(engine, expire_on_commit=False) as session:
        if study is not None:
            session.add(study)
            session.flush()
        if trials:
            conn = session.connection()
            insert_missing(conn, TrialRow.__table__, trials)
            insert_missing(conn, AttemptRow.__table__,
                           _queued_rows(((t["id"], 1) for t in trials), trials[0]["study_id"]),
                           conflict=["trial_id", "attempt"])
        session.commit()


def _queued_rows(attempts: Iterable[tuple[str, int]], study_id: str) -> list[dict]:
    """Attempt rows, one per (trial id, attempt number), waiting for a worker."""
    now = time.time()
    return [dict(trial_id=t, study_id=study_id, attempt=attempt, state="queued",
                 enqueued_at=now, claims=0, regrades=0, updated_at=now)
            for t, attempt in attempts]


def create_attempts(engine: Engine, trial_ids: list[str], attempt_of: dict[str, int],
                    study_id: str) -> None:
    """Queued attempt rows, created before their messages are sent (idempotent)."""
    rows = _queued_rows(((t, attempt_of[t]) for t in trial_ids), study_id)
    with Session(engine) as session:
        insert_missing(session.connection(), AttemptRow.__table__, rows,
                       conflict=["trial_id", "attempt"])
        # A creation event tells a progress counter that a settled trial is pending again
        # (a resubmitted attempt). A first attempt's creation changes no count, since a trial
        # with no attempt is pending already, so it needs none: a launch of 100,000 trials
        # writes no events (bench/ scale). A repeat is harmless: an outcome outranks creation.
        events = [dict(study_id=study_id, trial_id=t, attempt=attempt_of[t])
                  for t in trial_ids if attempt_of[t] > 1]
        if events:
            if engine.dialect.name == "postgresql":
                copy_rows(session.connection(), AttemptEvent.__table__, events)
            else:
                session.execute(AttemptEvent.__table__.insert(), events)
        session.commit()


# ------------------------------------------------------------------ leases (agent workers)
def _take(engine: Engine, trial_id: str, attempt: int, where: list, values: dict):
    """One atomic UPDATE of an unfinished attempt under `where`: (True, None) when it took,
    else (False, the row as it is now, or None) for the caller to say why."""
    with Session(engine) as session:
        result = session.execute(
            update(AttemptRow)
            .where(AttemptRow.trial_id == trial_id, AttemptRow.attempt == attempt,
                   AttemptRow.outcome.is_(None), *where).values(**values))
        session.commit()
        if result.rowcount == 1:
            return True, None
        return False, session.exec(select(AttemptRow).where(
            AttemptRow.trial_id == trial_id, AttemptRow.attempt == attempt)).first()


def claim(engine: Engine, trial_id: str, attempt: int, owner: str, lease_seconds: float,
          max_claims: int) -> tuple[bool, str]:
    """Atomically take the attempt's lease; (False, why) when someone else holds a live one."""
    now = time.time()
    taken, row = _take(engine, trial_id, attempt,
                       [AttemptRow.state.in_(("queued", "running")),
                        AttemptRow.claims < max_claims,
                        or_(AttemptRow.lease_expires_at.is_(None),
                            AttemptRow.lease_expires_at < now)],
                       dict(lease_owner=owner, lease_expires_at=now + lease_seconds,
                            state="running", started_at=now, claims=AttemptRow.claims + 1))
    if taken:
        return True, "claimed"
    if row is None:
        return False, "no such attempt"
    if row.outcome is not None:
        return False, f"already finished as {row.outcome}"
    if row.claims >= max_claims:
        return False, "claim cap reached"
    if row.state not in ("queued", "running"):
        return False, f"attempt is {row.state}"
    return False, f"leased by {row.lease_owner} until {row.lease_expires_at:.0f}"


def renew(engine: Engine, trial_id: str, attempt: int, owner: str, lease_seconds: float) -> bool:
    with Session(engine) as session:
        result = session.execute(
            update(AttemptRow)
            .where(AttemptRow.trial_id == trial_id, AttemptRow.attempt == attempt,
                   AttemptRow.lease_owner == owner, AttemptRow.outcome.is_(None))
            .values(lease_expires_at=time.time() + lease_seconds))
        session.commit()
        return result.rowcount == 1


#: lease_owner of a grading a sweeper re-sent: the next grading delivery may take it at once
RESENT = "(re-sent)"


def claim_grading(engine: Engine, trial_id: str, attempt: int, owner: str,
                  lease_seconds: float) -> tuple[bool, str]:
    """Take the lease of an attempt waiting for its grade, as `claim` does for agent runs.

    Free when no grader holds it (fresh from the agent, or re-sent by a sweeper) or when the
    last grader's lease expired (it died mid-grade). (False, why) otherwise.
    """
    now = time.time()
    taken, row = _take(engine, trial_id, attempt,
                       [AttemptRow.state == "grading",
                        or_(AttemptRow.lease_expires_at.is_(None),
                            AttemptRow.lease_owner == RESENT, AttemptRow.lease_expires_at < now)],
                       dict(lease_owner=owner, lease_expires_at=now + lease_seconds))
    if taken:
        return True, "claimed"
    if row is None:
        return False, "no such attempt"
    if row.outcome is not None:
        return False, f"already graded as {row.outcome}"
    if row.state != "grading":
        return False, f"attempt is {row.state}"
    return False, f"graded by {row.lease_owner} until {row.lease_expires_at:.0f}"


def refuse_grading(engine: Engine, trial_id: str, attempt: int, owner: str, grader: str,
                   retry_after: float) -> bool:
    """Give back a claimed grading this grader refuses to grade (its self-check of the fixture
    failed), with no outcome: the lease passes to "(refused by GRADER)" until `retry_after`
    seconds from now, when the grading sweep re-sends it like any expired grading, to
    whichever grader takes it. Until then no delivery may claim it, so a refusing grader
    does not take the same trial back again and again. True if this owner still held it."""
    with Session(engine) as session:
        result = session.execute(
            update(AttemptRow)
            .where(AttemptRow.trial_id == trial_id, AttemptRow.attempt == attempt,
                   AttemptRow.lease_owner == owner, AttemptRow.outcome.is_(None))
            .values(lease_owner=f"(refused by {grader})",
                    lease_expires_at=time.time() + retry_after))
        session.commit()
        return result.rowcount == 1


def reserve_stranded_gradings(engine: Engine, lease_seconds: float,
                              unclaimed: bool = False) -> list[tuple[str, int]]:
    """(trial_id, attempt) of gradings whose grader's lease expired, each reserved for one re-send.

    The reservation (owner RESENT, a fresh lease) is a compare-and-set on the old expiry, so
    of several sweepers (launchers, grading workers) exactly one re-sends each; if that message
    is lost too, the reservation expires and the next sweep re-sends again. With `unclaimed`,
    gradings no grader has taken yet are included (after a broker restart lost their messages).
    """
    now = time.time()
    table = AttemptRow.__table__.c
    expired = table.lease_expires_at < now
    where = or_(expired, table.lease_expires_at.is_(None)) if unclaimed else expired
    with engine.connect() as conn:
        found = conn.execute(select(table.id, table.trial_id, table.attempt,
                                    table.lease_expires_at)
                             .where(table.state == "grading", table.outcome.is_(None), where,
                                    table.artifacts.isnot(None))).all()
        reserved = []
        for row_id, trial_id, attempt, old in found:
            same = table.lease_expires_at.is_(None) if old is None else \
                table.lease_expires_at == old
            done = conn.execute(update(AttemptRow.__table__)
                                .where(table.id == row_id, table.state == "grading",
                                       table.outcome.is_(None), same)
                                .values(lease_owner=RESENT,
                                        lease_expires_at=now + lease_seconds))
            if done.rowcount == 1:
                reserved.append((trial_id, attempt))
        conn.commit()
    return reserved


def reserve_unclaimed_gradings(engine: Engine, keys: list[tuple[str, int]],
                               lease_seconds: float) -> list[tuple[str, int]]:
    """Of `keys`, the gradings no grader has claimed since the agent handed them off, each
    reserved for one re-send as reserve_stranded_gradings does (a compare-and-set, so of
    several sweepers one re-sends each)."""
    table = AttemptRow.__table__.c
    reserved = []
    with engine.connect() as conn:
        for trial_id, attempt in keys:
            done = conn.execute(update(AttemptRow.__table__)
                                .where(table.trial_id == trial_id, table.attempt == attempt,
                                       table.state == "grading", table.outcome.is_(None),
                                       table.lease_expires_at.is_(None),
                                       table.artifacts.isnot(None))
                                .values(lease_owner=RESENT,
                                        lease_expires_at=time.time() + lease_seconds))
            if done.rowcount == 1:
                reserved.append((trial_id, attempt))
        conn.commit()
    return reserved


def grading_items(engine: Engine, keys: list[tuple[str, int]]) -> list[tuple[Any, Any]]:
    """(trial, attempt row) Records for the given keys: what a grade_trial message is built from."""
    if not keys:
        return []
    trials_c, attempts_c = TrialRow.__table__.c, AttemptRow.__table__.c
    wanted = set(keys)
    items = []
    with engine.connect() as conn:
        for chunk in range(0, len(keys), 500):
            ids = list({k[0] for k in keys[chunk:chunk + 500]})
            trials = {r.id: Record(dict(r._mapping)) for r in
                      conn.execute(select(trials_c).where(trials_c.id.in_(ids)))}
            for row in conn.execute(select(attempts_c).where(attempts_c.trial_id.in_(ids))):
                if (row.trial_id, row.attempt) in wanted and row.trial_id in trials:
                    items.append((trials[row.trial_id], Record(dict(row._mapping))))
    return items


def mark_state(engine: Engine, trial_id: str, attempt: int, owner: Optional[str] = None,
               **values: Any) -> bool:
    """Progress fields an agent worker may set (never the outcome).

    With `owner`, only while that worker still holds the lease (a worker whose lease expired
    and was taken over must not overwrite the new owner's state). True when a row changed.
    """
    assert "outcome" not in values
    conditions = [AttemptRow.trial_id == trial_id, AttemptRow.attempt == attempt,
                  AttemptRow.outcome.is_(None)]
    if owner is not None:
        conditions.append(AttemptRow.lease_owner == owner)
    with Session(engine) as session:
        result = session.execute(update(AttemptRow).where(*conditions).values(**values))
        session.commit()
        return result.rowcount == 1


def is_cancelled(engine: Engine, study_id: str) -> bool:
    with Session(engine) as session:
        row = session.get(StudyRow, study_id)
        return bool(row and row.cancelled)


# ------------------------------------------------------------------ results service
RESULT_FIELDS = ("outcome", "reason", "worker_host", "worker_env", "started_at",
                 "agent_finished_at", "graded_at", "finished_at", "metrics", "criteria",
                 "artifacts", "grade", "criterion_results", "session_checks",
                 "first_check_result", "first_check_reason", "first_check_grade",
                 "eventual_result")
#: outcomes that are a session's eventual result (the others are evalq's failures)
EVENTUAL = ("correct", "incorrect", "timed_out")


def _duration(payload: dict[str, Any]) -> Optional[float]:
    start, end = payload.get("started_at"), payload.get("finished_at")
    return end - start if isinstance(start, (int, float)) and isinstance(end, (int, float)) \
        else None


def record_attempt(engine: Engine, payload: dict[str, Any], regrade: bool = False) -> bool:
    """Upsert one attempt's result. A repeat of a recorded result changes nothing.

    With regrade=True, a grading result replaces the earlier one (the row is kept, its
    regrade count goes up). Returns True when a row was written.
    """
    return record_attempts(engine, [payload], [regrade])[0]


def record_attempts(engine: Engine, payloads: Sequence[dict[str, Any]],
                    regrades: Optional[Sequence[bool]] = None) -> list[bool]:
    """Upsert many results in one transaction, each as record_attempt would alone, in order.

    One INSERT ... ON CONFLICT per shape (regrade or not, the same result fields): a field a
    payload leaves out keeps the row's value, so payloads of different shapes cannot share a
    statement. A key repeated in the batch goes to a later statement, as if it came later.
    All or nothing: any bad payload fails the whole call (results/batch.py then retries each
    alone). Returns, per payload, whether it wrote its row.
    """
    regrades = list(regrades) if regrades is not None else [False] * len(payloads)
    now = time.time()
    groups: dict[tuple, list[int]] = {}
    seen: dict[tuple, int] = {}
    rows = []
    for index, (payload, regrade) in enumerate(zip(payloads, regrades)):
        row = _result_row(payload, now)
        key = (row["trial_id"], row["attempt"])
        repeat = seen[key] = seen.get(key, -1) + 1
        shape = (repeat, bool(regrade), tuple(k for k in RESULT_FIELDS if k in row))
        groups.setdefault(shape, []).append(index)
        rows.append(row)
    written = [False] * len(payloads)
    events = []
    with engine.begin() as conn:
        for (_, regrade, fields), members in sorted(groups.items()):
            statement = _upsert(engine, fields, regrade)
            chosen = {(rows[i]["trial_id"], rows[i]["attempt"]): i for i in members}
            for trial_id, attempt in conn.execute(statement, [rows[i] for i in members]):
                index = chosen[(trial_id, attempt)]
                written[index] = True
                payload = payloads[index]
                events.append(dict(study_id=payload["study_id"], trial_id=trial_id,
                                   attempt=attempt, outcome=payload.get("outcome"),
                                   duration=_duration(payload)))
        if events:
            conn.execute(AttemptEvent.__table__.insert(), events)
    return written


def _result_row(payload: dict[str, Any], now: float) -> dict[str, Any]:
    """The attempt row a result writes (a payload without its ids raises KeyError here)."""
    row = dict(trial_id=payload["trial_id"], attempt=payload["attempt"],
               study_id=payload["study_id"], claims=0, regrades=0)
    row.update({k: payload.get(k) for k in RESULT_FIELDS if k in payload})
    if "outcome" in payload:
        row["eventual_result"] = payload["outcome"] if payload["outcome"] in EVENTUAL else None
    for key in ("reason", "worker_host", "first_check_reason"):  # text an agent may have reached
        if isinstance(row.get(key), str):
            row[key] = valid_text(row[key])
    row.update(state="done", lease_expires_at=None, updated_at=now)
    return row


@lru_cache(maxsize=256)
def _upsert(engine: Engine, fields: tuple[str, ...], regrade: bool):
    """INSERT ... ON CONFLICT DO UPDATE ... RETURNING the keys it wrote, for one shape.

    A first result fills a row that has no outcome yet; a regrade replaces one that has.
    """
    table = AttemptRow.__table__
    columns = ("trial_id", "attempt", "study_id", "claims", "regrades", *fields,
               "state", "lease_expires_at", "updated_at")
    statement = dialect_insert(engine)(table).values({c: bindparam(c) for c in columns})
    update_values = {k: statement.excluded[k] for k in
                     (*fields, "state", "lease_expires_at", "updated_at")}
    if regrade:
        update_values["regrades"] = table.c.regrades + 1
        condition = table.c.outcome.isnot(None)
    else:
        condition = table.c.outcome.is_(None)
    return statement.on_conflict_do_update(
        index_elements=["trial_id", "attempt"], set_=update_values,
        where=condition).returning(table.c.trial_id, table.c.attempt)


# ------------------------------------------------------------------ reading
def read_study(engine: Engine, study_id: str) -> StudyRow:
    with Session(engine) as session:
        row = session.get(StudyRow, study_id)
        if row is None:
            known = [r for r in session.exec(select(StudyRow.id)).all()]
            raise UserError(f"no study '{study_id}' in the results database",
                            fix=f"run it first, or use one of: {', '.join(known) or 'none yet'}")
        return row


def trials_of(engine: Engine, study_id: str) -> list[TrialRow]:
    with Session(engine) as session:
        return list(session.exec(select(TrialRow).where(TrialRow.study_id == study_id)
                                 .order_by(TrialRow.order_index)).all())


def attempts_of(engine: Engine, study_id: str) -> list[AttemptRow]:
    with Session(engine) as session:
        return list(session.exec(select(AttemptRow).where(AttemptRow.study_id == study_id)
                                 .order_by(AttemptRow.trial_id, AttemptRow.attempt)).all())


def latest_attempts(engine: Engine, study_id: str) -> tuple[dict[str, "Record"], dict[str, "Record"]]:
    """(trials by id, each trial's latest attempt by trial id): what decides a trial's state.

    Read-only Records, not ORM objects: the launcher reads every trial of a study at start,
    and 100,000 ORM instances cost seconds (bench/).
    """
    trials = {t.id: t for t in records(engine, TrialRow, study_id, [])}
    latest: dict[str, Record] = {}
    for row in records(engine, AttemptRow, study_id, [AttemptRow.trial_id, AttemptRow.attempt]):
        latest[row.trial_id] = row  # ordered by attempt: the last one seen is the latest
    return trials, latest


class Record:
    """A read-only row with attribute access: what reports read, without ORM bookkeeping.

    Loading 100,000 attempts as ORM objects costs several seconds a report does not need.
    """

    __slots__ = ("__dict__",)

    def __init__(self, mapping: dict[str, Any]):
        self.__dict__.update(mapping)


@lru_cache(maxsize=None)
def row_type(columns: tuple[str, ...]) -> type:
    """A read-only row type with these columns as attributes, compared by identity like any
    object: a tuple underneath, a quarter of a Record's memory and built at C speed (a report
    holds 100,000 attempts: bench/ report)."""
    base = namedtuple("StoredRow", columns)
    return type("StoredRow", (base,), {"__slots__": (), "__eq__": object.__eq__,
                                       "__ne__": object.__ne__, "__hash__": object.__hash__,
                                       "__doc__": row_type.__doc__})


def records(engine: Engine, table, study_id: str, order_by,
            columns: Optional[tuple[str, ...]] = None) -> list[Any]:
    """Rows of `table` for a study as read-only rows (row_type), JSON columns decoded.
    `columns` reads only those: a report over 100,000 attempts skips the JSON and timestamps
    it never reads. Fetched whole, and each JSON column read as text and decoded by one
    json.loads of all its values: a Python call per value less, and the keys repeated in
    every row are one string each (the decoder reuses keys within a document)."""
    table_columns = table.__table__.c
    chosen = list(table_columns) if columns is None else [table_columns[n] for n in columns]
    is_json = [isinstance(c.type, JSON) for c in chosen]
    statement = select(*[cast(c, Text).label(c.name) if j else c
                         for c, j in zip(chosen, is_json)]
                       ).where(table_columns.study_id == study_id).order_by(*order_by)
    with engine.connect() as conn:
        result = conn.execute(statement)
        names = tuple(result.keys())
        rows = result.all()
    if not rows:
        return []
    values = list(zip(*rows))
    for i, j in enumerate(is_json):
        if j:
            values[i] = _decode_all(values[i])
    # tuple.__new__ straight, not namedtuple._make: a Python call less per row
    return list(map(partial(tuple.__new__, row_type(names)), zip(*values)))


def _decode_all(texts: Sequence[Optional[str]]) -> list[Any]:
    """JSON texts (None for SQL NULL) decoded as one array, in order."""
    return json.loads("[" + ",".join(["null" if t is None else t for t in texts]) + "]")


def set_cancelled(engine: Engine, study_id: str) -> int:
    """Flag the study; queued attempts become 'cancelled', running ones stop at their next poll."""
    with Session(engine) as session:
        session.execute(update(StudyRow).where(StudyRow.id == study_id).values(cancelled=True))
        result = session.execute(update(AttemptRow).where(AttemptRow.study_id == study_id,
                                                          AttemptRow.state == "queued",
                                                          AttemptRow.outcome.is_(None))
                                 .values(state="cancelled"))
        session.commit()
        return result.rowcount


def count_by(engine: Engine, study_id: str) -> dict[str, int]:
    with Session(engine) as session:
        rows = session.execute(select(AttemptRow.state, func.count()).where(
            AttemptRow.study_id == study_id).group_by(AttemptRow.state)).all()
        return {state: n for state, n in rows}
