"""No sandbox, for debugging only: the agent is a plain process on the worker host.

A study run this way is marked unsealed in its lock and report (none of the sealing guarantees holds).
"""

from __future__ import annotations

from typing import Optional

from evalq.proc import ProcResult, run_bounded
from evalq.workers.sandbox.base import AgentJob, AgentSandbox


class NoSandbox(AgentSandbox):
    name = "none"
    sealed = False

    def model_url(self, upstream: Optional[str]) -> Optional[str]:
        return upstream or None

    def run(self, job: AgentJob) -> ProcResult:
        return run_bounded(job.argv, env=job.env, cwd=str(job.workspace),
                           timeout=job.limits.timeout_seconds,
                           output_limit=job.limits.output_limit_bytes, stdin=job.stdin,
                           should_stop=job.should_stop)
