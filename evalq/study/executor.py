"""Who executed a study's runs, recorded so those people never rate them.

Blinded review needs raters who did not run what they score: each launch of a study adds the
launching person's id to the stored lock's `executed_by` (outside its digest, like the sandbox
it ran in), exported result rows carry the list as `executor_ids`, and `evalq blind` and
`evalq import` check raters against it. `EVALQ_EXECUTOR` names the person (an id from the
rater pool); without it, the login name the command runs under.
"""

from __future__ import annotations

import getpass
import os
from typing import Any, Optional


def executor_id() -> Optional[str]:
    named = os.environ.get("EVALQ_EXECUTOR", "").strip()
    if named:
        return named
    try:
        return getpass.getuser() or None
    except (KeyError, OSError):  # a uid with no passwd entry (a container's)
        return None


def executors(value: Any) -> list[str]:
    """A recorded executor field (one id, a list of them, or nothing) as a list of ids."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def with_executor(lock: dict, who: Optional[str]) -> dict:
    """The lock with `who` among its executors (a new dict; unchanged when already there)."""
    known = executors(lock.get("executed_by"))
    if who is None or who in known:
        return dict(lock, executed_by=known)
    return dict(lock, executed_by=known + [who])


def record_executor(engine, study_id: str, who: Optional[str]) -> None:
    """Add `who` to a stored study's executors: a study resumed by someone else was executed
    by them too."""
    from sqlmodel import Session

    from evalq.results.store import StudyRow

    if who is None:
        return
    with Session(engine) as session:
        row = session.get(StudyRow, study_id)
        if row is None or who in executors((row.lock or {}).get("executed_by")):
            return
        row.lock = with_executor(row.lock or {}, who)  # a new dict: JSON columns see no edit
        session.add(row)
        session.commit()
