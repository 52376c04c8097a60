"""Issue 20: import writes in bulk in one transaction; a failure anywhere, the last row included,
leaves the database exactly as it was; the same inputs again are a no-op (SQLite and PostgreSQL)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from conftest import run_cli
from adjudicated_gen import generate

from evalq.analysis import import_write
from evalq.analysis.export import adjudicated_row
from evalq.analysis.runs import study_runs
from evalq.analysis.adjudicated_import import import_results
from evalq.errors import UserErrors
from evalq.results.store import init_db


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/bulk.db"
    return request.getfixturevalue("postgres_url")


def _snapshot(url):
    """Every row of every evalq table, as text, so 'unchanged' means unchanged."""
    engine = init_db(url)
    with engine.connect() as conn:
        return {table: sorted(map(str, conn.execute(text(f"SELECT * FROM {table}")).all()))
                for table in ("studies", "trials", "attempts")}


def _rewrite(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_failure_on_the_last_row_leaves_the_database_unchanged(tmp_path, db_url, monkeypatch):
    kept = generate(tmp_path / "kept", tasks=2, k=2)
    import_results(db_url, kept["results"], "kept", raters_path=kept["raters"],
                   adjudications_path=kept["adjudications"])
    before = _snapshot(db_url)
    assert len(before["attempts"]) == 8
    paths = generate(tmp_path / "data", tasks=6, k=3)
    rows = [json.loads(line) for line in paths["results"].read_text().splitlines()]
    rows[-1]["passed"] = "yes"
    rows[4]["run_order"] = -1
    _rewrite(paths["results"], rows)
    # Small chunks: rows before the bad ones have really been sent to the database.
    monkeypatch.setattr(import_write, "CHUNK", 5)
    with pytest.raises(UserErrors) as caught:
        import_results(db_url, paths["results"], "broken", raters_path=paths["raters"],
                       adjudications_path=paths["adjudications"])
    lines = caught.value.lines()
    assert len(lines) == 2
    assert "line 5" in lines[0] and "run_order" in lines[0]
    assert f"line {len(rows)}" in lines[1] and "'passed'" in lines[1]
    assert _snapshot(db_url) == before


def test_a_database_error_mid_import_rolls_everything_back(tmp_path, db_url, monkeypatch):
    kept = generate(tmp_path / "kept", tasks=2, k=2)
    rows = [json.loads(line) for line in kept["results"].read_text().splitlines()]
    rows[0]["notes"] = "naïve\ttab \\ back\nslash – ✓ 😀"  # COPY's escapes and UTF-8
    _rewrite(kept["results"], rows)
    import_results(db_url, kept["results"], "kept")
    study, runs = study_runs(init_db(db_url), "kept")
    assert sorted((adjudicated_row(study, r) for r in runs), key=lambda r: r["run_order"]) == \
        sorted(rows, key=lambda r: r["run_order"])
    before = _snapshot(db_url)
    paths = generate(tmp_path / "data", tasks=6, k=3)
    monkeypatch.setattr(import_write, "CHUNK", 4)
    real_finish = import_write.ImportTransaction.finish

    def finish_then_fail(self, manifest, lock):
        self.flush()  # every row is in the database, uncommitted
        count = self.conn.execute(text("SELECT count(*) FROM attempts WHERE study_id = 'x'"))
        assert count.scalar_one() == 36
        raise RuntimeError("the database went away on the last row")

    monkeypatch.setattr(import_write.ImportTransaction, "finish", finish_then_fail)
    with pytest.raises(RuntimeError):
        import_results(db_url, paths["results"], "x")
    assert _snapshot(db_url) == before
    monkeypatch.setattr(import_write.ImportTransaction, "finish", real_finish)
    summary = import_results(db_url, paths["results"], "x")
    assert summary.runs == 36 and not summary.unchanged
    after = _snapshot(db_url)
    assert len(after["attempts"]) == 8 + 36
    again = import_results(db_url, paths["results"], "x")
    assert again.unchanged and again.runs == 36 and _snapshot(db_url) == after


def test_every_bad_row_is_one_line_and_nothing_is_written(tmp_path):
    paths = generate(tmp_path / "data", tasks=3)
    rows = [json.loads(line) for line in paths["results"].read_text().splitlines()]
    rows[1]["task_id"] = "a/b"
    rows[7]["validation_passed"] = 1
    _rewrite(paths["results"], rows)
    db = f"sqlite:///{tmp_path}/cli.db"
    proc = run_cli(["import", str(paths["results"]), "--study", "cli"],
                   {"EVALQ_DATABASE_URL": db})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in proc.stderr
    assert "line 2" in lines[0] and "field 'task_id'" in lines[0]
    assert "line 8" in lines[1] and "field 'validation_passed'" in lines[1]
    assert _snapshot(db) == {"studies": [], "trials": [], "attempts": []}


def test_raters_and_adjudications_problems_are_all_named(tmp_path):
    paths = generate(tmp_path / "data", tasks=2)
    raters = [json.loads(line) for line in paths["raters"].read_text().splitlines()]
    raters.append(dict(raters[0]))  # the same rater scores the same run twice
    raters.append(dict(raters[1], task_id="task-999"))  # a run that is not in the results
    _rewrite(paths["raters"], raters)
    adjud = [json.loads(line) for line in paths["adjudications"].read_text().splitlines()]
    adjud.append({"task_id": "task-000", "condition": "single_prompt", "run_id": 1})
    _rewrite(paths["adjudications"], adjud)
    db = f"sqlite:///{tmp_path}/r.db"
    with pytest.raises(UserErrors) as caught:
        import_results(db, paths["results"], "r", raters_path=paths["raters"],
                       adjudications_path=paths["adjudications"])
    lines = caught.value.lines()
    assert len(lines) == 3, lines
    assert f"line {len(raters) - 1}: rater" in lines[0] and "twice" in lines[0]
    assert f"line {len(adjud)} adjudicates no outcome" in lines[1]
    assert f"line {len(raters)} rates a run not in the results" in lines[2]
    assert _snapshot(db) == {"studies": [], "trials": [], "attempts": []}
