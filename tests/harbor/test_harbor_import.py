"""Importing Harbor task folders: what is refused names its file and field and writes
nothing; an imported fixture records the source digest, format version and pinned
environment digest; export writes the task folder back with the digest it came in with."""

from __future__ import annotations

import subprocess
import tomllib

import pytest

from harbor_tasks import python_task
from evalq.digest import tree_digest
from evalq.errors import UserError
from evalq.fixtures.fixture import load_fixture
from evalq.fixtures.harbor.environment import remove_environment
from evalq.fixtures.harbor.exporter import export_fixture
from evalq.fixtures.harbor.importer import import_task
from evalq.fixtures.harbor.task import read_task
from evalq.graders.sandbox.toolchain import rootfs_dir


def _refusal(task, tmp_path, **kwargs) -> str:
    out = tmp_path / "out"
    with pytest.raises(UserError) as caught:
        import_task(task, out, **kwargs)
    assert not out.exists() or list(out.iterdir()) == [], "a refusal left files behind"
    return caught.value.one_line()


def test_internet_is_refused_or_downgraded_with_a_recorded_line(tmp_path):
    task = python_task(tmp_path, internet="true")
    line = _refusal(task, tmp_path)
    assert "task.toml" in line and "environment.allow_internet" in line
    assert "--without-internet" in line
    read = read_task(task, allow_downgrade=True)
    assert read.downgraded and "without internet" in read.downgraded[0]


@pytest.mark.parametrize("extra, field", [
    ("gpus = 1", "environment.gpus"),
    ("unknown_knob = 3", "environment.unknown_knob"),
    ('[verifier.env]\nTOKEN = "${OPENAI_API_KEY}"', "verifier.env.TOKEN"),
])
def test_fields_evalq_cannot_honour_are_refused_by_name(tmp_path, extra, field):
    line = _refusal(python_task(tmp_path, extra=extra), tmp_path)
    assert "task.toml" in line and f"field '{field}'" in line, line


def test_a_compose_environment_is_refused(tmp_path):
    task = python_task(tmp_path, more={"environment/docker-compose.yaml": "services: {}\n"})
    line = _refusal(task, tmp_path)
    assert "docker-compose.yaml" in line and "one sandbox per task" in line


def test_a_base_image_not_present_locally_is_refused_before_any_build(tmp_path):
    task = python_task(tmp_path, base="evalq-no-such-base-image:1.0")
    line = _refusal(task, tmp_path)
    assert "environment/Dockerfile" in line and "field 'FROM'" in line
    assert "evalq-no-such-base-image:1.0" in line and "not present locally" in line


def test_an_oracle_that_changes_nothing_in_the_workspace_is_refused(tmp_path):
    task = python_task(tmp_path, more={"solution/solve.sh": "#!/bin/bash\ntrue\n"})
    try:
        line = _refusal(task, tmp_path)
    finally:
        remove_environment(task.name)
    assert "solution/solve.sh" in line and "changed nothing" in line


