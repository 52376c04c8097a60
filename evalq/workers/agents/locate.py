"""Finding an agent's executable: a condition's `executable` setting, EVALQ_AGENT_PATH, PATH.

Agents are often installed outside PATH (an npm prefix, a separate virtualenv), so workers
name extra directories in EVALQ_AGENT_PATH (os.pathsep-separated) instead of changing PATH.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Optional

def search_path() -> str:
    from evalq.config import load_settings

    extra = load_settings().agent_path or ""
    return os.pathsep.join(p for p in (extra, os.environ.get("PATH", "")) if p)


def find_executable(name: Optional[str], settings: dict[str, Any] | None = None) -> Optional[str]:
    """Absolute path of the agent's executable, or None when it is not installed."""
    override = (settings or {}).get("executable")
    if override:
        return shutil.which(str(override), path=search_path()) or None
    if name is None:
        return None
    return shutil.which(name, path=search_path())
