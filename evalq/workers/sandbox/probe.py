"""Probes of an installed agent (`--version` and the like) in a throwaway sandboxed profile.

Never with the worker's HOME or environment, and with no credential: agents write config and
cache dirs where they run, and a probe is still the agent's code.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from evalq.errors import EvalqError
from evalq.graders.sandbox.base import SandboxLimits
from evalq.proc import ProcResult
from evalq.workers.profile import new_profile
from evalq.workers.sandbox import AgentJob, get_agent_sandbox

log = logging.getLogger("evalq.probe")
PROBE_LIMITS = SandboxLimits(timeout_seconds=30, memory_mb=1024, pids=128, cpus=1.0,
                             output_limit_bytes=1_000_000, disk_mb=64)


def probe(argv: list[str], readonly: list[Path], *, env: Optional[dict[str, str]] = None,
          sandbox: Optional[str] = None) -> Optional[ProcResult]:
    """Run argv in a fresh profile of its own, sealed; None when it could not run at all."""
    profile = new_profile(disk_mb=PROBE_LIMITS.disk_mb)
    profile.workspace.mkdir()
    try:
        box = get_agent_sandbox(sandbox)
        return box.run(AgentJob(argv=argv, env={**profile.env, **(env or {})},
                                workspace=profile.workspace, profile_root=profile.root,
                                limits=PROBE_LIMITS, readonly=readonly if box.sealed else [],
                                label="probe"))
    except (EvalqError, OSError) as exc:
        log.warning("probe %s failed: %s", argv[0], exc)
        return None
    finally:
        profile.cleanup()
