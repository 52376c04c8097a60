"""Installing a condition's skill into a fresh profile, and reading from a trace whether the
agent loaded it: activation is what the agent did, never inferred from the code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterable, Optional

from evalq.errors import InfrastructureError


def skill_source(skill: Optional[str], fixture_root: Path | None = None) -> Optional[Path]:
    """The skill directory a condition names (absolute, or relative to the fixture)."""
    if not skill:
        return None
    path = Path(skill).expanduser()
    if not path.is_absolute() and fixture_root is not None:
        path = fixture_root / path
    if not (path / "SKILL.md").is_file():
        raise InfrastructureError(f"skill '{skill}' has no SKILL.md at {path}")
    return path


def install_skill(source: Path, skills_dir: Path) -> Path:
    target = skills_dir / source.name
    skills_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, symlinks=False)
    return target


def loaded_from_tool_calls(calls: Iterable[tuple[str, Any]], skill_name: str) -> bool:
    """True when a tool call invoked the skill or read its SKILL.md."""
    for name, arguments in calls:
        text = json.dumps(arguments) if not isinstance(arguments, str) else arguments
        if name.lower() == "skill" and skill_name in text:
            return True
        if f"{skill_name}/SKILL.md" in text:
            return True
    return False
