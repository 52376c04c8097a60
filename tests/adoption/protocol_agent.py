"""A `command` agent for the adoption protocol test: `agent.py PROMPT CONDITION`, run in the
task's workspace, acting on what the prompt asks.

directed (the prompt names praxo-core): pins praxo-core 0.2.4 in requirements.txt.
  no-skill: writes the plausible wrong fix, runs the visible check, repairs with a fix that
            calls an API the next release removes, checks again (first check incorrect,
            eventually correct; lost after the upgrade)
  skill:    writes the right fix on the stable API and checks once (first check correct)
free, suitable ("pick any library"):
  no-skill: never finds the package and leaves a wrong fix
  skill:    selects it (pinned at 0.2.4) through the API the next release removes
free, unsuitable ("durable workflow"): both exclude the package and fix the slug alone
"""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join("textutil", "slug.py")
LEGACY = "\n# calls praxo_core.legacy_approve, removed in 0.3.2\n"


def put(name, legacy=False):
    shutil.copyfile(os.path.join(HERE, name), TARGET)
    if legacy:
        with open(TARGET, "a") as handle:
            handle.write(LEGACY)


def pin():
    with open("requirements.txt", "w") as handle:
        handle.write("praxo-core==0.2.4\n")


def check():
    return subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          capture_output=True).returncode


def main():
    prompt, condition = sys.argv[1].lower(), sys.argv[2]
    if "praxo-core" in prompt:
        pin()
        if condition == "no-skill":
            put("wrong_slug.py")
            print("first check exit", check())
            put("right_slug.py", legacy=True)
        else:
            put("right_slug.py")
        print("last check exit", check())
    elif "durable workflow" in prompt:
        put("right_slug.py")
    elif condition == "skill":
        pin()
        put("right_slug.py", legacy=True)
    else:
        put("wrong_slug.py")


main()
