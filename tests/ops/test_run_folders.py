"""Run folders of killed trials are removed by the sweep once their owner process is gone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from evalq.ops.run_folders import OWNER_FILE, record_owner, sweep_run_folders

MAKE_FOLDER = """
import sys, time
from pathlib import Path
from evalq.ops.run_folders import record_owner
from evalq.workers.profile import new_profile
profile = new_profile(Path(sys.argv[1]))
record_owner(profile.root)
print(profile.root, flush=True)
time.sleep(600)
"""


def test_sweep_removes_folders_of_killed_owners_only(tmp_path):
    runs = tmp_path / "runs"
    child = subprocess.Popen([sys.executable, "-c", MAKE_FOLDER, str(runs)],
                             stdout=subprocess.PIPE, text=True)
    try:
        killed = Path(child.stdout.readline().strip())
        assert sweep_run_folders(runs) == 0 and killed.is_dir()  # owner alive: kept
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    mine = runs / "evalq-run-live"
    mine.mkdir()
    record_owner(mine)  # this test process: alive
    other_host = runs / "evalq-run-elsewhere"
    other_host.mkdir()
    (other_host / OWNER_FILE).write_text(json.dumps({"host": "another-machine",
                                                     "pid": child.pid, "start": "1"}))
    reused = runs / "evalq-run-reused-pid"
    reused.mkdir()  # our own pid, but a start time that is not ours: the owner is gone
    (reused / OWNER_FILE).write_text(json.dumps({"host": os.uname().nodename,
                                                 "pid": os.getpid(), "start": "1"}))
    unowned = runs / "evalq-run-unowned"
    unowned.mkdir()

    assert sweep_run_folders(runs) == 2
    assert not killed.exists() and not reused.exists()
    assert mine.is_dir() and other_host.is_dir() and unowned.is_dir()
