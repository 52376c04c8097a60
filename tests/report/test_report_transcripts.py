"""Transcript pages render what the agent wrote as inert text: hostile markup stays escaped,
and a hostile trial id cannot name a page outside the transcripts folder."""

from __future__ import annotations

from evalq.report.html import markdown_to_html
from evalq.report.transcripts import page_name, render_transcript
from evalq.workers.agents.trajectory import Step, build, encode

EVIL = '<script>alert(1)</script><img src=x onerror="fetch(1)">'


def test_hostile_trajectory_is_escaped_and_pages_stay_in_their_folder():
    step = Step("agent", message=EVIL, timestamp="2026-01-01T00:00:00Z",
                usage={"input_tokens": 5, "output_tokens": None})
    step.call("c1", EVIL, {"command": EVIL})
    step.result("c1", EVIL, is_error=True)
    doc = build("x", None, EVIL, [Step("user", message="task"), step], usage_scope="request",
                notes={"output_tokens": EVIL})
    page = render_transcript(EVIL, encode(doc))
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert "default-src 'none'" in page
    assert "output_tokens unavailable" in page and 'class="error"' in page
    assert "version unavailable" in page  # no version: said so, not invented
    raw = render_transcript("t", EVIL.encode())  # not a trajectory: shown as text
    assert "<script" not in raw and "raw transcript" in raw
    for trial in ("../../etc/passwd", "a/../../b", ".hidden", "", "s/t/c/r1"):
        folder, _, file = page_name(trial).partition("/")
        assert folder == "transcripts" and "/" not in file and not file.startswith(".")
        assert file.endswith(".html") and len(file) > len(".html")


def test_run_table_links_only_known_trials():
    rows = "| trial | outcome |\n|---|---|\n| s/t/c/r1 | correct |\n| other | correct |\n"
    html = "\n".join(markdown_to_html(rows, {"s/t/c/r1": page_name("s/t/c/r1")}))
    assert '<a href="transcripts/s_t_c_r1.html">s/t/c/r1</a>' in html
    assert html.count("<a ") == 1
