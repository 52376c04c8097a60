"""`evalq fixtures new`: a complete fixture to edit, with every part in place.

The template is a small but real task (add `clamp`, whose edge case is bounds given the
wrong way round), so a new fixture freezes and passes `evalq fixtures check` before its
author changes anything; the author then replaces the task and keeps the shape.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

from evalq.errors import UserError
from evalq.fixtures import MANIFEST, Fixture, freeze_fixture

TOOLCHAINS = ("python", "node", "make")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

_TOML = '''\
# A fixture: one task for an agent, graded by hidden tests (see `evalq fixtures --help`).
# After a change: `evalq fixtures freeze {dir}` (it records the digests at the top of
# this file), then `evalq fixtures check {dir}` (the grader self-check).
id = "{id}"
title = "add clamp() (template: replace with your task)"
# bugfix | feature | refactor | multi-file | ...
kind = "feature"
toolchain = "{toolchain}"
# The grader image for this toolchain (see graders/ at the top of the repository).
image = "{image}"
prompt = """
{prompt}
"""

[tool_policy]
allow = ["read", "edit", "bash"]
network = false

[limits]
wall_seconds = 600
max_steps = 30
max_cost_usd = 1.0

# How the hidden tests run, in a sandbox whose working directory is a fresh copy of the
# agent's final workspace with hidden/ overlaid on it. {{report_dir}} is a writable
# directory for machine-readable reports: junit reads {{report_dir}}/junit.xml, tap reads
# the command's standard output.
[grade]
command = {command}
report = "{report}"
timeout_seconds = 60
memory_mb = {memory_mb}
pids = {pids}
# Files reset to this fixture's own before grading, so an agent cannot plant or edit them to
# steer the test runner. Unset: the toolchain's defaults (for python: conftest.py, pytest.ini,
# pyproject.toml, tox.ini, setup.cfg); a name without "/" matches at any depth.
# protected = ["conftest.py", "pytest.ini", "Makefile"]
'''

_PROMPT = ("Add a function `clamp(value, low, high)` {where} that returns value limited to "
           "the range from low to high. If low is greater than high, the bounds were given "
           "the wrong way round: swap them. {run}")

# ------------------------------------------------------------------ python
#: A per-test time limit, so an endless loop is `incorrect` (with evidence), not a hung grader.
_PY_CONFTEST = '''\
"""Per-test time limit for the hidden tests (pure stdlib: the grader image has no plugins).

