"""Small Harbor-format task folders written by the tests: every shape the importer meets."""

from __future__ import annotations

import uuid
from pathlib import Path

BASE = "evalq-grader-python:local"
TOML = """version = "1.0"
[metadata]
category = "programming"
[verifier]
timeout_sec = 60.0
[agent]
timeout_sec = 120.0
[environment]
build_timeout_sec = 120.0
cpus = 1
memory = "512M"
allow_internet = {internet}
{extra}
"""
REWARD_BY_EXIT = """#!/bin/bash
mkdir -p /logs/verifier
cd /app
if {check}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def unique(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:6]}"


def write(folder: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def python_task(root: Path, name: str | None = None, *, base: str = BASE, internet: str = "false",
                extra: str = "", more: dict | None = None) -> Path:
    """add() subtracts; pytest in the verifier; the oracle fixes it with sed."""
    return write(root / (name or unique("py-add")), {
        "task.toml": TOML.format(internet=internet, extra=extra),
        "instruction.md": "Fix add() in /app/calc.py so that it returns the sum.\n",
        "environment/Dockerfile": f"FROM {base}\nUSER 0:0\nWORKDIR /app\nCOPY calc.py /app/calc.py\n",
        "environment/calc.py": "def add(a, b):\n    return a - b\n",
        "tests/test.sh": REWARD_BY_EXIT.format(check="python3 -m pytest -q -p no:cacheprovider /tests/test_calc.py"),
        "tests/test_calc.py": "import sys\nsys.path.insert(0, '/app')\nfrom calc import add\n\n\n"
                              "def test_add():\n    assert add(2, 3) == 5\n",
        "solution/solve.sh": "#!/bin/bash\nsed -i 's/a - b/a + b/' /app/calc.py\n",
        **(more or {})})


def shell_task(root: Path) -> Path:
    """Shell only, starting from an empty WORKDIR: write greeting.txt."""
    return write(root / unique("sh-greet"), {
        "task.toml": TOML.format(internet="false", extra=""),
        "instruction.md": "Write the line `hello harbor` into /app/greeting.txt.\n",
        "environment/Dockerfile": f"FROM {BASE}\nUSER 0:0\nRUN mkdir -p /app\nWORKDIR /app\n",
        "tests/test.sh": REWARD_BY_EXIT.format(check='[ "$(cat /app/greeting.txt)" = "hello harbor" ]'),
        "solution/solve.sh": "#!/bin/bash\necho 'hello harbor' > /app/greeting.txt\n"})


def partial_task(root: Path) -> Path:
    """Reward in reward.json as the share of three words present: partial credit kept. Its
    verifier and oracle are readable by their owner only (a copy made under umask 077)."""
    verifier = """#!/bin/bash
