"""Who ran an attempt: host and environment, so differing worker environments can be flagged."""

from __future__ import annotations

import platform
import socket
import sys
import threading
from functools import lru_cache

from evalq import __version__


_environment_lock = threading.Lock()


def worker_environment(agent_sandbox: str | None = None) -> dict:
    """Versions are asked in the agent sandbox (a throwaway profile, no credential), once per
    process: the lock keeps hundreds of trial threads starting together from each asking."""
    with _environment_lock:
        return _environment(agent_sandbox)


@lru_cache(maxsize=4)
def _environment(agent_sandbox: str | None) -> dict:
    from evalq.workers.agents.registry import ADAPTERS

    tools = {}
    for name, adapter in sorted(ADAPTERS.items()):
        version = getattr(adapter, "version", None)
        tools[name] = version(agent_sandbox) if callable(version) else None
    return {
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "evalq": __version__,
        "agents": tools,
    }


def host_name(celery_hostname: str = "") -> str:
    """The Celery node name's host part (workers may be given names), else the machine's."""
    if "@" in celery_hostname:
        return celery_hostname.split("@", 1)[1]
    return celery_hostname or socket.gethostname() or sys.platform
