"""A sealed `command` agent that leaves hostile data ends as its own outcome, in both sandboxes.

Inside bwrap or Docker, the agent leaves file names that are not UTF-8 (with newlines, escape
sequences and bidi controls), symlinks to host files and to nowhere, a FIFO, a unix socket, a
file and a folder of mode 000, a deep and a wide tree and a sparse file, and writes a
usage.json of NaN, negative, huge and non-numeric counts and a report and streams of invalid
UTF-8. Such a name once made the diff raise and the run an infrastructure_failure (out of
every rate: a way for a losing agent to drop its run), and such a usage.json once put NaN in
report.json and negative counts in the run row. The run must be graded (`incorrect`: the
workspace is untouched), its counts unavailable with their reasons, and every output the
study makes (report.json, report.md and .html, transcripts, both exports, the database's
JSON, the stored artifacts) strict JSON and valid UTF-8.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agents"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conftest import run_cli  # noqa: E402
from strict_output import strict_json, strict_jsonl  # noqa: E402
from test_agents_support import artifact, attempts, copy_fixture, run_study  # noqa: E402
from evalq.graders.sandbox.cleanup import remove_tree  # noqa: E402

LEAVES = r'''
import os, socket, sys
workspace, out = os.fsencode(sys.argv[1]), sys.argv[2]
os.chdir(workspace)
for name in (b"bad-\xff\xfe.py", b"new\nline.txt", b"esc-\x1b[31mred", b"bidi-\xe2\x80\xae.txt",
             b"back\\slash", b"--- a", b"\xed\xa0\x80surrogate"):
    with open(name, "wb") as f:
        f.write(b"data \xff\n")
os.symlink("/etc/passwd", b"link-\xff")
os.symlink(b"\xff" * 50, b"dangling")
os.mkfifo(b"fifo-\xff")
socket.socket(socket.AF_UNIX).bind(b"sock-\xff")
with open("locked.txt", "w") as f:
    f.write("x")
os.chmod("locked.txt", 0)
os.mkdir(b"closed-\xff")
with open(b"closed-\xff/in", "w") as f:
    f.write("x")
os.chmod(b"closed-\xff", 0)
with open("sparse.bin", "wb") as f:
    f.truncate(20 * 1024 * 1024)
os.mkdir(b"wide\xff")
for i in range(2000):
    open(b"wide\xff/%d\xff\n" % i, "wb").close()
fd = os.open(".", os.O_RDONLY)
for _ in range(100):
    os.mkdir(b"d\xff", dir_fd=fd)
    child = os.open(b"d\xff", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = child
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "usage.json"), "w") as f:
    f.write('{"input_tokens": NaN, "output_tokens": -5, "cache_read_tokens": 1e30, '
            '"cache_write_tokens": 99999999999999999999999, "turns": "7", '
            '"tool_calls": 3, "cost_usd": Infinity}')
with open(os.path.join(out, "report.txt"), "wb") as f:
    f.write(b"done \xff\xfe \x1b[2J \xed\xa0\x80")
sys.stdout.buffer.write(b"out \xff\x1b[31m\n")
sys.stderr.buffer.write(b"err \xfe\n")
'''


def _condition(name: str) -> str:
    code = LEAVES.replace("{", "{{").replace("}", "}}")
    argv = json.dumps(["python3", "-c", code, "{workspace}", "{output_dir}"])
    return f'\n[[conditions]]\nname = "{name}"\nagent = "command"\nsettings = {{ argv = {argv} }}\n'


@pytest.mark.parametrize("sandbox", ["bwrap", "docker"])
def test_hostile_agent_data_is_graded_and_every_output_strict(tmp_path, sandbox):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path / "fixtures")
    manifest = tmp_path / "study.toml"
    manifest.write_text(f'id = "agentdata"\nfixtures = ["{fixture.as_posix()}"]\n'
                        'repetitions = 1\nmax_attempts = 1\n[budgets]\nwall_seconds = 120\n'
                        + _condition("hostile"))
    home = tmp_path / "home"
    try:
        report = run_study(manifest, home, {"EVALQ_AGENT_SANDBOX": sandbox})
        _check(tmp_path, home, report, sandbox)
    finally:
        assert remove_tree(home) == []


def _check(tmp_path: Path, home: Path, report: dict, sandbox: str) -> None:
    (row,) = attempts(home)
    assert row["outcome"] == "incorrect", row["reason"]  # graded: the bug is still there
    assert row["worker_env"]["agent_sandbox"] == sandbox
    for named in ("link-\\xff: symlink to /etc/passwd dropped", "fifo-\\xff: FIFO dropped",
                  "sock-\\xff: unix socket dropped", "deeper than 64 levels"):
        assert named in row["reason"], (named, row["reason"])
    metrics = row["metrics"]
    for field, why in (("input_tokens", "not a finite number"), ("output_tokens", "negative"),
                       ("cache_read_tokens", "over"), ("cache_write_tokens", "over"),
                       ("turns", "not a number"), ("reported_cost_usd", "not a finite")):
        assert metrics[field] is None, field
        assert why in metrics["unreported"][field], (field, metrics["unreported"])
    assert metrics["tool_calls"] == 3  # a count that is one is kept
    diff = artifact(home, row["artifacts"]["diff"]).decode("utf-8")
    assert "+++ b/bad-\\xff\\xfe.py" in diff and "+++ b/new\\x0aline.txt" in diff
    for name in ("metrics", "transcript"):
        strict_json(artifact(home, row["artifacts"][name]))
    artifact(home, row["artifacts"]["final_report"]).decode("utf-8")
    db = sqlite3.connect(home / "evalq.db")
    for column in ("metrics", "artifacts", "criteria", "grade", "worker_env"):
        for (text,) in db.execute(f"select {column} from attempts"):
            if text is not None:
                strict_json(text)
    db.close()
    folder = next((home / "reports").glob("*/report.json")).parent
    assert strict_json((folder / "report.json").read_bytes()) == report
    for page in [folder / "report.md", folder / "report.html",
                 *(folder / "transcripts").glob("*")]:
        page.read_bytes().decode("utf-8")
    for fmt in ("jsonl", "results"):
        out = tmp_path / f"export-{fmt}.jsonl"
        proc = run_cli(["export", "agentdata", "--format", fmt, "--out", str(out)],
                       {"EVALQ_HOME": str(home)})
        assert proc.returncode == 0, proc.stderr
        (exported,) = strict_jsonl(out.read_bytes())
        if fmt == "jsonl":
            assert exported["outcome"] == "incorrect"
            assert exported["input_tokens"] is None and exported["output_tokens"] is None
    runs = home / "runs"
    assert not runs.exists() or not any(runs.iterdir())
