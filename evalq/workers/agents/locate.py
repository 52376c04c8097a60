"""Finding an agent's executable: a condition's `executable` setting, EVALQ_AGENT_PATH, PATH.

Agents are often installed outside PATH (an npm prefix, a separate virtualenv), so workers
name extra directories in EVALQ_AGENT_PATH (os.pathsep-separated) instead of changing PATH.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Optional

#: version managers' dispatch scripts (pyenv, rbenv, nodenv, asdf, mise): each runs the manager
#: itself to pick a version, from state that a sandbox does not expose, so one found first on
#: PATH would fail inside it; the next real executable on PATH is taken instead (a shims
#: directory named in EVALQ_AGENT_PATH is kept: that was asked for)
SHIM_DIRS = ("shims",)


def search_path() -> str:
    from evalq.config import load_settings

    extra = load_settings().agent_path or ""  # named on purpose: kept as given
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and os.path.basename(os.path.normpath(p)) not in SHIM_DIRS]
    return os.pathsep.join(p for p in (extra, *path) if p)


def find_executable(name: Optional[str], settings: dict[str, Any] | None = None) -> Optional[str]:
    """Absolute path of the agent's executable, or None when it is not installed."""
    override = (settings or {}).get("executable")
    if override:
        return shutil.which(str(override), path=search_path()) or None
    if name is None:
        return None
    return shutil.which(name, path=search_path())
