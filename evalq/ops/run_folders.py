"""Run folders (EVALQ_HOME/runs/evalq-run-*) of killed trials: who made each, and removing them.

A runner that finishes removes its folder; one that is SIGKILLed cannot. So each folder gets an
owner file when it is made (host, pid and the process's start time, which tells a reused pid
from the original), and the sweep removes folders whose owner on this host is gone. Folders of
other hosts (a shared EVALQ_HOME) are left to their own host's sweep.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path
from typing import Optional

from evalq.report.json_text import dumps
from evalq.graders.sandbox.cleanup import remove_tree
from evalq.graders.sandbox.owner import process_start
from evalq.graders.sandbox.scratch import unmount
from evalq.safe_read import read_left

log = logging.getLogger("evalq.janitor")

OWNER_FILE = ".evalq-owner.json"
PATTERN = "evalq-run-*"
MAX_OWNER_BYTES = 4096


def record_owner(folder: Path) -> None:
    """Write who made the folder (this process), so a sweep can tell when it is orphaned."""
    owner = {"host": socket.gethostname(), "pid": os.getpid(),
             "start": process_start(os.getpid())}
    (folder / OWNER_FILE).write_text(dumps(owner))


def _orphaned(folder: Path, host: str) -> bool:
    # the folder is the agent's sandbox: its owner file may be a FIFO, a link or huge by now
    raw = read_left(folder, folder / OWNER_FILE, MAX_OWNER_BYTES)
    try:
        owner = json.loads(raw) if raw is not None else None
        pid, start = int(owner["pid"]), owner.get("start")
    except (ValueError, KeyError, TypeError):
        return False  # no owner recorded (yet, or an older evalq): not ours to judge
    if owner.get("host") != host:
        return False
    now = process_start(pid)
    return now is None or (start is not None and now != start)


def sweep_run_folders(runs_dir: Path) -> int:
    """Remove this host's run folders whose owning process is gone; returns how many."""
    if not runs_dir.is_dir():
        return 0
    host, removed = socket.gethostname(), 0
    for folder in runs_dir.glob(PATTERN):
        if folder.is_dir() and not folder.is_symlink() and _orphaned(folder, host):
            if os.path.ismount(folder):  # a run's size-capped tmpfs (workers/profile.py)
                unmount(folder)
            remove_tree(folder)  # however deep a tree the agent left (rmtree recurses)
            removed += not folder.exists()
    if removed:
        log.warning("removed %d run folder(s) of killed trials under %s", removed, runs_dir)
    return removed
