"""The launch preflight (`evalq run --dry-run --check`): each condition's agent started once,
in the configured agent sandbox (for a Harbor task, made from the task's environment, as a
worker's), on the study's first fixture, with its agent source mounted, through the same
adapter run a worker makes, before anything is enqueued or stored.

A broken commit (a missing file, a bad import, a wrong argv) shows here in seconds instead of
as a study's worth of `incorrect` runs. Nothing is graded and nothing is kept: the run's
profile, its workspace and the exported source are temporary folders, removed afterwards.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from evalq.analysis.agent_errors import agent_error
from evalq.artifacts import ArtifactStore
from evalq.config import Settings
from evalq.fixtures.archive import pack_workspace
from evalq.fixtures.fixture import materialize
from evalq.fixtures.harbor.agent_root import agent_sandbox_for
from evalq.study.agent_source import exported
from evalq.study.budgets import effective_limits
from evalq.workers.agent_source import checked_source
from evalq.workers.agents.base import AgentContext
from evalq.workers.agents.registry import get_adapter
from evalq.workers.profile import new_profile
from evalq.workers.sandbox.base import DEFAULT_DISK_MB


@dataclass
class AgentCheck:
    """How one condition's agent did when started once."""

    condition: str
    fixture: str
    #: None when it started and finished; else what went wrong (an agent error's kind, or
    #: why evalq could not run it at all)
    problem: Optional[str]
    exit_code: Optional[int] = None
    model_calls: Optional[int] = None
    stop_reason: Optional[str] = None
    stderr_tail: Optional[str] = None
    duration_seconds: Optional[float] = None
    timed_out: bool = False
    #: the agent source mounted: its digest and, for a commit, the commit id
    source_digest: Optional[str] = None
    source_commit: Optional[str] = None

    @property
    def started(self) -> bool:
        return self.problem is None


def _source(study, name: str, folder: Path):
    """The condition's source exported and unpacked as a worker has it (digest-checked),
    or (None, None, None) when it names none."""
    spec = study.sources.get(name)
    if spec is None:
        return None, None, None
    with exported(spec) as (tree_parent, done):
        store = ArtifactStore(folder / "store")
        entry = {"digest": done.digest, "ref": store.put(pack_workspace(tree_parent / "tree"))}
    path = checked_source(store, entry, done.digest, folder / "cache")
    return path, done.digest, done.commit


def check_condition(study, condition, settings: Settings) -> AgentCheck:
    """Start the condition's agent once on the study's first fixture and say how it went."""
    fixture = study.fixtures[0]
    check = AgentCheck(condition=condition.name, fixture=fixture.id, problem=None)
    folder = Path(tempfile.mkdtemp(prefix="evalq-check-"))
    profile = None
    try:
        source, check.source_digest, check.source_commit = _source(study, condition.name,
                                                                    folder)
        if condition.name in study.skills:
            condition = condition.model_copy(update={"skill": str(study.skills[condition.name])})
        profile = new_profile(folder / "runs", disk_mb=DEFAULT_DISK_MB)  # as a worker's run
        materialize(fixture, profile.workspace)
        ctx = AgentContext(fixture=fixture, condition=condition, profile=profile,
                           prompt=fixture.spec.prompt.strip(),
                           limits=effective_limits(fixture.spec.limits, study.manifest),
                           sandbox=agent_sandbox_for(fixture, settings.agent_sandbox),
                           evalq_home=settings.home,
                           budgets=study.manifest.budgets, agent_source=source)
        result = get_adapter(condition.agent).run(ctx)
    except Exception as exc:  # noqa: BLE001 - whatever stopped it from starting is the answer
        check.problem = f"could not be started: {type(exc).__name__}: {exc}"
        return check
    finally:
        if profile is not None:
            profile.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    m = result.metrics
    check.exit_code, check.model_calls, check.stop_reason = m.exit_code, m.model_calls, \
        m.stop_reason
    check.stderr_tail, check.duration_seconds = m.stderr_tail, m.duration_seconds
    check.timed_out = result.timed_out
    kind = agent_error(m.model_dump(mode="json"), "timed_out" if result.timed_out else "incorrect")
    check.problem = None if kind is None else f"the agent {kind}"
    return check


def check_agents(study, settings: Settings) -> Iterator[AgentCheck]:
    """Each condition's check, in the manifest's order, as each one ends."""
    for condition in study.manifest.conditions:
        yield check_condition(study, condition, settings)
