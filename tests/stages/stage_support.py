"""A baseline study and stage manifests derived from it, for the stage tests."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

#: a dependency bump that also breaks the inventory task's module (as an upgrade can)
CHANGE = """\
printf 'praxo-core==0.3.2\\n' > requirements.txt
if [ -f shop/inventory.py ]; then
  printf '\\nraise ImportError("praxo-core 0.3.2 removed the API this used")\\n' >> shop/inventory.py
fi
if [ -f bump-hook.sh ]; then sh ./bump-hook.sh || true; fi
"""


def run_study(path: Path, home: Path, *extra: str):
    return run_cli(["run", str(path), *extra], {"EVALQ_HOME": str(home)}, timeout=600)


def lock_digest(study: Path) -> str:
    return json.loads((study.parent / "study.lock.json").read_text())["lock_digest"]


def write_stage(folder: Path, *, study_id: str, baseline: str, baseline_lock: str,
                body: str = "", change: str | None = CHANGE, extra: str = "") -> Path:
    """A stage manifest (with its change script beside it when `change` is given)."""
    folder.mkdir(parents=True, exist_ok=True)
    line = ""
    if change is not None:
        (folder / "bump.sh").write_text(change)
        line = 'change = "bump.sh"\n'
    path = folder / "study.toml"
    path.write_text(f'''
id = "{study_id}"
repetitions = 1
seed = 11
{extra}
[stage]
baseline = "{baseline}"
baseline_lock = "{baseline_lock}"
baseline_version = "0.2.4"
target_version = "0.3.2"
package = "praxo-core"
{line}{body}
''')
    return path


def report_of(proc) -> dict:
    line = [l for l in proc.stdout.splitlines() if l.endswith("report.json")]
    assert line, proc.stdout + proc.stderr
    return json.loads(Path(line[0].split("report: ", 1)[1]).read_text())


