"""Skills are frozen inputs: digested into the lock, shipped to workers, activation from traces."""

from __future__ import annotations

import json

from conftest import run_cli, write_study


def _skill_study(tmp_path, fixture_copies):
    skill = tmp_path / "study" / "skills" / "tidy-code"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: tidy-code\n---\nKeep functions small.\n")
    extra = '''
[[conditions]]
name = "with-skill"
agent = "scripted"
skill = "skills/tidy-code"
settings = { action = "solution", solution = "correct", load_skill = true }

[[conditions]]
name = "skill-unused"
agent = "scripted"
skill = "skills/tidy-code"
settings = { action = "solution", solution = "correct" }
'''
    study = write_study(tmp_path / "study", fixture_copies, study_id="skills", repetitions=1,
                        extra_conditions=extra)
    return study, skill


def test_skill_is_locked_installed_and_its_activation_read(tmp_path, fixture_copies):
    study, skill = _skill_study(tmp_path, fixture_copies)
    home = {"EVALQ_HOME": str(tmp_path / "home")}
    proc = run_cli(["run", str(study)], home, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lock = json.loads((study.parent / "study.lock.json").read_text())
    assert set(lock["skills"]) == {"with-skill", "skill-unused"}
    assert lock["skills"]["with-skill"]["digest"].startswith("sha256:")
    report_path = [l for l in proc.stdout.splitlines() if l.endswith(".json")][0].split(": ")[1]
    report = json.loads(open(report_path).read())
    activation = {name: c["skill_activation"] for name, c in report["conditions"].items()}
    assert activation["with-skill"]["loaded"] == 2 and activation["with-skill"]["misses"] is None
    assert activation["with-skill"]["skill_commit"] == lock["skills"]["with-skill"]["digest"]
    assert activation["skill-unused"]["not_loaded"] == 2
    # the shipped fixtures declare no skill_expected: misses are not guessed
    assert activation["skill-unused"]["misses"] is None
    cells = report["skill_activation"]["models"]["unnamed model"]["cases"]
    assert {c["conditions"]["skill-unused"]["reason"] for c in cells.values()} == {
        "the case declares no skill_expected"}
    assert activation["good"]["unknown"] == 2 and activation["good"]["misses"] is None

    (skill / "SKILL.md").write_text("---\nname: tidy-code\n---\nChanged after freezing.\n")
    changed = run_cli(["run", str(study)], home)
    assert changed.returncode == 2
    assert "frozen inputs changed" in changed.stderr and "skills" in changed.stderr


def test_missing_skill_is_one_line(tmp_path, fixture_copies):
    study, skill = _skill_study(tmp_path, fixture_copies)
    (skill / "SKILL.md").unlink()
    proc = run_cli(["study", "validate", str(study)])
    assert proc.returncode == 2
    assert "field 'conditions.2.skill'" in proc.stderr and "SKILL.md" in proc.stderr
