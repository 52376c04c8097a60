"""`evalq show` and `evalq artifact` over a real embedded study, one of whose agents writes
terminal escape sequences into its diff; read-only commands that never create a database."""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess

from sqlalchemy import create_engine, inspect

from conftest import EVALQ, cli_env, run_cli, write_study
from evalq.artifacts import ArtifactStore

#: a patch whose added file holds escape sequences (clear screen, set the window title, bell)
#: and a bidi override: what a hostile agent writes to reach an operator's terminal
HOSTILE = r'''
[[conditions]]
name = "hostile"
agent = "scripted"
settings = { action = "patch", patch = """--- /dev/null
+++ b/notes.txt
@@ -0,0 +1,2 @@
+hello \u001b[2J\u001b]0;pwned\u0007 world
+\u202e reversed
""" }

[[conditions]]
name = "crash"
agent = "command"
settings = { argv = ["python3", "-c", "import sys; sys.stderr.write('boom ' + chr(27) + '[2J' + chr(0x202e) + ' tail' + chr(10)); sys.exit(2)"] }
'''
RAW = ("\x1b", "\x07", "\u202e")


def _on_a_terminal(args: list[str], env: dict) -> tuple[int, str]:
    """`evalq ARGS` with its stdout on a pseudo-terminal: (exit status, what it printed)."""
    main, child = pty.openpty()
    proc = subprocess.Popen([*EVALQ, *args], env=cli_env(env), stdout=child,
                            stderr=subprocess.PIPE, text=False)
    os.close(child)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    proc.wait(timeout=60)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace") + \
        proc.stderr.read().decode()


