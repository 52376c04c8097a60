"""A stage's declared change, applied to the run's workspace before its agent starts.

The workspace is a baseline run's final workspace: agent-written, so hostile. The change
script is the experimenter's, but what it runs (a build, an install hook, the project's own
scripts) may be the baseline agent's code; so it runs only in a sealed agent sandbox, as the
agent does, with no network door, never on the worker itself. Its exit status and output are
recorded beside the run (the artifact `change`); a failing change does not stop the run:
whether the integration survived it is for the hidden checks to say.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from evalq.errors import InfrastructureError
from evalq.fixtures.derived import CHANGE_FILE, change_script
from evalq.plaintext import valid_text
from evalq.workers.agents.base import OUTPUT_LIMIT, reclaim_workspace
from evalq.workers.sandbox import AgentJob, get_agent_sandbox
from evalq.workers.sandbox.base import agent_limits

#: how much of the change's output the record keeps
TAIL_BYTES = 4096


def _tail(data: bytes) -> str:
    return valid_text(data[-TAIL_BYTES:].decode("utf-8", "replace"))


def apply_change(fixture, profile, limits, budgets, sandbox: Optional[str]
                 ) -> Optional[dict[str, Any]]:
    """Run the fixture's change script in the agent sandbox, in the workspace; its record,
    or None when the fixture carries no change."""
    script = change_script(fixture)
    if script is None:
        return None
    box = get_agent_sandbox(sandbox)
    if not box.sealed:
        raise InfrastructureError("a stage's change runs on agent-written files and only in a "
                                  "sealed agent sandbox; set EVALQ_AGENT_SANDBOX=bwrap or docker")
    folder = Path(tempfile.mkdtemp(prefix="evalq-change-"))
    try:  # a copy of the script alone, read-only: the fixture's hidden checks stay outside
        shutil.copyfile(script, folder / CHANGE_FILE)
        os.chmod(folder / CHANGE_FILE, 0o644)
        os.chmod(folder, 0o755)
        proc = box.run(AgentJob(argv=["/bin/sh", str(folder / CHANGE_FILE)],
                                env=dict(profile.env), workspace=profile.workspace,
                                profile_root=profile.root,
                                limits=agent_limits(limits, budgets, OUTPUT_LIMIT),
                                readonly=[folder], door=None, label=f"{fixture.id}/change"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    swapped = reclaim_workspace(profile.workspace)
    return {"exit_code": -proc.signal if proc.signal else proc.exit_code,
            "timed_out": proc.timed_out, "duration_seconds": round(proc.duration_seconds, 3),
            "sandbox": box.name, "workspace_replaced": swapped,
            "stdout_tail": _tail(proc.stdout), "stderr_tail": _tail(proc.stderr)}
