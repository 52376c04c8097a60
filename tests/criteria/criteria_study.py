"""A study whose fixtures declare named criteria (hidden groups, trace rules, a review)."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES

CRITERIA = '''
[[criteria]]
name = "basic slugs"
kind = "hidden"
checks = ["test_simple_words", "test_lower_case", "test_digits_kept", "test_collapses*",
          "test_only_punctuation*", "test_empty_title", "test_excerpt_untouched"]

[[criteria]]
name = "no hyphen at the ends"
kind = "hidden"
required = false
checks = ["test_strips_*", "test_no_hyphen_at_either_end*"]

[[criteria]]
name = "edited the code"
kind = "trace"
rule = { event = "tool_call", tool = "edit", succeeded = true }

[[criteria]]
name = "loaded the skill"
kind = "trace"
required = false
rule = { any = [{ event = "tool_call", tool = "skill" },
                { event = "tool_call", contains = ["SKILL.md"] }] }

[[criteria]]
name = "reviewers accept it"
kind = "review"
required = false
field = "human_accepted"
'''

CONDITIONS = '''
[[conditions]]
name = "good"
agent = "scripted"
settings = { action = "solution", solution = "correct" }

[[conditions]]
name = "bad"
agent = "scripted"
settings = { action = "solution", solution = "incorrect" }

[[conditions]]
name = "idle"
agent = "scripted"
settings = { action = "noop" }

[[conditions]]
name = "skilled"
agent = "scripted"
skill = "skills/slug-rules"
settings = { action = "solution", solution = "incorrect", load_skill = true }
'''


def criteria_fixture(root: Path, fixture_id: str, track: str, package: str) -> Path:
    """py-slugify-bugfix under another id and track, with the criteria above, frozen."""
    from evalq.fixtures.fixture import freeze_fixture

    dest = root / fixture_id
    shutil.copytree(FIXTURES / "py-slugify-bugfix", dest)
    manifest = dest / "fixture.toml"
    text = manifest.read_text().replace('id = "py-slugify-bugfix"', f'id = "{fixture_id}"')
    labels = f'toolchain = "python"\ntrack = "{track}"\npackage = "{package}"'
    text = text.replace('toolchain = "python"', labels)
    manifest.write_text(text + CRITERIA)
    freeze_fixture(dest)
    return dest


def write_criteria_study(folder: Path, *, repetitions: int = 2) -> Path:
    """Two criteria fixtures in two tracks, four scripted conditions."""
    fixtures = folder / "fixtures"
    fixtures.mkdir(parents=True)
    paths = [criteria_fixture(fixtures, "slug-directed", "directed-integration", "textutil"),
             criteria_fixture(fixtures, "slug-free", "free-selection", "slugkit")]
    skill = folder / "skills" / "slug-rules"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: slug-rules\n---\nTrim hyphens at both ends.\n")
    listed = ", ".join(f'"{p.as_posix()}"' for p in paths)
    study = folder / "study.toml"
    study.write_text(f'id = "named"\nfixtures = [{listed}]\nrepetitions = {repetitions}\n'
                     f'seed = 11\n\n[budgets]\nwall_seconds = 120\n' + CONDITIONS)
    return study
