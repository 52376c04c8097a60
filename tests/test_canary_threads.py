"""Canaries are planted from many grading threads at once (`evalq fixtures check` grades in a
thread pool): every planting succeeds and leaves valid test files with its canaries in them."""

from __future__ import annotations

import ast
import random
import shutil
from concurrent.futures import ThreadPoolExecutor

from evalq.graders.canary import plant
from tests.conftest import FIXTURES


def test_canaries_are_planted_from_many_threads_at_once(tmp_path):
    hidden = FIXTURES / "py-inventory-feature" / "hidden"
    copies = []
    for i in range(64):
        copy = tmp_path / f"h{i}"
        shutil.copytree(hidden, copy)
        copies.append(copy)

    def planted(i: int):
        return plant(copies[i], random.Random(i), count=3)

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(planted, range(len(copies))))
    for copy, found in zip(copies, results):
        assert len(found.names) == 3
        text = "\n".join(p.read_text() for p in sorted(copy.rglob("test_*.py")))
        ast.parse(text)
        assert all(f"def {name}(" in text for name in found.names)
