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


def test_a_study_of_more_runs_than_the_report_lists_gets_its_pages_on_demand(tmp_path):
    """Above the listed run table, the report's Runs section says where the pages are: none
    written (`--no-transcripts`, as a very large study gets by default) names the command that
    writes them; `--transcripts` writes one per run, each listed in transcripts.html, which
    the report links and which links back to it."""
    from conftest import run_cli
    from report_native_rows import make_study

    from evalq.report.markdown import RUNS_SHOWN

    tasks = tuple(f"t{i:03d}" for i in range(RUNS_SHOWN // 2 + 1))  # x 2 conditions x k = 1
    make_study(f"sqlite:///{tmp_path}/big.db", "big", tasks=tasks, k=1)
    env = {"EVALQ_DATABASE_URL": f"sqlite:///{tmp_path}/big.db",
           "EVALQ_HOME": str(tmp_path / "home")}
    none, every = tmp_path / "none", tmp_path / "every"
    proc = run_cli(["report", "big", "--out", str(none), "--no-transcripts"], env)
    assert proc.returncode == 0, proc.stderr
    assert not (none / "transcripts").exists() and not (none / "transcripts.html").exists()
    for name in ("report.md", "report.html"):
        text = (none / name).read_text()
        assert "evalq report big --transcripts" in text and "transcripts.html</a>" not in text
    proc = run_cli(["report", "big", "--out", str(every), "--transcripts"], env)
    assert proc.returncode == 0, proc.stderr
    pages = sorted((every / "transcripts").glob("*.html"))
    assert len(pages) == 2 * len(tasks)
    assert "[transcripts.html](transcripts.html)" in (every / "report.md").read_text()
    assert '<a href="transcripts.html">transcripts.html</a>' in (every / "report.html").read_text()
    index = (every / "transcripts.html").read_text()
    assert '<a href="report.html">report</a>' in index
    assert index.count('<li><a href="transcripts/') == len(pages)
    for page in pages:  # every listed page is there, and links back to the report
        assert f'href="transcripts/{page.name}"' in index
        assert '<a href="../report.html">report</a>' in page.read_text()


def test_pages_come_with_the_report_up_to_a_size_and_are_written_one_run_at_a_time(tmp_path):
    """By default a study of up to PAGES_BY_DEFAULT runs gets its pages and a larger one none
    (asked for, either way as asked); the pages show each trial's latest attempt."""
    from sqlalchemy import insert

    from report_native_rows import make_study

    from evalq.report.transcripts import (PAGES_BY_DEFAULT, latest_attempt_rows, pages_wanted,
                                          transcripts_for)
    from evalq.results.store import AttemptRow

    assert pages_wanted(PAGES_BY_DEFAULT, None) and not pages_wanted(PAGES_BY_DEFAULT + 1, None)
    assert pages_wanted(PAGES_BY_DEFAULT + 1, True) and not pages_wanted(1, False)
    engine = make_study(f"sqlite:///{tmp_path}/s.db", "s", tasks=("t1", "t2"), k=2)
    with engine.begin() as conn:  # a second attempt of one trial: its page shows that one
        conn.execute(insert(AttemptRow.__table__), [dict(
            trial_id="s-t1-base-1", study_id="s", attempt=2, state="done", outcome="timed_out",
            reason="second attempt", claims=1, regrades=0)])
    rows = list(latest_attempt_rows(engine, "s", batch=3))  # batches smaller than the study
    assert [r.trial_id for r in rows] == sorted(r.trial_id for r in rows) and len(rows) == 8
    assert next(r for r in rows if r.trial_id == "s-t1-base-1").outcome == "timed_out"
    big = {"study": {"id": "s"}, "trials": {"planned": PAGES_BY_DEFAULT + 1}}
    assert transcripts_for(engine, str(tmp_path / "a"), big, tmp_path / "no") is None
    assert not (tmp_path / "no").exists()
    links = transcripts_for(engine, str(tmp_path / "a"), {**big, "trials": {"planned": 8}},
                            tmp_path / "yes")
    assert len(links) == 8 and (tmp_path / "yes" / "transcripts.html").is_file()
    assert "second attempt" in (tmp_path / "yes" / links["s-t1-base-1"]).read_text()