mkdir -p /logs/verifier
python3 - <<'PY'
import json, pathlib
words = ["alpha", "beta", "gamma"]
path = pathlib.Path("/app/words.txt")
have = path.read_text().split() if path.exists() else []
score = sum(w in have for w in words) / len(words)
pathlib.Path("/logs/verifier/reward.json").write_text(json.dumps({"reward": score}))
PY
"""
    folder = write(root / unique("json-words"), {
        "task.toml": TOML.format(internet="false", extra=""),
        "instruction.md": "Put the words alpha, beta and gamma in /app/words.txt.\n",
        "environment/Dockerfile": f"FROM {BASE}\nUSER 0:0\nWORKDIR /app\nCOPY words.txt /app/words.txt\n",
        "environment/words.txt": "alpha\n",
        "tests/test.sh": verifier,
        "solution/solve.sh": "#!/bin/bash\nprintf 'alpha\\nbeta\\ngamma\\n' > /app/words.txt\n"})
    for private in ("tests/test.sh", "solution/solve.sh"):  # only their owner may read them
        (folder / private).chmod(0o600)
    return folder


def node_task(root: Path) -> Path:
    """Node: a CommonJS module whose `double` adds instead of multiplying."""
    return write(root / unique("node-double"), {
        "task.toml": TOML.format(internet="false", extra=""),
        "instruction.md": "Make double() in /app/lib.js return twice its argument.\n",
        "environment/Dockerfile": "FROM evalq-grader-node:local\nUSER 0:0\nWORKDIR /app\n"
                                  "COPY lib.js /app/lib.js\n",
        "environment/lib.js": "exports.double = (n) => n + 2;\n",
        "tests/test.sh": REWARD_BY_EXIT.format(check="node /tests/check.js"),
        "tests/check.js": "const assert = require('assert');\n"
                          "const { double } = require('/app/lib.js');\n"
                          "assert.strictEqual(double(5), 10);\nassert.strictEqual(double(0), 0);\n",
        "solution/solve.sh": "#!/bin/bash\nsed -i 's/n + 2/n * 2/' /app/lib.js\n"})


def multistage_task(root: Path) -> Path:
    """A two-stage Dockerfile (the second FROM an earlier stage), memory as memory_mb, a
    literal verifier variable, and an oracle that deletes a file (the overlay's delete list)."""
    toml = TOML.format(internet="false", extra="").replace('memory = "512M"', "memory_mb = 384")
    toml += '[verifier.env]\nEXPECTED = "ready"\n'
    return write(root / unique("stages"), {
        "task.toml": toml,
        "instruction.md": "Remove /app/BLOCKER and write `ready` into /app/status.\n",
        "environment/Dockerfile": f"FROM {BASE} AS base\nUSER 0:0\nRUN mkdir -p /app\n"
                                  "FROM base\nWORKDIR /app\nRUN echo blocked > /app/BLOCKER && "
                                  "echo waiting > /app/status\n",
        "tests/test.sh": REWARD_BY_EXIT.format(
            check='[ ! -e /app/BLOCKER ] && [ "$(cat /app/status)" = "$EXPECTED" ]'),
        "solution/solve.sh": "#!/bin/bash\nrm /app/BLOCKER\necho ready > /app/status\n"})


def prebuilt_task(root: Path, image: str) -> Path:
    """No Dockerfile: [environment] docker_image names a local image."""
    return write(root / unique("prebuilt"), {
        "task.toml": TOML.format(internet="false", extra=f'docker_image = "{image}"'),
        "instruction.md": "Create /app/done containing `yes`.\n",
        "tests/test.sh": REWARD_BY_EXIT.format(check='[ "$(cat /app/done)" = yes ]'),
        "solution/solve.sh": "#!/bin/bash\necho yes > /app/done\n"})


#: the tool a task's environment installs, and what it prints (nowhere else on the machine)
TOOL, TOOL_OUTPUT = "evalq-task-tool", "carrot-7431"
#: written into the verifier and the oracle only: an agent that finds it has seen them
HIDDEN_MARK = "evalq-hidden-" + "mark-5150"


def tool_task(root: Path) -> Path:
    """Solved only with a tool the environment's Dockerfile puts in /usr/local/bin (the
    worker has no such program): its output goes into /app/answer.txt."""
    return write(root / unique("tool"), {
        "task.toml": TOML.format(internet="false", extra=""),
        "instruction.md": f"Run the program `{TOOL}` and write what it prints into "
                          "/app/answer.txt.\n",
        "environment/Dockerfile": f"FROM {BASE}\nUSER 0:0\n"
                                  f"RUN printf '#!/bin/sh\\necho {TOOL_OUTPUT}\\n' > "
                                  f"/usr/local/bin/{TOOL} && chmod 755 /usr/local/bin/{TOOL}\n"
                                  "WORKDIR /app\nCOPY notes.txt /app/notes.txt\n",
        "environment/notes.txt": "answer.txt goes here\n",
        "tests/test.sh": f"# {HIDDEN_MARK}\n" + REWARD_BY_EXIT.format(
            check=f'[ "$(cat /app/answer.txt)" = "$(/usr/local/bin/{TOOL})" ]'),
        "solution/solve.sh": f"#!/bin/bash\n# {HIDDEN_MARK}\n{TOOL} > /app/answer.txt\n"})