A solution that loops forever fails the test that hit the limit, and every later test fails
at once, so the run ends well inside the grader's own time limit and the attempt is graded
`incorrect` with evidence instead of hanging the grader.
"""

import signal

import pytest

LIMIT_SECONDS = 5
_hung = []


class TimeLimitExceeded(Exception):
    pass


def _expire(signum, frame):
    raise TimeLimitExceeded(f"test ran longer than {LIMIT_SECONDS} s (endless loop?)")


def pytest_runtest_setup(item):
    if _hung:
        pytest.fail(f"not run: an earlier test ran over its time limit ({_hung[0]})",
                    pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.alarm(LIMIT_SECONDS)
    try:
        outcome = yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if outcome.excinfo is not None and outcome.excinfo[0] is TimeLimitExceeded:
        _hung.append(item.nodeid)
'''

_PY = {
    "workspace/README.md": "# mathkit\n\nSmall numeric helpers.\n\n    python3 -m pytest -q\n",
    "workspace/pyproject.toml": ('[project]\nname = "mathkit"\nversion = "0.1.0"\n\n'
                                 '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'),
    "workspace/mathkit/__init__.py": '"""Small numeric helpers."""\n',
    "workspace/mathkit/ranges.py": '''\
"""Helpers for numeric ranges."""


def span(low, high):
    """The distance between two bounds, whichever comes first."""
    return abs(high - low)
''',
    "workspace/tests/test_ranges.py": '''\
from mathkit.ranges import clamp, span


def test_span():
    assert span(3, 1) == 2


def test_clamp_above():
    assert clamp(5, 0, 3) == 3
''',
    "hidden/hidden_tests/conftest.py": _PY_CONFTEST,
    "hidden/hidden_tests/test_ranges_hidden.py": '''\
import pytest

from mathkit.ranges import clamp, span


def test_span():
    assert span(3, 1) == 2


@pytest.mark.parametrize("value, expected", [(5, 3), (-2, 0), (2, 2), (0, 0), (3, 3)])
def test_clamp(value, expected):
    assert clamp(value, 0, 3) == expected


def test_clamp_swapped_bounds():
    assert clamp(5, 3, 0) == 3
    assert clamp(-2, 3, 0) == 0
''',
    "solutions/correct/mathkit/ranges.py": '''\
"""Helpers for numeric ranges."""


def span(low, high):
    """The distance between two bounds, whichever comes first."""
    return abs(high - low)


def clamp(value, low, high):
    """value limited to [low, high]; bounds given the wrong way round are swapped."""
    if low > high:
        low, high = high, low
    return max(low, min(value, high))
''',
    "solutions/incorrect/mathkit/ranges.py": '''\
"""Helpers for numeric ranges."""


def span(low, high):
    """The distance between two bounds, whichever comes first."""
    return abs(high - low)


def clamp(value, low, high):
    """value limited to [low, high]."""
    # Plausible but wrong: bounds given the wrong way round are not swapped.
    return max(low, min(value, high))
''',
}

# ------------------------------------------------------------------ node
_NODE_LIB = '''\
'use strict';

/** The distance between two bounds, whichever comes first. */
function span(low, high) {
  return Math.abs(high - low);
}
'''
_NODE = {
    "workspace/README.md": "# mathkit\n\nSmall numeric helpers.\n\n    node --test test/\n",
    "workspace/package.json": ('{\n  "name": "mathkit",\n  "version": "0.1.0",\n'
                               '  "main": "lib/ranges.js",\n'
                               '  "scripts": { "test": "node --test test/" },\n'
                               '  "license": "MIT"\n}\n'),
    "workspace/lib/ranges.js": _NODE_LIB + "\nmodule.exports = { span };\n",
    "workspace/test/ranges.test.js": '''\
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { clamp, span } = require('../lib/ranges');

test('span', () => {
  assert.equal(span(3, 1), 2);
});

test('clamp above the range', () => {
  assert.equal(clamp(5, 0, 3), 3);
});
''',
    "hidden/hidden_tests/ranges.hidden.test.js": '''\
'use strict';

// Top-level test() calls only: each is one criterion in the TAP report.
const test = require('node:test');
const assert = require('node:assert/strict');
const { clamp, span } = require('../lib/ranges');

test('span', () => {
  assert.equal(span(3, 1), 2);
});

test('clamp within, below and above the range', () => {
  assert.equal(clamp(5, 0, 3), 3);
  assert.equal(clamp(-2, 0, 3), 0);
  assert.equal(clamp(2, 0, 3), 2);
});

test('clamp with swapped bounds', () => {
  assert.equal(clamp(5, 3, 0), 3);
  assert.equal(clamp(-2, 3, 0), 0);
});
''',
    "solutions/correct/lib/ranges.js": _NODE_LIB + '''
/** value limited to [low, high]; bounds given the wrong way round are swapped. */
function clamp(value, low, high) {
  if (low > high) [low, high] = [high, low];
  return Math.max(low, Math.min(value, high));
}

module.exports = { clamp, span };
''',
    "solutions/incorrect/lib/ranges.js": _NODE_LIB + '''
/** value limited to [low, high]. Plausible but wrong: swapped bounds are not handled. */
function clamp(value, low, high) {
  return Math.max(low, Math.min(value, high));
}

module.exports = { clamp, span };
''',
}

# ------------------------------------------------------------------ make (C)
_C_TAP = '''\
/* Minimal TAP output for C tests: one "ok N - name" or "not ok N - name" per check. */
#ifndef TAP_H
#define TAP_H
#include <stdio.h>

static int tap_count, tap_failed;

#define TAP_CHECK(name, cond)                                                  \\
    do {                                                                       \\
        tap_count++;                                                           \\
        if (cond) {                                                            \\
            printf("ok %d - %s\\n", tap_count, name);                          \\
        } else {                                                               \\
            tap_failed++;                                                      \\
            printf("not ok %d - %s\\n  # %s:%d: %s\\n", tap_count, name,       \\
                   __FILE__, __LINE__, #cond);                                 \\
        }                                                                      \\
    } while (0)

#define TAP_DONE() (printf("1..%d\\n", tap_count), tap_failed ? 1 : 0)
#endif
'''
_C_SRC = '''\
#include "ranges.h"

int span(int low, int high)
{
    return high > low ? high - low : low - high;
}
'''
_C_HEADER = '''\
#ifndef RANGES_H
#define RANGES_H

/* The distance between two bounds, whichever comes first. */
int span(int low, int high);
{extra}
#endif
'''
_C_CLAMP_DECL = '''
/* value limited to [low, high]; bounds given the wrong way round are swapped. */
int clamp(int value, int low, int high);
'''
_MAKEFILE = '''\
CC = gcc
CFLAGS = -std=c99 -Wall -Wextra -O2
BUILD = build

all: $(BUILD)/ranges.o

$(BUILD):
\tmkdir -p $(BUILD)

$(BUILD)/ranges.o: src/ranges.c src/ranges.h | $(BUILD)
\t$(CC) $(CFLAGS) -c -o $@ src/ranges.c

$(BUILD)/test_ranges: tests/test_ranges.c tests/tap.h $(BUILD)/ranges.o
\t$(CC) $(CFLAGS) -Isrc -o $@ tests/test_ranges.c $(BUILD)/ranges.o

check: $(BUILD)/test_ranges
\t./$(BUILD)/test_ranges

clean:
\trm -rf $(BUILD)

.PHONY: all check clean
'''
_MAKE = {
    "workspace/README.md": "# mathkit\n\nSmall numeric helpers in C99.\n\n    make check\n",
    "workspace/Makefile": _MAKEFILE,
    "workspace/src/ranges.h": _C_HEADER.format(extra=""),
    "workspace/src/ranges.c": _C_SRC,
    "workspace/tests/tap.h": _C_TAP,
    "workspace/tests/test_ranges.c": '''\
#include "tap.h"
#include "ranges.h"

int main(void)
{
    TAP_CHECK("span", span(3, 1) == 2);
    TAP_CHECK("clamp above the range", clamp(5, 0, 3) == 3);
    return TAP_DONE();
}
''',
    "hidden/hidden_tests/tap.h": _C_TAP,
    "hidden/hidden_tests/test_hidden.c": '''\
#include "tap.h"
#include "ranges.h"

int main(void)
{
    TAP_CHECK("span", span(3, 1) == 2);
    TAP_CHECK("clamp within, below and above the range",
              clamp(5, 0, 3) == 3 && clamp(-2, 0, 3) == 0 && clamp(2, 0, 3) == 2);
    TAP_CHECK("clamp with swapped bounds", clamp(5, 3, 0) == 3 && clamp(-2, 3, 0) == 0);
    return TAP_DONE();
}
''',
    "hidden/hidden_tests/run.sh": '''\
#!/bin/sh
# Build with the project's Makefile, then the hidden test driver; print TAP on stdout.
cd "$(dirname "$0")/.." || exit 2
rm -rf build
mkdir -p build/tmp
TMPDIR="$PWD/build/tmp"
export TMPDIR
if ! make -s all >build/hidden-build.log 2>&1 ||
   ! gcc -std=c99 -Wall -Isrc -Ihidden_tests -o build/hidden_tests \\
       hidden_tests/test_hidden.c build/ranges.o >>build/hidden-build.log 2>&1; then
    echo "not ok 1 - build"
    sed 's/^/  # /' build/hidden-build.log | head -n 40
    echo "1..1"
    exit 1
fi
# a time limit, so an endless loop fails the run instead of hanging the grader
exec timeout 10 ./build/hidden_tests
''',
    "solutions/correct/src/ranges.h": _C_HEADER.format(extra=_C_CLAMP_DECL),
    "solutions/correct/src/ranges.c": _C_SRC + '''
int clamp(int value, int low, int high)
{
    if (low > high) {
        int t = low;
        low = high;
        high = t;
    }
    return value < low ? low : value > high ? high : value;
}
''',
    "solutions/incorrect/src/ranges.h": _C_HEADER.format(extra=_C_CLAMP_DECL),
    "solutions/incorrect/src/ranges.c": _C_SRC + '''
/* Plausible but wrong: bounds given the wrong way round are not swapped. */
int clamp(int value, int low, int high)
{
    return value < low ? low : value > high ? high : value;
}
''',
}

_SETTINGS = {
    "python": dict(
        files=_PY, image="evalq-grader-python:local", report="junit", memory_mb=256, pids=64,
        command=["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "--junitxml={report_dir}/junit.xml", "hidden_tests"],
        where="to mathkit/ranges.py", run="Run the tests with `python3 -m pytest -q`."),
    "node": dict(
        files=_NODE, image="evalq-grader-node:local", report="tap", memory_mb=512, pids=128,
        command=["node", "--test", "--test-reporter=tap", "hidden_tests/"],
        where="to lib/ranges.js and export it", run="Run the tests with `node --test test/`."),
    "make": dict(
        files=_MAKE, image="evalq-grader-make:local", report="tap", memory_mb=384, pids=128,
        command=["sh", "hidden_tests/run.sh"],
        where="(`int clamp(int value, int low, int high)`, declared in src/ranges.h) to "
              "src/ranges.c",
        run="Run the tests with `make check`."),
}


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join('"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'
                           for item in items) + "]"


def render_template(fixture_id: str, toolchain: str, display_dir: str) -> dict[str, str]:
    """Every file of a new fixture, by path relative to the fixture directory."""
    settings = _SETTINGS[toolchain]
    prompt = textwrap.fill(_PROMPT.format(where=settings["where"], run=settings["run"]), 88)
    manifest = _TOML.format(id=fixture_id, toolchain=toolchain, image=settings["image"],
                            prompt=prompt, command=_toml_list(settings["command"]),
                            report=settings["report"], memory_mb=settings["memory_mb"],
                            pids=settings["pids"], dir=display_dir)
    return {MANIFEST: manifest, **settings["files"]}


def create_fixture(name: str, parent: str | Path = "fixtures", toolchain: str = "python",
                   ) -> Fixture:
    """Write a new fixture directory `parent/name` from the template and freeze it."""
    if not _ID.match(name):
        raise UserError(f"'{name}' is not a valid fixture id", field="NAME",
                        fix="use lower-case letters, digits, '.', '_' and '-', starting with "
                            "a letter or digit")
    if toolchain not in TOOLCHAINS:
        raise UserError(f"unknown toolchain '{toolchain}'", field="toolchain",
                        fix=f"use one of {', '.join(TOOLCHAINS)}")
    target = Path(parent) / name
    if target.exists():
        raise UserError("already exists", file=target,
                        fix="choose another name or remove the directory")
    files = render_template(name, toolchain, str(target))
    try:
        for rel, text in files.items():
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            if path.suffix == ".sh":
                path.chmod(0o755)
        return freeze_fixture(target)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
