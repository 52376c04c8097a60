"""The judge's start-up: pytest from its installed location, with no path into the workspace.

Started as `python3 -I -B boot.py HIDDEN_DIR JUNIT_PATH ARGS...`: -I ignores PYTHON* variables,
the user's site directory and the current directory; this script then sets sys.path to the
interpreter's own library, its site packages and the judge helpers, nothing else. The agent's
workspace is not mounted in the judge's sandbox at all, so nothing in it can shadow pytest or
a module pytest imports.
"""

import os
import site
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))


def explicit_path() -> list:
    paths = [os.path.dirname(HERE)]  # the directory holding the evalq_judge package
    config = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib"):
        paths.append(config[key])
    paths.append(os.path.join(config["platstdlib"], "lib-dynload"))
    paths += site.getsitepackages()
    paths += [p for p in sys.path if p.endswith(".zip")]
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p) or p.endswith(".zip")]


def main() -> int:
    hidden, junit, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.path[:] = explicit_path()
    os.chdir(hidden)
    import pytest

    return int(pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", hidden,
                            f"--junitxml={junit}", *args]))


if __name__ == "__main__":
    sys.exit(main())
