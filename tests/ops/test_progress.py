"""Progress: ETA from finished trials' durations, a tally per outcome, a line per tenth in logs."""

from __future__ import annotations

import re
from types import SimpleNamespace

from evalq.cli.progress import TrialProgress, eta_seconds


def test_eta_from_durations_matches_a_hand_computation():
    # 4 trials of 10 s each finished in 20 s of watching: 2 ran side by side; 6 left
    assert eta_seconds(6, [10.0, 10.0, 10.0, 10.0], 20.0) == 6 * 10.0 / 2
    assert eta_seconds(6, [], 20.0) is None  # nothing finished yet: unavailable, not 0
    assert eta_seconds(3, [30.0], 10.0) == 3 * 30.0 / 3


def test_log_lines_once_per_tenth_with_tally_and_eta():
    lines: list[str] = []
    source = SimpleNamespace(tally={}, durations=[])
    progress = TrialProgress("trials", source, tty=False, echo=lines.append)
    for done in range(0, 41):
        if done:
            source.tally = {"correct": done - done // 3, "incorrect": done // 3}
            source.durations = [5.0] * done
        progress(done, 40)
    assert len(lines) == 11  # 0, 4, 8, ..., 40
    assert lines[0].startswith("0/40 trials finished") and "eta unavailable" in lines[0]
    assert re.search(r"^40/40 trials finished; elapsed \d+:\d\d:\d\d, eta 0:00:00; "
                     r"correct 27, incorrect 13$", lines[-1]), lines[-1]


def test_terminal_bar_shows_tally(capsys):
    source = SimpleNamespace(tally={"correct": 1}, durations=[2.0])
    progress = TrialProgress("trials", source, tty=True)
    progress(1, 2)
    progress(2, 2)  # closes itself when done
    err = capsys.readouterr().err
    assert "2/2" in err and "correct 1" in err and "eta" in err
