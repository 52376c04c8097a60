"""Whether a study's agents ran sealed: the agent sandbox each attempt recorded, and the lock's.

An attempt run with EVALQ_AGENT_SANDBOX=none (debugging) had the host in reach: the report
marks the study unsealed and its claims exploratory, like any weaker guarantee.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional


def sealing(lock: Optional[dict], attempts: Iterable[Any]) -> dict[str, Any]:
    """{"sealed", "backends", "unsealed_attempts", "unknown_attempts", "lock_agent_sandbox"}."""
    backends: dict[str, int] = {}
    unknown = 0
    for attempt in attempts:
        name = (attempt.worker_env or {}).get("agent_sandbox")
        if name is None:
            unknown += 1
        else:
            backends[name] = backends.get(name, 0) + 1
    unsealed = backends.get("none", 0)
    lock_box = (lock or {}).get("agent_sandbox")
    if unsealed or lock_box == "none":
        sealed: Optional[bool] = False
    elif backends and not unknown:
        sealed = True
    else:
        sealed = None  # attempts from before the agent sandbox, or none run yet
    return {"sealed": sealed, "backends": dict(sorted(backends.items())),
            "unsealed_attempts": unsealed, "unknown_attempts": unknown,
            "lock_agent_sandbox": lock_box}