def test_import_records_digests_and_export_round_trips(tmp_path):
    task = python_task(tmp_path)
    try:
        done = import_task(task, tmp_path / "fixtures")
        fixture = load_fixture(done.path)
        settings = tomllib.loads((done.path / "harbor.toml").read_text())
        assert settings["source_digest"] == tree_digest(task)
        assert settings["format_version"] == "1.0" and settings["workdir"] == "/app"
        # the pinned digest is the tree's, as tar of the tree gives it, and the image's label
        tree = rootfs_dir() / fixture.spec.toolchain
        assert (tree.with_name(f"{tree.name}.digest").read_text().strip()
                == settings["rootfs_digest"] == done.rootfs_digest)
        label = subprocess.run(["docker", "image", "inspect", "--format",
                                '{{ index .Config.Labels "org.evalq.rootfs-digest" }}',
                                fixture.spec.image], capture_output=True, text=True)
        assert label.stdout.strip() == settings["rootfs_digest"]
        assert fixture.spec.grade.verdict == "harbor"
        assert (done.path / "workspace" / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
        assert "a + b" in (done.path / "solutions" / "correct" / "calc.py").read_text()
        assert fixture.spec.limits.wall_seconds == 120.0 and fixture.spec.grade.memory_mb == 512
        exported = export_fixture(done.path, tmp_path / "exported")
        assert tree_digest(exported) == tree_digest(task)
        assert (exported / "tests" / "test.sh").read_bytes() == (task / "tests" / "test.sh").read_bytes()
        with pytest.raises(UserError, match="already exists"):
            import_task(task, tmp_path / "fixtures")
    finally:
        remove_environment(task.name)


def test_export_refuses_a_fixture_written_for_evalqs_judge(tmp_path):
    from pathlib import Path
    shipped = Path(__file__).resolve().parents[2] / "fixtures" / "py-slugify-bugfix"
    with pytest.raises(UserError) as caught:
        export_fixture(shipped, tmp_path)
    assert "field 'grade.verdict'" in caught.value.one_line()
    assert list(tmp_path.iterdir()) == []


def test_cli_imports_what_it_can_refuses_the_rest_in_one_line_each(tmp_path):
    from conftest import run_cli

    good = python_task(tmp_path)
    internet = python_task(tmp_path, internet="true")
    out = tmp_path / "fixtures"
    try:
        proc = run_cli(["fixtures", "import", "harbor", str(good), str(internet),
                        "--out", str(out)], timeout=600)
        assert proc.returncode == 2, proc.stderr
        refused = [line for line in proc.stderr.splitlines() if line.startswith("refused:")]
        assert len(refused) == 1 and "environment.allow_internet" in refused[0]
        assert f"imported {good} -> {out / good.name}" in proc.stdout
        assert sorted(p.name for p in out.iterdir()) == [good.name]
        check = run_cli(["fixtures", "check", str(out / good.name), "--json"], timeout=600)
        assert check.returncode == 0, check.stdout + check.stderr
        # another grading machine: the environment is built again from the fixture alone
        pinned = tomllib.loads((out / good.name / "harbor.toml").read_text())["rootfs_digest"]
        remove_environment(good.name)
        rebuilt = run_cli(["fixtures", "environment", str(out / good.name)], timeout=600)
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert f"environment built, {pinned} as pinned" in rebuilt.stdout
        tree = rootfs_dir() / f"harbor-{good.name}"
        assert tree.with_name(f"{tree.name}.digest").read_text().strip() == pinned
        exported = run_cli(["fixtures", "export", "harbor", str(out / good.name), "--out",
                            str(tmp_path / "back")])
        assert exported.returncode == 0, exported.stderr
        assert tree_digest(tmp_path / "back" / good.name) == tree_digest(good)
        downgraded = run_cli(["fixtures", "import", "harbor", str(internet), "--out", str(out),
                              "--without-internet"], timeout=600)
        assert downgraded.returncode == 0, downgraded.stderr
        assert "downgraded: environment.allow_internet = true was imported as false" \
            in downgraded.stdout
        settings = tomllib.loads((out / internet.name / "harbor.toml").read_text())
        assert settings["downgraded"] and "without internet" in settings["downgraded"][0]
    finally:
        remove_environment(good.name)
        remove_environment(internet.name)


def test_an_instruction_that_is_not_text_or_empty_is_refused(tmp_path):
    task = python_task(tmp_path)
    (task / "instruction.md").write_bytes(b"\xff\xfe fix it")
    assert "instruction.md: not UTF-8 text" in _refusal(task, tmp_path)
    (task / "instruction.md").write_text("  \n")
    assert "instruction.md: the instruction is empty" in _refusal(task, tmp_path)


def test_a_task_over_the_fixture_limits_is_refused_naming_the_task(tmp_path):
    extra = {f"tests/data/case{i}.txt": f"{i}\n" for i in range(70)}
    task = python_task(tmp_path, more=extra)
    try:
        line = _refusal(task, tmp_path)
    finally:
        remove_environment(task.name)
    assert line.startswith(f"{task}: as a fixture") and "over the limit of 64" in line
    assert ".importing." not in line