def test_show_and_artifact_over_a_real_study(tmp_path, fixture_copies):
    home = tmp_path / "home"
    env = {"EVALQ_HOME": str(home)}
    study = write_study(tmp_path / "study", fixture_copies, study_id="daily", repetitions=1,
                        extra_conditions=HOSTILE)
    assert run_cli(["run", str(study)], env, timeout=600).returncode == 0
    with sqlite3.connect(home / "evalq.db") as conn:
        rows = dict(conn.execute("select trial_id, artifacts from attempts").fetchall())
    bad = next(t for t in rows if "/py-inventory-feature/bad/" in t)
    hostile = next(t for t in rows if "/hostile/" in t)
    store = ArtifactStore(home / "artifacts")

    shown = run_cli(["show", bad], env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"trial {bad}" in out and "outcome: incorrect" in out
    assert "agent: exit status 0, model calls unavailable" in out
    failed = json.loads(run_cli(["show", bad, "--json"], env).stdout)
    assert failed["outcome"] == "incorrect" and failed["checks"]["failed"] >= 1
    assert f"failed checks: {failed['checks']['failed']} of {failed['checks']['total']}" in out
    for check in failed["failed_checks"]:
        assert check["name"] in out
    assert "--- a/shop/inventory.py" in out  # the diff itself
    for name in ("diff", "stderr", "stdout", "metrics", "workspace"):
        assert f"evalq artifact {bad} {name}" in out

    # The artifact, to a pipe: the stored bytes exactly; -o FILE: the same, in the file.
    refs = json.loads(rows[bad])
    piped = subprocess.run([*EVALQ, "artifact", bad, "diff"], env=cli_env(env),
                           capture_output=True, timeout=60)
    assert piped.returncode == 0 and piped.stdout == store.get(refs["diff"])
    archive = tmp_path / "ws.tar.gz"
    saved = run_cli(["artifact", bad, "workspace", "-o", str(archive)], env)
    assert saved.returncode == 0, saved.stderr
    assert archive.read_bytes() == store.get(refs["workspace"])
    unknown = run_cli(["artifact", bad, "nonesuch"], env)
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1
    assert "has no artifact 'nonesuch'" in unknown.stderr
    assert "use one of: diff, final_report, metrics, stderr, stdout" in unknown.stderr
    missing = run_cli(["show", bad, "--attempt", "2"], env)
    assert missing.returncode == 2 and "has no attempt 2" in missing.stderr

    # The hostile agent's escapes reach the terminal only as visible text.
    hostile_diff = store.get(json.loads(rows[hostile])["diff"]).decode()
    assert "\x1b[2J" in hostile_diff and "\u202e" in hostile_diff  # stored as written
    status, printed = _on_a_terminal(["show", hostile], env)
    assert status == 0, printed
    assert "notes.txt" in printed and "\\x1b[2J" in printed and "\\u202e" in printed
    assert not any(ch in printed for ch in RAW), repr(printed)
    status, printed = _on_a_terminal(["artifact", hostile, "diff"], env)
    assert status == 0 and "\\x1b]0;pwned\\x07" in printed
    assert not any(ch in printed for ch in RAW), repr(printed)
    status, printed = _on_a_terminal(["artifact", hostile, "workspace"], env)
    assert status == 2 and "-o" in printed and "\x1f\x8b" not in printed  # no gzip on a tty
    assert json.loads(run_cli(["show", hostile, "--json"], env).stdout)["diff"] == hostile_diff

    # A crashed agent: its exit status and its stderr, the escapes in it made visible.
    crash = next(t for t in rows if "/crash/" in t)
    status, printed = _on_a_terminal(["show", crash], env)
    assert status == 0, printed
    assert "agent: exit status 2" in printed and "agent error: it exited with an error" in printed
    assert "agent stderr (last lines):" in printed and "boom \\x1b[2J\\u202e tail" in printed
    assert not any(ch in printed for ch in RAW), repr(printed)

    # Resubmitting says what it changes under the counting rule.
    timed = run_cli(["resubmit", "daily", "--outcome", "timed_out"], env)
    assert timed.returncode == 0, timed.stderr
    assert "a timed-out run is a valid result and stays counted" in timed.stdout
    assert "replace nothing" in timed.stdout
    infra = run_cli(["resubmit", "daily", "--outcome", "infrastructure_failure"], env)
    assert infra.returncode == 0 and "replaces its trial's infrastructure_failure" in infra.stdout


def _one_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalq: error:"), proc.stderr
    return lines[0]


READ_ONLY = (["status", "ghost"], ["studies"], ["report", "ghost"], ["show", "ghost/a/b/r1"],
             ["artifact", "ghost/a/b/r1", "diff"])


def test_read_only_commands_create_no_sqlite_database(tmp_path):
    home = tmp_path / "home"
    for args in READ_ONLY:
        line = _one_line(run_cli(args, {"EVALQ_HOME": str(home)}, cwd=tmp_path))
        assert f"no evalq results database at sqlite:///{home}/evalq.db" in line, line
        assert not home.exists(), f"`evalq {' '.join(args)}` made {list(home.rglob('*'))}"


def test_read_only_commands_create_no_postgresql_schema(tmp_path, postgres_url):
    # a password in the URL (the local server trusts, so it is not checked) is never shown
    with_password = postgres_url.replace("postgres@", "postgres:s3cret-pw@", 1)
    env = {"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_DATABASE_URL": with_password}
    for args in READ_ONLY:
        line = _one_line(run_cli(args, env, cwd=tmp_path))
        assert "holds no evalq tables" in line and "postgres:***@127.0.0.1" in line, line
        assert "s3cret-pw" not in line
    engine = create_engine(postgres_url)
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_a_missing_study_names_the_database_read(tmp_path):
    home = tmp_path / "home"
    from evalq.results.store import init_db

    init_db(f"sqlite:///{home / 'evalq.db'}").dispose()
    env = {"EVALQ_HOME": str(home)}
    for args in (["status", "ghost"], ["report", "ghost"]):
        line = _one_line(run_cli(args, env, cwd=tmp_path))
        assert f"no study 'ghost' in the results database sqlite:///{home}/evalq.db" in line
    assert f"no trial 'ghost/a/b/r1' in the results database sqlite:///{home}" in \
        _one_line(run_cli(["show", "ghost/a/b/r1"], env, cwd=tmp_path))
    listed = run_cli(["studies"], env, cwd=tmp_path)
    assert listed.returncode == 0 and f"no studies yet in sqlite:///{home}" in listed.stdout
    assert not (home / "reports").exists()


def test_no_wait_without_a_broker_is_refused_before_anything_is_written(tmp_path,
                                                                          fixture_copies):
    home = tmp_path / "home"
    study = write_study(tmp_path / "study", fixture_copies, study_id="nw", repetitions=1)
    line = _one_line(run_cli(["run", str(study), "--no-wait"], {"EVALQ_HOME": str(home)}))
    assert "field '--no-wait'" in line and "needs a broker" in line and "EVALQ_BROKER_URL" in line
    assert not home.exists() and not study.with_name("study.lock.json").exists()


def test_terminal_text_shows_every_control_character_and_keeps_lines():
    from evalq.plaintext import terminal_text

    hostile = "a\x1b[31mred\rover\x9b2J\x00\x7f\tb\nc\u202ed\u2066e"
    shown = terminal_text(hostile)
    assert shown == ("a\\x1b[31mred\\x0dover\\x9b2J\\x00\\x7f\tb\nc\\u202ed\\u2066e")
    assert terminal_text(None) == "" and terminal_text("plain\n") == "plain\n"


def test_show_bounds_and_neutralises_agent_lines():
    from evalq.cli.show_cmd import LINE_CHARS, detail_lines

    details = {"trial": "s/t/c/r1", "study": "s", "task": "t", "condition": "c", "repetition": 1,
               "attempt": 1, "attempts": [1], "counted_attempt": 1, "state": "done",
               "outcome": "incorrect", "reason": "x\x1b[2Jy", "exit_code": 1, "model_calls": 0,
               "stop_reason": None, "agent_error": "exited with an error before any model call",
               "stderr_tail": "a\rb\n" + "z" * 10_000, "checks": {"total": 0, "failed": 0},
               "failed_checks": [], "diff": "+q\x0cw\n", "diff_unavailable": None,
               "worker_host": None, "times": {}, "artifacts": []}
    lines = detail_lines(details, "evalq artifact s/t/c/r1")
    assert not any(ch in line for line in lines for ch in "\x1b\r\x0c")
    assert "  a\\x0db" in lines and "  +q\\x0cw" in lines
    assert max(len(line) for line in lines) <= LINE_CHARS + 2
