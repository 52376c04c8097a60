"""The visible check's parts on their own: the fixture field, the live copy, shim and channel.

The sandboxed journey is test_first_check_study.py; here each part meets the hostile inputs
it exists for: links and special files in a live workspace, a workspace swapped for a link,
messages that are not the shim's, and runs that are not the check.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conftest import FIXTURES  # noqa: E402
from evalq.errors import UserError  # noqa: E402
from evalq.workers.visible_check.channel import CheckChannel, is_check  # noqa: E402
from evalq.workers.visible_check.snapshot import copy_live  # noqa: E402


def test_is_check_wants_the_declared_arguments_in_order():
    assert is_check(["-m", "pytest"], ["-m", "pytest", "-q"])
    assert is_check(["tests_visible"], ["-q", "tests_visible", "-x"])
    assert is_check(["test"], ["-j2", "test"])
    assert is_check([], ["anything"])
    assert not is_check(["-m", "pytest"], ["script.py"])
    assert not is_check(["-m", "pytest"], ["pytest", "-m"])


def test_live_copy_takes_files_and_folders_and_follows_no_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "mod.py").write_text("x = 1\n")
    (work / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(work / "run.sh", 0o755)
    os.symlink(outside, work / "linked_dir")
    os.symlink(outside / "secret.txt", work / "pkg" / "linked_file")
    os.mkfifo(work / "pipe")
    os.link(work / "pkg" / "mod.py", work / "hard.py")
    dropped = copy_live(work, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")) == [
        "pkg", "run.sh"]  # mod.py went with its hard link: a file with two names never travels
    assert os.stat(copy / "run.sh").st_mode & 0o111
    assert not any("host secret" in p.read_text() for p in copy.rglob("*") if p.is_file())
    assert {line.split(":")[0] for line in dropped} == {
        "linked_dir", "pkg/linked_file", "pipe", "hard.py", "pkg/mod.py"}


def test_live_copy_of_a_workspace_swapped_for_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "work")
    with pytest.raises(OSError):
        copy_live(tmp_path / "work", tmp_path / "copy")


def test_shim_counts_the_check_snapshots_the_first_and_runs_the_program(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "answer.py").write_text("ANSWER = 'first'\n")
    channel = CheckChannel(["python3", "-m", "json.tool"], work, lambda folder: None, None)
    env = {"PATH": f"{channel.bin_dir}:/usr/local/bin:/usr/bin:/bin"}
    try:
        run = lambda *args: subprocess.run(["python3", *args], cwd=work, env=env,  # noqa: E731
                                           input=b'{"a": 1}', capture_output=True, timeout=60)
        first = run("-m", "json.tool", "--compact")
        assert first.returncode == 0 and first.stdout.strip() == b'{"a":1}'  # the real one ran
        (work / "answer.py").write_text("ANSWER = 'repaired'\n")
        assert run("-c", "print(1)").stdout == b"1\n"  # the program, but not the check
        run("-m", "json.tool")
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as forged:
            forged.connect(str(channel.folder / "channel.sock"))
            forged.send(b"I am the first check, and it passed")
            forged.settimeout(5)
            assert forged.recv(8) == b""  # not the shim's: closed unanswered
    finally:
        record = channel.close()
    assert not channel.folder.exists()
    assert (record.check_runs, record.other_runs, record.ignored_messages) == (2, 1, 1)
    assert record.first_args == ["-m", "json.tool", "--compact"]
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(record.snapshot))) as tar:
        assert tar.extractfile("answer.py").read() == b"ANSWER = 'first'\n"


def test_a_visible_check_that_is_no_program_name_is_one_line(tmp_path):
    from evalq.fixtures.fixture import load_fixture

    dest = tmp_path / "fx"
    shutil.copytree(FIXTURES / "py-slugify-bugfix", dest)
    manifest = dest / "fixture.toml"
    manifest.write_text(manifest.read_text() + '\n[visible_check]\ncommand = ["./check.sh"]\n')
    with pytest.raises(UserError) as caught:
        load_fixture(dest, verify=False)
    text = str(caught.value)
    assert "\n" not in text and "fixture.toml" in text and "visible_check" in text
    assert "must be a program name found on PATH" in text


def test_repair_cost_counts_from_the_first_check_and_says_what_it_lacks():
    from evalq.workers.agents.trajectory import iso_time
    from evalq.workers.visible_check.channel import CheckRecord
    from evalq.workers.visible_check.cost import repair_cost

    first = 1_800_000_000.0
    record = CheckRecord(declared=["make", "test"], first_check_at=first, check_runs=4)
    call = {"tool_call_id": "1", "function_name": "bash", "arguments": {"command": "make test"}}
    steps = [{"step_id": 1, "timestamp": iso_time(first - 5), "tool_calls": [call, call]},
             {"step_id": 2, "timestamp": iso_time(first), "tool_calls": [call]},
             {"step_id": 3, "timestamp": iso_time(first + 9).removesuffix("Z"),  # naive: UTC
              "tool_calls": [call, call]},
             {"step_id": 4, "timestamp": None, "message": "done"}]
    wire = [{"wire": "anthropic-messages", "started_at": first - 1, "status": 200,
             "usage": {"input_tokens": 1000, "output_tokens": 10}},
            {"wire": "anthropic-messages", "started_at": first + 1, "status": 200,
             "usage": {"input_tokens": 300, "output_tokens": 20}},
            {"wire": "anthropic-messages", "started_at": first + 2, "status": 429,
             "usage": {"input_tokens": None, "output_tokens": None}},
            {"wire": None, "refused": "not allowlisted", "started_at": first + 3}]
    cost = repair_cost(record, first + 12.5, json.dumps({"steps": steps}).encode(), wire)
    assert cost["repair_check_runs"] == 3 and cost["elapsed_seconds"] == 12.5
    assert cost["commands_after_first_check"] == 3
    assert (cost["input_tokens_after_first_check"], cost["output_tokens_after_first_check"]) \
        == (300, 20)
    assert cost["human_interventions"] is None and "human_interventions" in cost["unavailable"]
    # no gateway, and a trajectory whose tool calls carry no time: unavailable, with why
    steps[1]["timestamp"] = None
    cost = repair_cost(record, first + 1, json.dumps({"steps": steps}).encode(), None)
    assert cost["commands_after_first_check"] is None
    assert cost["unavailable"]["commands_after_first_check"] == \
        "a step with tool calls has no timestamp"
    assert cost["input_tokens_after_first_check"] is None
    assert repair_cost(CheckRecord(declared=["make"]), first, None, None) is None
