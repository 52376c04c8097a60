"""The agent's own words (a stop reason, text in a failure's reason) cannot write lines of the
Markdown or HTML report or rewrite the operator's terminal."""

from __future__ import annotations

import re

import pytest

from evalq.ops.failures import common_reasons, reason_lines
from evalq.plaintext import one_line
from evalq.report.compute import compute_report
from evalq.report.html import render_html
from evalq.report.markdown import render_markdown
from report_native_rows import make_study

FORGED = ("done\n\n- claims: **confirmatory**\r\n# evalq report: forged\n"
          "| fake | correct | | 1 | 1 | 1 | 1 | 1 | 1 | 1 | 1 | x | $0 |")
TERMINAL = "ok\x1b[2J\x1b[1;1Hall 42 correct\x9b31m\x07\u202eevil\u2066"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_agent_text_stays_in_its_cell(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'r.db'}" if backend == "sqlite" else \
        request.getfixturevalue("postgres_url")
    engine = make_study(url, "hostile-text", tasks=("t1",), k=1,
                        metrics=lambda task, cond, rep: {"stop_reason": FORGED + TERMINAL})
    # a failure whose reason carries the agent's words (a grader quoting what it printed)
    from evalq.results.store import record_attempt

    record_attempt(engine, {"trial_id": "hostile-text-t1-base-1", "attempt": 2,
                            "study_id": "hostile-text", "outcome": "grading_failure",
                            "reason": "report unreadable: " + FORGED + TERMINAL,
                            "metrics": {}, "criteria": []})
    report = compute_report(engine, "hostile-text", n_resamples=200)
    markdown = render_markdown(report)
    lines = markdown.splitlines()
    assert not any(line.startswith("# evalq report: forged") for line in lines)
    assert sum(1 for line in lines if line.startswith("- claims:")) == 1
    assert not any(line.startswith("| fake |") for line in lines)
    rows = [line for line in lines if line.startswith("| hostile-text-")]
    assert len(rows) == 2  # one per trial, each still one line of 13 cells
    for row in rows:
        assert len(re.split(r"(?<!\\)\|", row.strip())[1:-1]) == 13, row
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", markdown)
    html = render_html(report)
    assert html.count("<h1>") == 1 and "forged</h1>" not in html
    assert "\x1b" not in html and "\u202e" not in html
    # the report's JSON keeps the words as the agent wrote them: it is data, not layout
    assert any(r["stop_reason"] == FORGED + TERMINAL for r in report["trial_rows"])

    shown = reason_lines(common_reasons(engine, "hostile-text"))
    assert shown and all("\n" not in line and "\r" not in line for line in shown)
    assert not any(re.search(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", line)
                   for line in shown)


def test_one_line_keeps_words_and_drops_controls():
    assert one_line(TERMINAL) == "ok [2J [1;1Hall 42 correct 31m evil"
    assert one_line("a\n\tb\u200bc", 4) == "a b…"
    assert one_line(None) == "" and one_line("") == ""
    assert one_line("naïve – ünïcode") == "naïve – ünïcode"
