"""The shipped demo study: its lock matches the suite, and the plausible-but-wrong condition
fails graders while the reference passes them, visibly in the report."""

from __future__ import annotations

import json

from conftest import ROOT, run_cli

DEMO = ROOT / "examples" / "demo" / "study.toml"


def test_demo_study_runs_and_the_incorrect_references_fail(tmp_path):
    proc = run_cli(["run", str(DEMO)], {"EVALQ_HOME": str(tmp_path / "home")}, timeout=600)
    assert proc.returncode == 0, proc.stderr  # also proves the shipped lock is current
    printed = [l.split(": ", 1)[1] for l in proc.stdout.splitlines() if l.startswith("report: ")]
    paths = {path.rsplit(".", 1)[1]: path for path in printed}
    report = json.loads(open(paths["json"]).read())
    fixtures = report["study"]["fixtures"]
    assert len(fixtures) >= 6
    reference, plausible = report["conditions"]["reference"], report["conditions"]["plausible"]
    assert reference["outcomes"]["correct"] == 3 * len(fixtures)
    assert plausible["outcomes"]["incorrect"] == 3 * len(fixtures)
    assert plausible["outcomes"]["correct"] == 0
    markdown = open(paths["md"]).read()
    outcomes = markdown.split("## Outcomes per condition", 1)[1]
    row = next(l for l in outcomes.splitlines() if l.startswith("| plausible |"))
    assert f"| 0 | {3 * len(fixtures)} |" in row
