"""The agent's own words (a stop reason, text in a failure's reason) cannot write lines of the
Markdown or HTML report or rewrite the operator's terminal."""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

import pytest

from evalq.ops.failures import common_reasons, reason_lines
from evalq.plaintext import one_line
from evalq.report.compute import compute_report
from evalq.report.html import render_html
from evalq.report.markdown import render_markdown
from evalq.report.mdtext import inert
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
    header = next(line for line in lines if line.startswith("| trial | outcome |"))
    rows = [line for line in lines if line.startswith("| hostile-text-")]
    assert len(rows) == 2  # one per trial, each still one line of the header's cells
    for row in rows:
        cells = len(re.split(r"(?<!\\)\|", row.strip())[1:-1])
        assert cells == len(header.strip().split("|")[1:-1]) >= 3, row
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


# Agent text meant to become markup in some Markdown viewer: raw HTML, a script link, an
# image, an autolink, an e-mail autolink, a table break, a new line, backticks, emphasis.
HOSTILE = ('<script>alert(1)</script><img src=x onerror="fetch(1)"> [x](javascript:alert(1)) '
           '![i](http://evil.example/i.png) http://evil.example www.evil.example a@evil.example '
           '| cell | break\n# heading\n`code` ``` **bold** _em_ ~~del~~ &lt; \\| \\')
ALLOWED_TAGS = {"h1", "h2", "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td",
                "code", "strong", "a"}


class _Tags(HTMLParser):
    """Every tag a viewer rendered, every link target, and each table row's cell count."""

    def __init__(self):
        super().__init__()
        self.tags, self.hrefs, self.rows, self.widths = set(), [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href"))
        if tag == "tr":
            self.rows.append(0)
        if tag in ("td", "th"):
            self.rows[-1] += 1


def _viewers():
    """The Markdown as GitHub (cmark-gfm) and markdown-it (with linkify) render it, raw HTML
    let through so that any that survives escaping shows up."""
    from cmarkgfm import github_flavored_markdown_to_html
    from cmarkgfm.cmark import Options
    from markdown_it import MarkdownIt

    it = MarkdownIt("gfm-like", {"html": True, "linkify": True})
    return {"cmark-gfm": lambda text: github_flavored_markdown_to_html(
                text, options=Options.CMARK_OPT_UNSAFE),
            "markdown-it": it.render}


def _code_texts(html: str) -> list[str]:
    return [unescape(t) for t in re.findall(r"<code>(.*?)</code>", html, re.DOTALL)]


def markdown_to_html_text(markdown: str) -> str:
    from evalq.report.html import markdown_to_html

    return "\n".join(markdown_to_html(markdown))


def _hostile_report(tmp_path):
    conditions = [{"name": "base", "agent": "scripted", "model": "m1", "commit": "aaa"},
                  {"name": "cand", "agent": "scripted", "model": "m1", "commit": "bbb"}]
    engine = make_study(f"sqlite:///{tmp_path / 'h.db'}", "hostile-md", tasks=("t1", "t2"),
                        k=1, conditions=conditions,
                        outcome=lambda t, c, r: "correct" if c == "cand" else "incorrect",
                        metrics=lambda t, c, r: {"stop_reason": HOSTILE,
                                                 "wire_models": [HOSTILE, "m1"],
                                                 "exit_code": 1, "model_calls": 0,
                                                 "stderr_tail": HOSTILE})
    report = compute_report(engine, "hostile-md", n_resamples=200)
    # what other parts of a report carry from the agent: stderr, and a model name as a
    # condition's description shows it
    for row in report["trial_rows"]:
        row["stderr_last_line"], row["reason"], row["agent_error"] = HOSTILE, HOSTILE, HOSTILE
    report["overview"]["conditions"]["cand"]["model"] = HOSTILE
    report["agent_errors"] = {"cand": {"runs": 2, "errors": 1, "by_kind": {HOSTILE: 1}}}
    return report


def test_agent_text_renders_inert_in_real_markdown_viewers(tmp_path):
    report = _hostile_report(tmp_path)
    assert any(HOSTILE in r for r in report["claims"]["reasons"])  # the off-pin model's name
    links = {r["trial_id"]: f"transcripts/{r['trial_id']}.html" for r in report["trial_rows"]}
    markdown = render_markdown(report, links, "report.json")
    for viewer, render in _viewers().items():
        html = render(markdown)
        seen = _Tags()
        seen.feed(html)
        assert seen.tags <= ALLOWED_TAGS, (viewer, seen.tags - ALLOWED_TAGS)
        assert "<script" not in html and "<img" not in html and "javascript:" not in \
            [h.split(":")[0] + ":" for h in seen.hrefs if h]
        ours = set(links.values()) | {"report.json"}
        assert set(seen.hrefs) <= ours, (viewer, set(seen.hrefs) - ours)
        assert set(seen.hrefs) == ours  # the report's own links still work
        assert "<h1>" in html and html.count("<h1>") == 1 and "heading</h1>" not in html
        tables = html.split("<table>")[1:]
        for table in tables:  # every row of every table as wide as its header
            widths = _Tags()
            widths.feed(table.split("</table>")[0])
            assert len(set(widths.rows)) == 1, (viewer, widths.rows)
        # the agent's words are there, literally, as code
        assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 8, viewer
    html = render_html(report, links)
    seen = _Tags()
    seen.feed(html)
    assert "<script" not in html and "<img" not in html
    # the HTML report reads the Markdown as a viewer does: the same code spans, whole
    assert _code_texts(markdown_to_html_text(render_markdown(report))) == \
        _code_texts(_viewers()["markdown-it"](render_markdown(report)))
    assert {h for h in seen.hrefs} <= set(links.values()) | {"../report.html"}
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 8


def test_inert_keeps_plain_words_and_fences_the_rest():
    assert inert("claude-3.5-sonnet") == "claude-3.5-sonnet"
    assert inert("condition v2: 9/9 runs exited") == "condition v2: 9/9 runs exited"
    assert inert("evil.example") == "`evil.example`"  # a viewer would link the domain
    assert inert("a|b") == "`a\\|b`" and inert("a|b", table=False) == "`a|b`"
    assert inert("x ``y`` z") == "```x ``y`` z```"
    assert inert("`x`") == "`` `x` ``"
    assert inert("1. item") == "`1. item`" and inert("_x_") == "`_x_`"
    assert inert("line\nbreak") == "line break" and inert(None) == "" and inert("") == ""
    assert inert("x" * 50, 10) == "x" * 9 + "…"
