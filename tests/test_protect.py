"""The grader's files are reset before grading: restored, removed, and recorded."""

from __future__ import annotations

from evalq.graders.protect import matches, protected_patterns, reset_grader_files


def _tree(root, files):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_patterns_match_names_at_any_depth_and_paths_whole():
    assert matches("conftest.py", ["conftest.py"]) and matches("a/b/conftest.py", ["conftest.py"])
    assert not matches("a/conftest.py.bak", ["conftest.py"])
    assert matches("build/Makefile", ["build/*"]) and not matches("src/build/Makefile", ["build/*"])
    assert protected_patterns("python", None)[0] == "conftest.py"
    assert protected_patterns("make", None) == () and protected_patterns("python", []) == ()


def test_changed_deleted_and_added_files_are_reset(tmp_path):
    original = _tree(tmp_path / "original", {"pytest.ini": "[pytest]\n", "src/app.py": "v1",
                                             "sub/conftest.py": "shipped"})
    hidden = _tree(tmp_path / "hidden", {"hidden_tests/test_x.py": "hidden"})
    work = _tree(tmp_path / "work", {
        "pytest.ini": "[pytest]\naddopts = -p forge\n",  # changed
        "src/app.py": "v2 (the agent's solution: kept)",
        "sub": "a file where the shipped directory was",  # sub/conftest.py deleted
        "deep/er/conftest.py": "added",
        "hidden_tests/test_extra.py": "planted",
    })
    notes = reset_grader_files(work, original, hidden, ["conftest.py", "pytest.ini"])
    assert (work / "pytest.ini").read_text() == "[pytest]\n"
    assert (work / "sub" / "conftest.py").read_text() == "shipped"
    assert not (work / "deep" / "er" / "conftest.py").exists()
    assert not (work / "hidden_tests").exists()
    assert (work / "src" / "app.py").read_text().startswith("v2")
    assert notes == ["hidden_tests/ (the hidden tests' place: removed)",
                     "deep/er/conftest.py (added by the agent: removed)",
                     "pytest.ini (changed by the agent: restored)",
                     "sub/conftest.py (deleted by the agent: restored)"]


def test_an_untouched_workspace_needs_no_reset(tmp_path):
    files = {"pytest.ini": "[pytest]\n", "conftest.py": "shipped"}
    original = _tree(tmp_path / "original", files)
    hidden = _tree(tmp_path / "hidden", {"hidden_tests/test_x.py": "hidden"})
    work = _tree(tmp_path / "work", files)
    assert reset_grader_files(work, original, hidden, ["conftest.py", "pytest.ini"]) == []
