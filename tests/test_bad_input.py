"""Bad input and failing servers: one line, a truthful exit code, no traceback, nothing written.

Each case runs the real `evalq` command in a process of its own, with a home and a manifest
folder whose contents are compared before and after.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EVALQ, FIXTURES, cli_env

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo" / "study.toml"


def snapshot(*folders: Path) -> dict[str, bytes]:
    files = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")) if folder.exists() else []:
            if path.is_file():
                files[str(path)] = path.read_bytes()
    return files


@pytest.fixture
def place(tmp_path):
    """A study folder with a copy of the demo manifest (pointing at the shipped fixtures)."""
    study = tmp_path / "study"
    study.mkdir()
    text = DEMO.read_text().replace('fixtures = ["../../fixtures"]',
                                    f'fixtures = ["{FIXTURES.as_posix()}"]')
    (study / "study.toml").write_text(text)
    return tmp_path


def run_cli(place: Path, args: list[str], env: dict[str, str] | None = None,
            files: dict[str, bytes] | None = None) -> subprocess.CompletedProcess:
    for name, data in (files or {}).items():
        (place / name).parent.mkdir(parents=True, exist_ok=True)
        (place / name).write_bytes(data)
    full_env = cli_env({"EVALQ_HOME": str(place / "home"), **(env or {})})
    return subprocess.run([*EVALQ, *args], cwd=place, env=full_env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def assert_one_line(done: subprocess.CompletedProcess, code: int, *words: str,
                    per_row: bool = False) -> None:
    """One error line (an import names each bad row on a line of its own: `per_row`)."""
    err = done.stderr.strip()
    assert done.returncode == code, (done.returncode, err)
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert lines and all(line.startswith("evalq: error: ") for line in lines), err
    assert per_row or len(lines) == 1, err
    for word in words:
        assert word in err, err


GARBAGE = bytes(range(256)) * 4

CASES = {
    # name: (args, env, files written first, expected exit code, words in the line)
    "traversal in report": (["report", "../../x"], {}, {}, 2, ["not a study id"]),
    "absolute study id": (["report", "/tmp/evalq-abs"], {}, {}, 2, ["not a study id"]),
    "traversal in import": (["import", "r.jsonl", "--study", "../../x"], {},
                            {"r.jsonl": b"{}\n"}, 2, ["--study"]),
    "traversal in compare": (["compare", "../a:b", "c"], {}, {}, 2, ["BASELINE"]),
    "broker refuses": (["run", "study/study.toml"],
                       {"EVALQ_BROKER_URL": "redis://127.0.0.1:1/0"}, {}, 2,
                       ["EVALQ_BROKER_URL", "cannot reach"]),
    "missing redis database": (["run", "study/study.toml"],
                               {"EVALQ_BROKER_URL": "redis://127.0.0.1:6379/999"}, {}, 2,
                               ["out of range"]),
    "unknown broker scheme": (["run", "study/study.toml"], {"EVALQ_BROKER_URL": "foo://bar"},
                              {}, 2, ["not supported"]),
    "database not a url": (["status", "demo"], {"EVALQ_DATABASE_URL": "not a url"}, {}, 2,
                           ["EVALQ_DATABASE_URL"]),
    "mysql database": (["status", "demo"], {"EVALQ_DATABASE_URL": "mysql://u@h/db"}, {}, 2,
                       ["not supported"]),
    "database refuses": (["run", "study/study.toml"],
                         {"EVALQ_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/test"}, {}, 2,
                         ["cannot reach the results database"]),
    "binary manifest": (["study", "validate", "bad.toml"], {}, {"bad.toml": GARBAGE}, 2,
                        ["not UTF-8"]),
    "binary results.jsonl": (["import", "r.jsonl", "--study", "imp"], {},
                             {"r.jsonl": GARBAGE}, 2, ["not UTF-8"]),
    "lock is a list": (["study", "freeze", "study/study.toml"], {},
                       {"study/study.lock.json": b"[]"}, 2, ["must be a JSON object"]),
    "trial seconds not a number": (["status", "demo"], {"EVALQ_MAX_TRIAL_SECONDS": "abc"}, {},
                                   2, ["EVALQ_MAX_TRIAL_SECONDS"]),
    "broken evalq.toml": (["status", "demo"], {}, {"evalq.toml": b"home = \n"}, 2,
                          ["evalq.toml", "cannot parse"]),
    "home = 5": (["status", "demo"], {"EVALQ_HOME": ""}, {"evalq.toml": b"home = 5\n"}, 2,
                 ["field 'home'"]),
    "unknown key in evalq.toml": (["status", "demo"], {}, {"evalq.toml": b"sandox = 'x'\n"}, 2,
                                  ["did you mean 'sandbox'"]),
    "missing EVALQ_CONFIG": (["status", "demo"], {"EVALQ_CONFIG": "nope.toml"}, {}, 2,
                             ["does not exist"]),
    "home is a file": (["status", "demo"], {"EVALQ_HOME": "afile"}, {"afile": b"x"}, 2,
                       ["not a folder"]),
    "artifacts under a file": (["run", "study/study.toml"],
                               {"EVALQ_ARTIFACTS_URL": "afile/artifacts"}, {"afile": b"x"}, 2,
                               ["EVALQ_ARTIFACTS_URL"]),
    "sandbox nonesuch in file": (["status", "demo"], {}, {"evalq.toml": b'sandbox = "x"\n'}, 2,
                                 ["field 'sandbox'"]),
    "unknown primary metric": (["study", "validate", "m.toml"], {},
                               {"m.toml": b'id = "m"\nfixtures = ["../x"]\nprimary_metrics = '
                                          b'["tprr"]\n[[conditions]]\nname = "a"\n'
                                          b'agent = "scripted"\n'}, 2, ["primary_metrics.0"]),
    "repetitions under environment": (["study", "validate", "m.toml"], {},
                                      {"m.toml": b'id = "m"\nfixtures = ["../x"]\n'
                                                 b'[environment]\nrepetitions = 5\n'
                                                 b'[[conditions]]\nname = "a"\n'
                                                 b'agent = "scripted"\n'}, 2,
                                      ["move it to the top level"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_one_line_and_writes_nothing(place, name):
    args, env, files, code, words = CASES[name]
    for rel, data in files.items():
        (place / rel).parent.mkdir(parents=True, exist_ok=True)
        (place / rel).write_bytes(data)
    if "{home}" in str(env):
        env = {k: v.format(home=place / "home") for k, v in env.items()}
    before = snapshot(place)
    done = run_cli(place, args, env)
    assert_one_line(done, code, *words, per_row=args[0] == "import")
    assert snapshot(place) == before, "a refused command wrote files"


def test_an_unexpected_error_is_still_one_line(place):
    """Not a case evalq knows: a folder where a report file must go."""
    (place / "home" / "reports" / "demo").mkdir(parents=True)
    done = run_cli(place, ["report", "demo", "--format", "json", "--out",
                           str(place / "home")])
    assert done.returncode in (1, 2), done.stderr
    assert "Traceback" not in done.stderr


def test_help_does_not_load_the_database_or_celery():
    code = ("import sys; from evalq.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('sqlalchemy', 'celery', 'pydantic', 'sqlmodel') "
            "if m in sys.modules)\nprint('HEAVY', heavy)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr


def test_each_lazy_command_shows_its_own_help():
    import click

    from evalq.cli import COMMANDS, load_command

    for name, (_, short) in COMMANDS.items():
        command = load_command(name)
        assert isinstance(command, click.Command)
        assert command.get_short_help_str(limit=300) == short, name


def test_failed_trials_give_a_nonzero_exit_and_their_reason_everywhere(tmp_path):
    """A condition whose agent is not installed: every one of its trials is an
    infrastructure failure. Run from a folder holding a folder named `evalq`, which must not
    shadow the package in the local workers."""
    shadow = tmp_path / "evalq"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the working directory shadows evalq')")
    (tmp_path / "study.toml").write_text(f'''
id = "ghost"
fixtures = ["{(FIXTURES / 'py-slugify-bugfix').as_posix()}"]
repetitions = 2
[[conditions]]
name = "good"
agent = "scripted"
settings = {{ action = "solution", solution = "correct" }}
[[conditions]]
name = "ghost"
agent = "command"
settings = {{ argv = ["no-such-agent-binary-evalq", "{{prompt}}"] }}
''')
    env = cli_env({"EVALQ_HOME": str(tmp_path / "home")})
    cli = [sys.executable, "-P", *EVALQ[1:]]  # like the `evalq` script: not from the cwd
    done = subprocess.run([*cli, "run", "study.toml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "ghost: infrastructure_failure 2" in done.stderr
    assert "good: correct 2" in done.stderr
    assert "no-such-agent-binary-evalq" in done.stderr  # the reason, where the user looks
    status = subprocess.run([*cli, "status", "ghost"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert "2 x infrastructure_failure" in status.stdout and \
        "no-such-agent-binary-evalq" in status.stdout, status.stdout
    report = (tmp_path / "home" / "reports" / "ghost" / "report.md").read_text()
    assert report.count("no-such-agent-binary-evalq") >= 2


def test_workers_that_keep_dying_stop_the_wait_with_the_reason(tmp_path, monkeypatch):
    """A worker that cannot even import Celery (here: a broken celery module on its path)."""
    from evalq.config import load_settings
    from evalq.errors import InfrastructureError
    from evalq.queue.embedded import QUICK_DEATHS, LocalWorkers

    broken = tmp_path / "broken" / "celery"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise SystemExit('celery is broken on this worker')")
    (broken / "__main__.py").write_text("raise SystemExit('celery is broken on this worker')")
    monkeypatch.setenv("PYTHONPATH", str(broken.parent))
    monkeypatch.setenv("EVALQ_HOME", str(tmp_path / "home"))
    settings = load_settings()
    workers = LocalWorkers.start(settings, concurrency=1)
    try:
        with pytest.raises(InfrastructureError, match="keep dying.*celery is broken"):
            for _ in range(QUICK_DEATHS + 1):
                workers.procs[0].wait(timeout=60)
                workers.check()
    finally:
        workers.stop()


def test_any_failure_inside_the_runner_is_a_recorded_outcome(tmp_path, fixture_copies,
                                                            monkeypatch):
    """An error evalq did not foresee (here the packer raising) still ends the attempt with
    an infrastructure_failure message naming it, instead of leaving it `running`."""
    from conftest import write_study
    from evalq.config import load_settings
    from evalq.queue.launch import register_study
    from evalq.queue.messages import message_for
    from evalq.results.store import create_attempts, trials_of
    from evalq.study.manifest import load_manifest
    from evalq.workers import runner

    monkeypatch.setenv("EVALQ_HOME", str(tmp_path / "home"))
    settings = load_settings()
    study = load_manifest(write_study(tmp_path / "s", fixture_copies, repetitions=1))
    engine, _, study = register_study(study, settings)
    trial = trials_of(engine, study.id)[0]
    create_attempts(engine, [trial.id], {trial.id: 1}, study.id)

    def explode(_root):
        raise RuntimeError("packing exploded")

    monkeypatch.setattr(runner, "pack_workspace", explode)
    sent: list[tuple[str, dict]] = []
    outcome = runner.run_trial_message(message_for(trial, 1, 3),
                                       lambda name, payload: sent.append((name, payload)),
                                       hostname="t@test", settings=settings)
    assert outcome == "infrastructure_failure"
    assert [name for name, _ in sent] == ["evalq.record_result"]
    assert sent[0][1]["outcome"] == "infrastructure_failure"
    assert "RuntimeError: packing exploded" in sent[0][1]["reason"]
    runs = tmp_path / "home" / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "the run's folder was left behind"
