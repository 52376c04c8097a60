"""`evalq compare` refuses incompatible pairs; tracks are never pooled; blinded packets hide conditions."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from evalq.analysis.blind import write_packets
from evalq.analysis.rubric import DEFINITIONS
from evalq.analysis.runs import study_runs
from evalq.analysis.studies import compare_studies
from evalq.errors import UserError
from report_native_rows import make_study
from adjudicated_gen import generate



def _commit(sha):
    return [{"name": "main", "agent": "scripted", "commit": sha}]


def test_compare_two_commits_and_refuse_incompatible(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    make_study(url, "old", conditions=_commit("aaa"),
               outcome=lambda t, c, r: "correct" if t != "t3" else "incorrect")
    make_study(url, "new", conditions=_commit("bbb"))
    make_study(url, "other-model", conditions=_commit("ccc"), model_id="m2")
    env = {"EVALQ_DATABASE_URL": url}
    out = tmp_path / "cmp.json"
    proc = run_cli(["compare", "old", "new", "--out", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    tpr = result["comparison"]["metrics"]["tpr"]
    assert tpr["delta"] == pytest.approx(1 / 3)
    assert tpr["per_task"] == {"t1": 0.0, "t2": 0.0, "t3": 1.0}
    assert result["comparison"]["pinned"]["baseline"]["commit"] == "aaa"
    # the same comparison as a document: Markdown and a self-contained HTML page
    md, html = tmp_path / "cmp.md", tmp_path / "cmp.html"
    again = run_cli(["compare", "old", "new", "--out", str(md), "--out", str(html)], env)
    assert again.returncode == 0, again.stderr
    assert f"comparison: {md}" in again.stdout and f"comparison: {html}" in again.stdout
    text = md.read_text()
    assert text.startswith("# evalq compare: new - old")
    assert "- baseline: old: commit aaa" in text and "- candidate: new: commit bbb" in text
    assert "- result: TPR candidate - baseline: **+0.333**, 95% CI [" in text
    assert "| TPR | yes | 3 | +0.333 |" in text and "Per-task differences in TPR: t1 0.000" in text
    page = html.read_text()
    assert "<h1>evalq compare: new - old</h1>" in page and page.count("<svg") == 1
    assert "<script" not in page and "default-src 'none'" in page
    assert "<strong>+0.333</strong>" in page
    refused = run_cli(["compare", "old", "other-model"], env)
    assert refused.returncode == 2
    assert "field 'model_id'" in refused.stderr and "not a comparison" in refused.stderr


def test_compare_refuses_different_grader_version(tmp_path):
    url = f"sqlite:///{tmp_path}/g.db"
    engine = make_study(url, "a", conditions=_commit("aaa"))
    make_study(url, "b", conditions=_commit("bbb"), grader="evalq-grader/2")
    with pytest.raises(UserError, match="grader_version"):
        compare_studies(engine, "a", "b", n_resamples=500)


def _rootfs(digest_of):
    return lambda task, rep: {"image": "evalq-grader-node:local", "toolchain": "node",
                              "rootfs_digest": digest_of(task, rep)}


def test_compare_pins_the_toolchain_rootfs_digest(tmp_path):
    """Same rootfs on both sides: compatible; another rootfs, or two on one side: refused."""
    url = f"sqlite:///{tmp_path}/r.db"
    same = _rootfs(lambda task, rep: "sha256:" + "a" * 64)
    engine = make_study(url, "a", conditions=_commit("aaa"), toolchain=same)
    make_study(url, "b", conditions=_commit("bbb"), toolchain=same)
    make_study(url, "c", conditions=_commit("ccc"),
               toolchain=_rootfs(lambda task, rep: "sha256:" + "b" * 64))
    make_study(url, "d", conditions=_commit("ddd"),
               toolchain=_rootfs(lambda task, rep: "sha256:" + ("a" if rep < 3 else "b") * 64))
    result = compare_studies(engine, "a", "b", n_resamples=500)
    assert result["comparison"]["pinned"]["baseline"]["toolchains"] == {
        "evalq-grader-node:local": "sha256:" + "a" * 64}
    for other in ("c", "d"):
        with pytest.raises(UserError, match="toolchains"):
            compare_studies(engine, "a", other, n_resamples=500)


def test_tracks_are_reported_apart_and_labelled(tmp_path):
    labels = {"task-000": {"track": "free-selection", "split": "regression", "suitable": False},
              "task-001": {"track": "free-selection", "kind": "unseen"},
              "task-002": {"track": "directed-integration", "split": "regression"},
              "task-003": {"track": "directed-integration", "split": "regression"}}
    paths = generate(tmp_path / "data", tasks=4, extra=labels)
    env = {"EVALQ_DATABASE_URL": f"sqlite:///{tmp_path}/t.db"}
    assert run_cli(["import", str(paths["results"]), "--study", "tr"], env).returncode == 0
    out = tmp_path / "r.json"
    proc = run_cli(["report", "tr", "--format", "json", "--out", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert set(report["tracks"]) == {"free-selection", "directed-integration"}
    top = report["conditions"]["single_prompt"]["metrics"]["tpr"]
    assert top["estimate"] is None and "never aggregated across tracks" in top["reason"]
    free = report["tracks"]["free-selection"]
    assert free["tasks"] == ["task-000", "task-001"]
    assert free["splits"] == {"regression": 1, "held-out": 1}
    rows = [json.loads(l) for l in paths["results"].read_text().splitlines()]
    for cond in ("single_prompt", "workflow_guided"):
        assert free["correct_exclusions"][cond] == sum(
            r["passed"] for r in rows if r["task_id"] == "task-000" and r["condition"] == cond)
        est = free["conditions"][cond]["metrics"]["tpr"]["estimate"]
        per_task = [sum(r["passed"] for r in rows if r["task_id"] == t and r["condition"] == cond) / 3
                    for t in ("task-000", "task-001")]
        assert est == pytest.approx(sum(per_task) / 2)
    assert {c["track"] for c in report["comparisons"]} == set(report["tracks"])
    assert report["task_grid"]["task-001"]["split"] == "held-out"
    md = tmp_path / "r.md"
    assert run_cli(["report", "tr", "--format", "md", "--out", str(md)], env).returncode == 0
    text = md.read_text()
    assert "### Track: free-selection" in text and "held-out" in text


def test_blind_packets_hide_condition_labels_and_keep_the_key_apart(tmp_path):
    conditions = [{"name": "workflow_guided", "agent": "scripted", "skill": "praxo-skill"},
                  {"name": "control-arm", "agent": "scripted"}]
    engine = make_study(f"sqlite:///{tmp_path}/b.db", "bl", conditions=conditions)
    report_text = ("Done. I followed the workflow_guided process from WORKFLOW.md and the "
                   "praxo-skill in .claude/skills/praxo/SKILL.md; Control-Arm would not.")
    study, runs = study_runs(engine, "bl")
    result = write_packets(study, runs, tmp_path / "out",
                           fetch=lambda ref: report_text.encode())
    packets = sorted((tmp_path / "out" / "packets").glob("*.md"))
    assert len(packets) == result["packets"] == 18
    for packet in packets:
        text = packet.read_text().lower()
        for secret in ("workflow_guided", "control-arm", "praxo-skill", "workflow.md", "skill.md",
                       ".claude/skills"):
            assert secret not in text
    assert result["key"] == tmp_path / "out.key.jsonl"
    key = [json.loads(l) for l in result["key"].read_text().splitlines()]
    assert {k["condition"] for k in key} == {"workflow_guided", "control-arm"}
    # Nothing under the folder that goes to raters names a condition; the rubric is there.
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            text = path.read_text().lower()
            assert "workflow_guided" not in text and "control-arm" not in text, path
    rubric = (tmp_path / "out" / "RUBRIC.md").read_text()
    for field, (definition, _) in DEFINITIONS.items():
        assert f"## `{field}`" in rubric and definition in rubric
    assert "per RUBRIC.md" in packets[0].read_text()
    with pytest.raises(UserError, match="inside the packets folder"):
        write_packets(study, runs, tmp_path / "out", fetch=lambda ref: None,
                      key=tmp_path / "out" / "packets" / "k.jsonl")
    # shuffled: packet numbers do not follow the planned order by condition
    firsts = [k["condition"] for k in key[:6]]
    assert len(set(firsts)) == 2


def test_blind_command_prints_the_key_path_outside_the_packets(tmp_path):
    url = f"sqlite:///{tmp_path}/k.db"
    make_study(url, "bk")
    env = {"EVALQ_DATABASE_URL": url, "EVALQ_HOME": str(tmp_path / "home")}
    proc = run_cli(["blind", "bk", "--out", str(tmp_path / "to-raters")], env)
    assert proc.returncode == 0, proc.stderr
    key = tmp_path / "to-raters.key.jsonl"
    assert f"key (keep it from the raters): {key}" in proc.stdout
    assert len(key.read_text().splitlines()) == 18
    assert (tmp_path / "to-raters" / "RUBRIC.md").is_file()
    inside = run_cli(["blind", "bk", "--out", str(tmp_path / "to-raters"), "--key",
                      str(tmp_path / "to-raters" / "key.jsonl")], env)
    assert inside.returncode == 2 and "field '--key'" in inside.stderr


def test_compare_refused_on_settings_names_the_keys_and_hides_credentials(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    secret = "sk-ant-" + "q7" * 20
    base = {"name": "main", "agent": "scripted", "commit": "aaa",
            "settings": {"temperature": 0.2, "api_key": secret, "retries": 3,
                         "headers": {"x-trace": "ghp_" + "Z" * 36}}}
    cand = {"name": "main", "agent": "scripted", "commit": "bbb",
            "settings": {"temperature": 0.7, "api_key": secret + "x", "retries": 3,
                         "headers": {"x-trace": "ghp_" + "Y" * 36}, "top_p": 0.9}}
    make_study(url, "sa", conditions=[base])
    make_study(url, "sb", conditions=[cand])
    proc = run_cli(["compare", "sa", "sb"], {"EVALQ_DATABASE_URL": url})
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "field 'settings_digest'" in line
    assert "settings.temperature: 0.2 vs 0.7" in line
    assert "settings.top_p: (not set) vs 0.9" in line
    assert "settings.api_key: [redacted] vs [redacted]" in line
    assert "settings.headers.x-trace: [redacted] vs [redacted]" in line
    assert "retries" not in line  # equal settings are not listed
    assert secret not in line and "ghp_" not in line


@pytest.mark.parametrize("settings", [
    {"headers": [{"Authorization": "Bearer abc.def"}]},
    {"extra": ["--token=xyz", {"note": "Bearer abc.def"}]},
    {"proxy": "http://user:hunter22@proxy.local:8080"},
    {"PASSWORD": "hunter22"},
])
def test_differing_settings_never_show_a_credential(settings):
    from evalq.analysis.settings_diff import differing_settings

    shown = json.dumps(differing_settings({}, settings))
    for secret in ("abc.def", "hunter22", "xyz"):
        assert secret not in shown
    assert "[redacted]" in shown
