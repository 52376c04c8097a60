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

import os
import site
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
#: A failed check's report text (traceback, assertion explanation, the subject's exception
#: message) is cut to this many characters, head and tail kept: it holds what the subject sent,
#: and the report file and the judge's output have caps past which the grade is a failure.
REPORT_TEXT_CHARS = 4000


def explicit_path() -> list:
    paths = [os.path.dirname(HERE)]  # the directory holding the evalq_judge package
    config = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib"):
        paths.append(config[key])
    paths.append(os.path.join(config["platstdlib"], "lib-dynload"))
    paths += site.getsitepackages()
    paths += [p for p in sys.path if p.endswith(".zip")]
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p) or p.endswith(".zip")]


def cut(text: str, limit: int = REPORT_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


class BoundedReports:
    """A pytest plugin that cuts each failed check's report text (see REPORT_TEXT_CHARS)."""

    def __init__(self, pytest):
        self.pytest_runtest_makereport = pytest.hookimpl(hookwrapper=True)(self._makereport)

    @staticmethod
    def _makereport(item, call):
        outcome = yield
        report = outcome.get_result()
        if report.longrepr is not None and not isinstance(report.longrepr, tuple):
            text = str(report.longrepr)
            if len(text) > REPORT_TEXT_CHARS:
                report.longrepr = cut(text)


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
    import pytest

    try:
        return int(pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", hidden,
                                f"--junitxml={junit}", *args],
                               plugins=[BoundedReports(pytest)]))
    finally:
        if isinstance(out, CappedOutput):
            out.close_note()


if __name__ == "__main__":
    sys.exit(main())
