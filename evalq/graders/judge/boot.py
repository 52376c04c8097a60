"""The judge's start-up: pytest from its installed location, with no path into the workspace.

Started as `python3 -I -B boot.py HIDDEN_DIR JUNIT_PATH ARGS...`: -I ignores PYTHON* variables,
the user's site directory and the current directory; this script then sets sys.path to the
interpreter's own library, its site packages and the judge helpers, nothing else. The agent's
workspace is not mounted in the judge's sandbox at all, so nothing in it can shadow pytest or
a module pytest imports.

Its first act is to write the file named by EVALQ_JUDGE_STARTED (in its report directory): the
grader takes a judge run without it for one that never started (helpers not found, boot
unreadable), a grading_failure, never a verdict on the agent.
"""

import importlib
import os
import site
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
#: Variables by which pytest takes itself to run on CI, where it neither truncates assertion
#: explanations nor skips its full diffs: the judge must not, whatever the grader's environment.
CI_VARIABLES = ("CI", "BUILD_NUMBER")


def explicit_path() -> list:
    paths = [os.path.dirname(HERE)]  # the directory holding the evalq_judge package
    config = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib"):
        paths.append(config[key])
    paths.append(os.path.join(config["platstdlib"], "lib-dynload"))
    paths += site.getsitepackages()
    paths += [p for p in sys.path if p.endswith(".zip")]
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p) or p.endswith(".zip")]


class CappedOutput:
    """The judge's stdout, stopped after `limit` bytes with one line saying how much was cut:
    the grader's output limit is for runaway graders, not for what a subject answered."""

    def __init__(self, stream, limit: int):
        self.stream, self.left, self.cut = stream, limit, 0

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "replace")
        if len(data) <= self.left:
            self.stream.write(text)
        else:
            if self.left > 0:
                self.stream.write(data[:self.left].decode("utf-8", "ignore"))
            self.cut += len(data) - max(self.left, 0)
        self.left -= len(data)
        return len(text)

    def close_note(self) -> None:
        if self.cut:
            self.stream.write(f"\n[judge output: {self.cut} bytes cut]\n")
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def mark_started() -> None:
    """Tell the grader that this script runs (an error here ends the judge unmarked)."""
    mark = os.environ.get("EVALQ_JUDGE_STARTED")
    if mark:
        fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.close(fd)


def main() -> int:
    mark_started()
    hidden, junit, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    sys.path[:] = explicit_path()
    os.chdir(hidden)
    limit = os.environ.get("EVALQ_JUDGE_OUTPUT_LIMIT")
    out = sys.stdout = CappedOutput(sys.stdout, int(limit)) if limit else sys.stdout
    for name in CI_VARIABLES:
        os.environ.pop(name, None)
    import pytest

    # this package's own bounds (bounds.py), imported as this folder is named in the judge
    bounds = importlib.import_module(f"{os.path.basename(HERE)}.bounds")
    try:
        return int(pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", hidden,
                                f"--junitxml={junit}", *args],
                               plugins=[bounds.BoundedReports(pytest),
                                        bounds.BoundedCompare(pytest)]))
    finally:
        if isinstance(out, CappedOutput):
            out.close_note()


if __name__ == "__main__":
    sys.exit(main())
