"""Fixture digests and contract limits."""

from __future__ import annotations

import os

import pytest

from evalq.digest import tree_digest
from evalq.errors import UserError
from evalq.fixtures.fixture import MAX_CHARACTERS, freeze_fixture, load_fixture
from conftest import copy_fixture, pad_with_files


def test_one_changed_byte_changes_the_digest(tmp_path):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path)
    before = tree_digest(fixture)
    target = fixture / "workspace" / "textutil" / "slug.py"
    data = bytearray(target.read_bytes())
    data[-2] ^= 0x01
    target.write_bytes(bytes(data))
    assert tree_digest(fixture) != before


def test_executable_bit_is_part_of_the_digest(tmp_path):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path)
    before = tree_digest(fixture)
    os.chmod(fixture / "workspace" / "README.md", 0o755)
    assert tree_digest(fixture) != before


def test_digest_ignores_timestamps_and_is_stable(tmp_path):
    fixture = copy_fixture("py-slugify-bugfix", tmp_path)
    before = tree_digest(fixture)
    os.utime(fixture / "workspace" / "README.md", (1, 1))
    assert tree_digest(fixture) == before


def test_tampered_fixture_is_refused_with_one_line(tmp_path):
    fixture = copy_fixture("py-inventory-feature", tmp_path)
    load_fixture(fixture)  # loads while intact
    (fixture / "hidden" / "hidden_tests" / "test_inventory_hidden.py").write_text("x = 1\n")
    with pytest.raises(UserError) as info:
        load_fixture(fixture)
    line = info.value.one_line()
    assert "no longer match the recorded digest" in line
    assert "fixture.toml" in line and "digest" in line and "\n" not in line


def test_unfrozen_fixture_is_refused(tmp_path):
    fixture = copy_fixture("py-inventory-feature", tmp_path)
    text = (fixture / "fixture.toml").read_text().splitlines()
    (fixture / "fixture.toml").write_text("\n".join(l for l in text if "digest" not in l))
    with pytest.raises(UserError, match="no recorded digest"):
        load_fixture(fixture)


def test_sixty_five_files_are_refused(tmp_path):
    fixture = copy_fixture("py-inventory-feature", tmp_path)
    pad_with_files(fixture, 65)
    with pytest.raises(UserError) as info:
        freeze_fixture(fixture)
    assert "65 files, over the limit of 64" in info.value.one_line()


def test_sixty_four_files_are_accepted(tmp_path):
    fixture = copy_fixture("py-inventory-feature", tmp_path)
    pad_with_files(fixture, 64)
    assert freeze_fixture(fixture).id == "py-inventory-feature"


def _total_characters(root):
    return sum(len(p.read_text()) for p in root.rglob("*") if p.is_file())


def test_content_over_the_character_limit_is_refused(tmp_path):
    fixture = copy_fixture("py-inventory-feature", tmp_path)
    freeze_fixture(fixture)
    filler = fixture / "workspace" / "data.txt"
    filler.write_text("")
    filler.write_text("é" * (MAX_CHARACTERS + 1 - _total_characters(fixture)))
    assert _total_characters(fixture) == MAX_CHARACTERS + 1
    with pytest.raises(UserError) as info:
        freeze_fixture(fixture)
    assert f"{MAX_CHARACTERS + 1} characters" in info.value.one_line()


def test_content_at_the_character_limit_is_accepted(tmp_path):
    fixture = copy_fixture("py-inventory-feature", tmp_path)
    freeze_fixture(fixture)
    filler = fixture / "workspace" / "data.txt"
    filler.write_text("")
    # the digest lines at the top of fixture.toml keep their length when re-frozen
    filler.write_text("a" * (MAX_CHARACTERS - _total_characters(fixture)))
    assert freeze_fixture(fixture).id == "py-inventory-feature"


def test_symlink_in_a_fixture_is_refused(tmp_path):
    fixture = copy_fixture("py-inventory-feature", tmp_path)
    os.symlink("/etc/passwd", fixture / "workspace" / "passwd")
    with pytest.raises(UserError, match="symbolic links are not allowed"):
        freeze_fixture(fixture)
