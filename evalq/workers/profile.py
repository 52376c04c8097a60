"""A fresh, isolated profile per run: HOME, XDG dirs and TMPDIR of its own, a minimal environment.

No two runs share any of these directories, so nothing an agent writes into its profile is
visible to the next run (SPEC R1).
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from evalq.graders.sandbox.cleanup import remove_tree

#: Variables an agent process gets from evalq itself; nothing else of the worker's environment.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "NO_COLOR": "1",
    "TERM": "dumb",
    "CI": "true",
    "DO_NOT_TRACK": "1",
}


@dataclass
class Profile:
    root: Path
    home: Path
    tmp: Path
    workspace: Path
    logs: Path
    env: dict[str, str] = field(default_factory=dict)

    def cleanup(self) -> None:
        """Remove the run root, however deep a tree the agent left (no recursion, no traceback)."""
        left = remove_tree(self.root)
        if left:
            logging.getLogger("evalq.worker").warning("profile %s not fully removed: %s",
                                                      self.root, "; ".join(left))


def new_profile(base_dir: Path | None = None, extra_env: dict[str, str] | None = None,
                path_prefix: list[str] | None = None) -> Profile:
    """Make a new run root with home/, tmp/, logs/ and an empty workspace path beside them."""
    if base_dir is not None:
        base_dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="evalq-run-", dir=base_dir))
    home, tmp, logs = root / "home", root / "tmp", root / "logs"
    for folder in (home, tmp, logs):
        folder.mkdir()
    xdg = {"XDG_CONFIG_HOME": home / ".config", "XDG_CACHE_HOME": home / ".cache",
           "XDG_DATA_HOME": home / ".local" / "share", "XDG_STATE_HOME": home / ".local" / "state"}
    for folder in xdg.values():
        folder.mkdir(parents=True)
    env = dict(BASE_ENV)
    if path_prefix:
        env["PATH"] = os.pathsep.join([*path_prefix, env["PATH"]])
    env.update({"HOME": str(home), "TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp),
                **{k: str(v) for k, v in xdg.items()}})
    env.update(extra_env or {})
    return Profile(root=root, home=home, tmp=tmp, workspace=root / "workspace", logs=logs, env=env)
