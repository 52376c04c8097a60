"""The scripted agent's process: does what its plan says and prints a JSONL event stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def emit(event: dict) -> None:
    print(json.dumps(event), flush=True)


def main(plan_text: str) -> int:
    plan = json.loads(plan_text)
    action = plan.get("action", "noop")
    workspace = Path.cwd()
    emit({"type": "start", "action": action})
    if action == "solution":
        from evalq.fixtures.overlay import apply_overlay

        if plan.get("seconds"):
            time.sleep(float(plan["seconds"]))  # "thinking" time, to spread a study out
        changed = apply_overlay(Path(plan["overlay"]), workspace)
        emit({"type": "tool", "name": "edit", "files": changed})
        report = f"Applied the {plan['solution']} reference solution; the task is done."
    elif action == "patch":
        done = subprocess.run(["patch", "-p1", "--batch"], input=plan["patch"].encode(),
                              cwd=workspace, capture_output=True)
        emit({"type": "tool", "name": "patch", "exit": done.returncode})
        report = "Applied the patch; the task is done."
    elif action == "sleep":
        if plan.get("spawn_child"):
            child = subprocess.Popen(["sleep", str(float(plan["seconds"]) + 60)])
            emit({"type": "child", "pid": child.pid})
        time.sleep(float(plan["seconds"]))
        report = f"Slept {plan['seconds']} s."
    elif action == "probe":
        places = {"home": os.environ["HOME"], "tmp": os.environ["TMPDIR"],
                  "workspace": str(workspace)}
        seen = {k: (Path(v) / ".evalq-probe-marker").exists() for k, v in places.items()}
        for folder in places.values():
            (Path(folder) / ".evalq-probe-marker").write_text("left by an earlier run\n")
        emit({"type": "probe", "paths": places, "marker_seen": seen})
        report = "Probed the profile."
    else:
        report = "Did nothing; the task is done."
    if plan.get("load_skill") and plan.get("skill_path"):
        skill_file = Path(plan["skill_path"]) / "SKILL.md"
        emit({"type": "skill", "name": Path(plan["skill_path"]).name,
              "bytes": len(skill_file.read_bytes())})
    for name in plan.get("echo_env") or []:
        value = os.environ.get(name, "")
        print(f"{name}={value}", flush=True)
        print(f"debug: {name}={value}", file=sys.stderr, flush=True)
        (workspace / "leak.txt").write_text(f"{name}={value}\n")
        report += f" ({name}={value})"
    emit({"type": "result", "stop_reason": "completed", "report": report,
          "usage": plan.get("usage")})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
