"""Hostile trees an agent leaves, through the real runner (issue 14, item 6): a study whose
agent leaves a socket, a FIFO, a hard link and a 1,500-deep tree is graded with those named in
its reason; one that leaves a workspace over the size limit is incorrect with the reason
recorded: it was left `running` once, then an infrastructure_failure, which an agent could
use to take a losing run out of the rates. No run folder stays behind."""

from __future__ import annotations

import json
import os
import sqlite3

from conftest import copy_fixture, run_cli
from evalq.graders.sandbox.cleanup import remove_tree

# No braces in the code: argv items are format strings ({workspace} and friends).
LEAVE_TREES = (
    "import os, socket, sys; os.chdir(sys.argv[1]); "
    "socket.socket(socket.AF_UNIX).bind('agent.sock'); os.mkfifo('pipe'); "
    "os.link('textutil/slug.py', 'slug-again.py'); "
    "fd = os.open('.', os.O_RDONLY)\n"
    "for _ in range(1500):\n"
    "    os.mkdir('d', dir_fd=fd); c = os.open('d', os.O_RDONLY, dir_fd=fd); os.close(fd); fd = c\n"
)
LEAVE_HUGE = ("import sys; f = open(sys.argv[1] + '/big.bin', 'wb'); "
              "f.truncate(300 * 1024 * 1024)")


def _condition(name: str, code: str) -> str:
    return (f'\n[[conditions]]\nname = "{name}"\nagent = "command"\n'
            f'settings = {{ argv = ["python3", "-c", {json.dumps(code)}, "{{workspace}}"] }}\n')


def test_runner_records_every_hostile_workspace(tmp_path):
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    fixture = copy_fixture("py-slugify-bugfix", fixtures)
    study = tmp_path / "study.toml"
    study.write_text(f'id = "trees"\nfixtures = ["{fixture.as_posix()}"]\nrepetitions = 1\n'
                     f'max_attempts = 1\n[budgets]\nwall_seconds = 60\n'
                     + _condition("trees", LEAVE_TREES) + _condition("huge", LEAVE_HUGE))
    home = tmp_path / "home"
    try:
        _check_run(study, home)
    finally:  # pytest's own clean-up of old tmp dirs would recurse into a deep leftover
        if not os.environ.get("KEEP_HOME"):
            assert remove_tree(home) == []


def _check_run(study, home):
    proc = run_cli(["run", str(study)], {"EVALQ_HOME": str(home)}, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout  # no failure of evalq's
    db = sqlite3.connect(home / "evalq.db")
    rows = dict(((cond, (outcome, reason)) for cond, outcome, reason in db.execute(
        "select t.condition, a.outcome, a.reason from attempts a join trials t "
        "on t.id = a.trial_id")))
    outcome, reason = rows["trees"]
    assert outcome == "incorrect", reason  # the untouched workspace fails the hidden tests
    for named in ("agent.sock: unix socket", "pipe: FIFO", "slug-again.py: hard link",
                  "textutil/slug.py: hard link", "deeper than 64 levels"):
        assert named in reason, (named, reason)
    outcome, reason = rows["huge"]
    assert outcome == "incorrect", reason
    assert reason.startswith("not graded: workspace over 268435456 bytes"), reason
    runs = home / "runs"
    assert not runs.exists() or os.listdir(runs) == []
