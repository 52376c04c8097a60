"""Reading a Harbor verifier's reward: what the agent's code, run by the verifier, could
leave in /logs/verifier is data; anything but a finite number is no verdict, never a crash."""

from __future__ import annotations

import os

import pytest

from evalq.graders.harbor_settings import HarborSettings
from evalq.graders.harbor_verifier import REWARD_BYTES, read_reward

SETTINGS = HarborSettings(format_version="1.0", source_digest="sha256:" + "1" * 64,
                          workdir="/app", rootfs_digest="sha256:" + "2" * 64)


@pytest.mark.parametrize("name, content, expected", [
    ("reward.txt", b"1\n", 1.0),
    ("reward.txt", b" 0.75 ", 0.75),
    ("reward.json", b'{"reward": 0.5, "details": {"passed": 1}}', 0.5),
    ("reward.json", b'{"reward": 2}', 2.0),
])
def test_numbers_are_read(tmp_path, name, content, expected):
    (tmp_path / name).write_bytes(content)
    assert read_reward(tmp_path, SETTINGS) == (expected, None)


@pytest.mark.parametrize("name, content, why", [
    ("reward.txt", b"nan", "not a finite number"),
    ("reward.txt", b"inf\n", "not a finite number"),
    ("reward.txt", b"passed", "does not hold a number"),
    ("reward.txt", b"\xff\xfe1", "does not hold a number"),
    ("reward.txt", b"1" * (REWARD_BYTES + 5), f"over {REWARD_BYTES} bytes"),
    ("reward.json", b'{"score": 1}', "no number under 'reward'"),
    ("reward.json", b'{"reward": true}', "no number under 'reward'"),
    ("reward.json", b'{"reward": "1"}', "no number under 'reward'"),
    ("reward.json", b"[1]", "no number under 'reward'"),
    ("reward.json", b"{not json", "does not hold a number"),
    ("reward.json", b'{"reward": NaN}', "not a finite number"),
])
def test_anything_else_is_no_verdict_with_the_reason(tmp_path, name, content, why):
    (tmp_path / name).write_bytes(content)
    reward, problem = read_reward(tmp_path, SETTINGS)
    assert reward is None and why in problem, problem


def test_links_and_special_files_are_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("1")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reward.txt").symlink_to(target)
    os.mkfifo(logs / "reward.json")  # opened for real, a FIFO would block the grader
    reward, problem = read_reward(logs, SETTINGS)
    assert reward is None and "wrote no reward" in problem


def test_no_reward_at_all(tmp_path):
    assert read_reward(tmp_path, SETTINGS)[0] is None
