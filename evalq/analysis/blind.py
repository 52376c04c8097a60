"""Blinded rater packets: condition labels and workflow markers stripped.

Packets are numbered in a seeded shuffled order so the number says nothing about the
condition. The folder that goes to raters holds the packets, RUBRIC.md and a scores template;
the key mapping packet to (task, condition, run) and to who executed it is written outside it.
Given a rater pool, each packet goes to two raters, neither of them the run's executor.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any, Callable, Optional

from evalq.report.json_text import dumps
from evalq.errors import UserError
from evalq.results.store import StudyRow
from evalq.analysis.rater_pool import assign, executors_of
from evalq.analysis.rubric import render_rubric
from evalq.analysis.runs import RATER_FIELDS, Run

REDACTED = "[redacted]"
#: Workflow markers seen in agent reports regardless of the study's own names.
MARKERS = (r"workflow[_ -]?guided", r"single[_ -]?prompt", r"SKILL\.md", r"WORKFLOW\.md",
           r"workflow document", r"\.claude/skills/[\w./-]*", r"\bskills?/[\w./-]+")


def secrets_of(study: StudyRow) -> list[str]:
    """Strings that would reveal a condition: names, commits, skills, distinguishing settings."""
    words: set[str] = set()
    conditions = study.manifest.get("conditions", [])
    for cond in conditions:
        words.add(str(cond.get("name")))
        for key in ("commit", "skill"):
            if cond.get(key):
                words.add(str(cond[key]))
        if len({c.get("model") for c in conditions}) > 1 and cond.get("model"):
            words.add(str(cond["model"]))
    return sorted((w for w in words if len(w) >= 3), key=len, reverse=True)


def sanitize(text: str, secrets: list[str]) -> str:
    """Replace every secret (case-insensitive) and workflow marker with [redacted]."""
    for word in secrets:
        text = re.sub(re.escape(word), REDACTED, text, flags=re.IGNORECASE)
    for marker in MARKERS:
        text = re.sub(marker, REDACTED, text, flags=re.IGNORECASE)
    return text


def _packet_text(packet_id: str, run: Run, fetch: Callable[[str], Optional[bytes]]) -> str:
    counted = run.view.counted
    lines = [f"# Rater packet {packet_id}", "", f"Task: {run.task}", "",
             "Score each outcome per RUBRIC.md (one folder up from this packet): " + ", ".join(RATER_FIELDS), ""]
    if counted is None:
        return "\n".join(lines + ["(no finished attempt)"])
    if run.imported:
        row = (counted.grade or {}).get("row") or {}
        lines += ["## Blinded artifact", "", f"{row.get('blinded_artifact_path')}", ""]
        return "\n".join(lines)
    refs = counted.artifacts or {}
    for title, key in (("Final diff", "diff"), ("Agent's final report", "final_report")):
        data = fetch(refs[key]) if refs.get(key) else None
        body = data.decode("utf-8", "replace") if data is not None else "unavailable"
        lines += [f"## {title}", "", "```", body.rstrip(), "```", ""]
    lines += ["## Hidden test results", ""]
    for c in counted.criteria or []:
        verdict = {True: "pass", False: "fail", None: "unresolved"}[c.get("passed")]
        lines.append(f"- {c.get('name')}: {verdict}")
    return "\n".join(lines) + "\n"


def default_key_path(out: Path) -> Path:
    """Beside the packets folder, never inside it: `packets/` -> `packets.key.jsonl`."""
    out = Path(out).resolve()
    return out.parent / f"{out.name}.key.jsonl"


def _check_apart(out: Path, key: Path) -> None:
    if key.resolve().is_relative_to(out.resolve()):
        raise UserError(f"the key {key} would be inside the packets folder {out}", field="--key",
                        fix="give a path outside the folder that goes to raters")


def write_packets(study: StudyRow, runs: list[Run], out: Path,
                  fetch: Callable[[str], Optional[bytes]],
                  key: Optional[Path] = None, raters: Optional[list[str]] = None
                  ) -> dict[str, Any]:
    """out/packets/<id>.md, out/RUBRIC.md and out/raters.template.jsonl for raters; the key
    for the study owner at `key` (default: beside `out`), which must lie outside `out`.
    With `raters` (the pool), the template assigns each packet to two of them who did not
    execute its run, and a pool that cannot is refused before anything is written."""
    out = Path(out)
    key = Path(key) if key is not None else default_key_path(out)
    _check_apart(out, key)
    order = sorted(runs, key=lambda r: r.view.trial_id)
    random.Random(int(study.manifest.get("seed") or 0)).shuffle(order)
    numbered = [(f"run-{number:04d}", run) for number, run in enumerate(order, start=1)]
    assigned = assign(raters, numbered, study) if raters else None
    secrets = secrets_of(study)
    (out / "packets").mkdir(parents=True, exist_ok=True)
    key_rows, template = [], []
    for packet_id, run in numbered:
        text = sanitize(_packet_text(packet_id, run, fetch), secrets)
        (out / "packets" / f"{packet_id}.md").write_text(text, encoding="utf-8")
        key_rows.append({"packet_id": packet_id, "task_id": run.task,
                         "condition": run.condition, "run_id": run.repetition,
                         "trial_id": run.view.trial_id,
                         "executor_ids": executors_of(study, run)})
        for rater in (assigned[packet_id] if assigned else [None]):
            template.append(dict({"packet_id": packet_id, "rater_id": rater},
                                 **{f: None for f in RATER_FIELDS}))
    (out / "RUBRIC.md").write_text(sanitize(render_rubric(study.id), secrets), encoding="utf-8")
    (out / "raters.template.jsonl").write_text("".join(dumps(r) + "\n" for r in template))
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text("".join(dumps(r) + "\n" for r in key_rows))
    return {"packets": len(order), "packets_dir": out / "packets", "rubric": out / "RUBRIC.md",
            "key": key, "assigned": assigned}
