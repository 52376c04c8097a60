"""The plan as a pre-registration record: a "planning" section in the study lock.

The section sits beside the frozen inputs but outside ``lock_digest`` on purpose: the
lock digest is the study's identity and must change only when a frozen input changes.
A plan is advice computed from another study's data; re-planning must neither rename the
study nor make its results exploratory. The section carries its own digest instead, so an
edit to it can be seen, and it is stored with the lock in the results database at launch.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from evalq import __version__
from evalq.digest import data_digest
from evalq.errors import UserError
from evalq.fileio import read_json_object, write_json_atomic

SECTION = "planning"
_KEPT = ("schema", "pilot", "comparison", "target", "estimates", "simulation", "current_design",
         "chosen_design", "chosen_reason", "power_warning", "run_distributions", "forecast",
         "assumptions", "pilot_cautions")


def planning_section(plan: dict[str, Any]) -> dict[str, Any]:
    """The parts of a plan worth pre-registering (not the whole grid), with a digest over them."""
    body = {key: plan[key] for key in _KEPT if key in plan}
    body["evalq_version"] = __version__
    return dict(body, planning_digest=data_digest(body), planned_at=time.time())


def write_planning(study: Any, plan: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Add (or replace) the planning section of the study's lock, freezing the study first if needed.

    Returns the lock and its path; ``lock_digest`` is unchanged by this.
    """
    from evalq.study.lock import freeze, verify_lock

    lock = verify_lock(study) or freeze(study)
    lock = dict(lock, **{SECTION: planning_section(plan)})
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
