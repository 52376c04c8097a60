"""The plan as a pre-registration record: a "planning" section in the study lock.

The section sits beside the frozen inputs but outside ``lock_digest`` on purpose: the
lock digest is the study's identity and must change only when a frozen input changes.
A plan is advice computed from another study's data; re-planning must neither rename the
study nor make its results exploratory. The section carries its own digest instead, so an
edit to it can be seen, and it is stored with the lock in the results database at launch.

A plan made after the study began running is not a pre-registration: writing one is refused
unless forced, and a forced one says so in the section (``preregistration``). "Began running"
means the study has attempt rows in the results database.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from evalq import __version__
from evalq.digest import data_digest
from evalq.errors import UserError
from evalq.fileio import read_json_object, write_json_atomic

SECTION = "planning"
_KEPT = ("schema", "pilot", "comparison", "target", "floors", "estimates", "simulation",
         "current_design", "chosen_design", "chosen_reason", "ranking", "power_warning",
         "run_distributions", "forecast", "assumptions", "pilot_cautions")


def attempts_recorded(engine: Any, study_id: str) -> int:
    """How many attempt rows (any state) the results database holds for the study."""
    from evalq.results.store import count_by

    return sum(count_by(engine, study_id).values())


def preregistration(study: Any, attempts: int, force: bool) -> dict[str, Any]:
    """Whether the plan precedes the runs; refuses a plan after the fact unless forced."""
    if attempts and not force:
        raise UserError(f"study '{study.id}' already has {attempts} attempts in the results "
                        "database: a plan written after the runs began is not a pre-registration",
                        file=study.lock_path, field="--write-lock",
                        fix="plan before running the study, or pass --force to record the plan "
                            "marked as written after the fact")
    return {"before_runs": attempts == 0, "attempts_at_planning": attempts,
            "forced": bool(force and attempts),
            "note": None if attempts == 0 else
            f"written after {attempts} attempts had run (--force): not a pre-registration"}


def planning_section(plan: dict[str, Any],
                     prereg: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The parts of a plan worth pre-registering (not the whole grid), with a digest over them."""
    body = {key: plan[key] for key in _KEPT if key in plan}
    body["evalq_version"] = __version__
    if prereg is not None:
        body["preregistration"] = prereg
    return dict(body, planning_digest=data_digest(body), planned_at=time.time())


def write_planning(study: Any, plan: dict[str, Any], *, attempts: int = 0,
                   force: bool = False) -> tuple[dict[str, Any], Any]:
    """Add (or replace) the planning section of the study's lock, freezing the study first if needed.

    ``attempts`` is attempts_recorded() for the study: above 0 the write is refused unless
    ``force``. Returns the lock and its path; ``lock_digest`` is unchanged by this.
    """
    from evalq.study.lock import freeze, verify_lock

    prereg = preregistration(study, attempts, force)
    lock = verify_lock(study) or freeze(study)
    lock = dict(lock, **{SECTION: planning_section(plan, prereg)})
    target = study.lock_path
    write_json_atomic(target, lock, sort_keys=True)
    return lock, target


def read_planning(study: Any) -> Optional[dict[str, Any]]:
    """The planning section of the study's lock file, or None when there is none (or no lock)."""
    path = study.lock_path
    if not path.exists():
        return None
    try:
        return read_json_object(path, "the study lock", "re-freeze the study").get(SECTION)
    except UserError:
        return None  # a corrupt lock is refused where the lock itself is checked
