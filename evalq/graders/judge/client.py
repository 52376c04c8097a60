"""The judge side: stand-ins for the subject's modules and objects; every use is a round trip.

The hidden tests call these stand-ins and compare what comes back in the judge's own process.
A subject that takes longer than `timeout` seconds, or whose process ends, fails the check
that was waiting with the reason (SubjectHung, SubjectGone); the checks after a hang fail at
once, since the subject may still be busy. Exceptions raised in the subject come back typed
by name: a subject ValueError is raised here as a SubjectError that is also a ValueError.
"""

from __future__ import annotations

import builtins
import os
import select
import sys
import time

from . import codec
from . import files as files_module

DEFAULT_TIMEOUT = 10.0
#: The subject sandbox starts at the same time as the judge; its first line may take longer.
HELLO_TIMEOUT = 30.0
#: The grader's deadline (epoch seconds) for all waiting on the subject: past it, every check
#: still waiting fails as hung, so slow or chattering agent code makes the judge finish in time
#: (incorrect) instead of running it into its own time limit (a grading_failure, counted apart).
DEADLINE_ENV = "EVALQ_SUBJECT_DEADLINE"
#: Seconds the grader meant for answers; if the subject's first line leaves less than
#: FAIR_SHARE of them before the deadline, the grader was slow, not the subject, and no
#: deadline applies (the judge's own time limit then decides, a grading_failure).
BUDGET_ENV = "EVALQ_SUBJECT_BUDGET"
FAIR_SHARE = 0.5
#: Values one answer may hold, counted as its commas and brackets before parsing (those inside
#: strings count too, erring on the safe side): JSON of tiny containers takes ~20x its size in
#: memory, twice over once decoded, so a subject could otherwise run the judge out of memory.
MAX_ITEMS = 200_000
#: How much of a subject exception's message, type name and MRO crosses: the message ends up in
#: the judge's output and report, which have their own caps (a grading_failure when passed).
MAX_MESSAGE_CHARS = 2000
MAX_NAME_CHARS = 100
MAX_MRO = 32


class SubjectError(Exception):
    """An exception raised by the subject's code; `type_name` and `mro` are its names there."""

    type_name = "Exception"
    mro: tuple = ()


class SubjectUnavailable(AssertionError):
    """The subject did not answer: the check fails (it says nothing about the grader)."""


class SubjectRefused(TypeError):
    """A request the judge does not send: the subject would answer it with agent code."""


class SubjectHung(SubjectUnavailable):
    pass


class SubjectGone(SubjectUnavailable):
    pass


_error_types: dict = {}


def _error_type(name: str, mro: list) -> type:
    """A judge-side class named like the subject's, deriving from the first builtin in its MRO."""
    base = next((getattr(builtins, n) for n in mro if isinstance(getattr(builtins, n, None), type)
                 and issubclass(getattr(builtins, n), BaseException)
                 and n not in ("BaseException", "object")), Exception)
    if not issubclass(base, Exception):
        base = Exception
    key = (name, base)
    if key not in _error_types:
        _error_types[key] = type(name, (SubjectError, base), {"type_name": name})
    return _error_types[key]


class Output:
    """What the subject printed during the latest call."""

    def __init__(self, out: str = "", err: str = ""):
        self.out, self.err = out, err


class Channel:
    """One connection to one subject process: numbered requests, one answer each."""

    def __init__(self, sock, timeout: float = DEFAULT_TIMEOUT, deadline: float | None = None,
                 budget: float | None = None):
        self.sock = sock
        self.timeout = timeout
        #: monotonic time past which no answer is waited for (None: no grading-wide deadline)
        self.deadline = None  # not for the hello: the subject server is evalq's own
        #: what came after the last full line; appended to in place and searched only where
        #: it is new, so a 16 MB answer arriving in 64 KB chunks costs linear time, not quadratic
        self.buffer = bytearray()
        self.broken: str | None = None
        self.last = Output()
        self.next_id = 0
        try:
            self.hello = self._receive(HELLO_TIMEOUT)
        except SubjectUnavailable as exc:
            _report_broken_channel(str(exc))
            raise
        if deadline is not None and (budget is None or
                                     deadline - time.monotonic() >= FAIR_SHARE * budget):
            self.deadline = deadline

    def request(self, message: dict, timeout: float | None = None):
        if self.broken:
            raise SubjectGone(f"subject unavailable: {self.broken}")
        self.next_id += 1
        message["id"] = self.next_id
        try:
            self.sock.sendall(codec.dumps(message))
        except OSError as exc:
            self.broken = f"subject closed its channel ({exc.strerror or exc})"
            raise SubjectGone(self.broken) from None
        wait = self.timeout if timeout is None else timeout
        ends = time.monotonic() + wait  # one limit for the answer, however many lines come first
        while True:
            reply = self._receive(wait, ends)
            if reply.get("id") == self.next_id:
                break
            if time.monotonic() >= self._limit(ends):  # lines that answer nothing asked
                self._late(wait, ends)
        self.last = Output(str(reply.get("out", "")), str(reply.get("err", "")))
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            mro = [_cut(n, MAX_NAME_CHARS) for n in list(error.get("mro") or [])[:MAX_MRO]]
            cls = _error_type(_cut(error.get("type", "Exception"), MAX_NAME_CHARS), mro)
            exc = cls(_cut(error.get("message", ""), MAX_MESSAGE_CHARS))
            exc.mro = tuple(mro)
            raise exc
        try:
            return codec.decode(reply.get("ok"), self._handle, guard=codec.HashGuard())
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise SubjectError(f"the subject sent an answer that is not data: {exc}") from None

    def _handle(self, hid, type_name):
        return Handle(self, hid, type_name)

    def _receive(self, timeout: float, ends: float | None = None) -> dict:
        ends = time.monotonic() + timeout if ends is None else ends
        searched = 0
        while (end := self.buffer.find(b"\n", searched)) < 0:
            searched = len(self.buffer)
            ready, _, _ = select.select([self.sock], [], [],
                                        max(self._limit(ends) - time.monotonic(), 0))
            if not ready:
                self._late(timeout, ends)
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                self.broken = "the subject process ended"
                raise SubjectGone("subject process ended before answering (crash or exit)")
            self.buffer += chunk
            if len(self.buffer) > codec.MAX_LINE:
                self.broken = "the subject sent an oversized answer"
                raise SubjectGone(self.broken)
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        if line.count(b",") + line.count(b"[") + line.count(b"{") > MAX_ITEMS:
            self.broken = f"the subject sent an answer of over {MAX_ITEMS} values"
            raise SubjectGone(self.broken)
        try:
            reply = codec.loads(line)
            if not isinstance(reply, dict):
                raise ValueError("not an object")
            return reply
        except (ValueError, RecursionError) as exc:
            self.broken = "the subject sent a malformed answer"
            raise SubjectGone(f"{self.broken}: {exc}") from None

    def _limit(self, ends: float) -> float:
        return ends if self.deadline is None else min(ends, self.deadline)

    def _late(self, timeout: float, ends: float):
        """The answer did not come in time: this check fails, and so do all later ones."""
        if self.deadline is not None and self.deadline < ends:
            self.broken = "the subject used up the grading's time for answers"
            raise SubjectHung("subject did not answer before the grading's deadline "
                              "(its answers took the grader's whole time limit)")
        self.broken = f"an earlier call ran over {timeout:g}s"
        raise SubjectHung(f"subject did not answer within {timeout:g}s")

    def encode(self, value):
        def to_handle(obj):
            if isinstance(obj, Handle) and obj._channel is self:
                return obj._id
            raise codec.Unencodable(f"{type(obj).__name__} cannot be sent to the subject")

        return codec.encode(value, to_handle)


class Handle:
    """A subject object the judge can use: attributes, calls, len(), iteration, str()."""

    def __init__(self, channel: Channel, hid: int, type_name: str):
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_id", hid)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._channel.request({"op": "getattr", "target": self._id, "name": name})

    def __setattr__(self, name: str, value) -> None:
        self._channel.request({"op": "setattr", "target": self._id, "name": name,
                               "value": self._channel.encode(value)})

    def __call__(self, *args, **kwargs):
        return self._channel.request(self._call("call", args, kwargs))

    def _call(self, op: str, args, kwargs, **extra) -> dict:
        return {"op": op, "target": self._id, "args": self._channel.encode(list(args)),
                "kwargs": {k: self._channel.encode(v) for k, v in kwargs.items()}, **extra}

    def _builtin(self, name: str):
        return self._channel.request({"op": "builtin", "target": self._id, "name": name})

    def ref(self, name: str) -> "Handle":
        """The attribute as a handle even when it is data (to call a list's methods there)."""
        return self._channel.request({"op": "ref", "target": self._id, "name": name})

    def method(self, name: str, *args, **kwargs):
        """Call a method in one round trip (also dunder methods, e.g. "__eq__")."""
        return self._channel.request(self._call("callattr", args, kwargs, name=name))

    def __len__(self) -> int:
        return self._builtin("len")

    def __iter__(self):
        return iter(self._builtin("iter_list"))

    def __str__(self) -> str:
        return self._builtin("str")

    def __repr__(self) -> str:
        return f"<subject {self._type} #{self._id}>"


def _cut(value, limit: int) -> str:
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit} more characters]"


def _deadline() -> tuple[float | None, float | None]:
    """The grader's deadline for answers (DEADLINE_ENV) on this process's monotonic clock, and
    the seconds it meant for them (BUDGET_ENV)."""
    try:
        at = float(os.environ[DEADLINE_ENV])
    except (KeyError, ValueError):
        return None, None
    try:
        budget = float(os.environ[BUDGET_ENV])
    except (KeyError, ValueError):
        budget = None
    return time.monotonic() + (at - time.time()), budget


def _report_broken_channel(reason: str) -> None:
    """The subject server is evalq's own code and says hello before any agent code loads: if
    it never does, the grader is at fault, and it must grade grading_failure, not incorrect."""
    status = os.environ.get("EVALQ_CHANNEL_STATUS")
    if status:
        with open(status, "w", encoding="utf-8") as out:
            out.write(reason)


def call_timeout(seconds: float) -> None:
    """How long each later call may take before its check fails as hung (default 10 s)."""
    channel().timeout = float(seconds)


_channel: Channel | None = None
_never_connected: str | None = None


def channel() -> Channel:
    """The connection the grader handed to this judge (named in EVALQ_SUBJECT_CHANNEL)."""
    global _channel, _never_connected
    if _never_connected:
        raise SubjectGone(f"subject unavailable: {_never_connected}")
    if _channel is None:
        spec = os.environ.get("EVALQ_SUBJECT_CHANNEL")
        if spec is None:
            raise RuntimeError("no subject channel: run these tests through the evalq grader")
        try:
            deadline, budget = _deadline()
            _channel = Channel(codec.connect(spec), deadline=deadline, budget=budget)
        except OSError as exc:  # the grader's channel is not there: the grader's fault
            _never_connected = f"no channel ({exc})"
            _report_broken_channel(_never_connected)
            raise SubjectGone(f"subject unavailable: {_never_connected}") from None
        except SubjectUnavailable as exc:  # one subject per grading: no retry
            _never_connected = f"it never answered ({exc})"
            raise
    return _channel


#: Node's own modules (require('module').builtinModules, Node 20, but for its "_" internals,
#: refused by their "_" as npm names never start with one; "node:" names too)
NODE_BUILTINS = frozenset(
    "assert async_hooks buffer child_process cluster console constants crypto dgram "
    "diagnostics_channel dns domain events fs http http2 https inspector module net os path "
    "perf_hooks process punycode querystring readline repl stream string_decoder sys timers "
    "tls trace_events tty url util v8 vm wasi worker_threads zlib".split())
KIND_ENV = "EVALQ_SUBJECT_KIND"


def runtime_module(module: str) -> bool:
    """Whether `module` is the language's own (Python's standard library, Node's built-in
    modules) rather than the agent's: in the subject it is whatever the agent's code, loaded
    first, made of it, so no check may rely on it there."""
    if os.environ.get(KIND_ENV) == "node":
        name = module[len("node:"):] if module.startswith("node:") else module
        return (module.startswith(("node:", "_")) or name.split("/")[0] in NODE_BUILTINS)
    return module.split(".")[0] in sys.stdlib_module_names


def load_subject(module: str, timeout: float | None = None) -> Handle:
    """The subject's module `module` (a Python dotted name, or a path for a Node subject).
    The language's own modules are refused: files, folders and source are the judge's to
    handle (tmp_dir, write_text, read_text, set_mtime, source_text, module_source)."""
    if runtime_module(module):
        raise SubjectRefused(
            f"load_subject({module!r}): the subject's {module} is whatever the agent's code "
            "made of it; do this in the judge (evalq_judge's tmp_dir, write_text, read_text, "
            "set_mtime, source_text, module_source, or the judge's own modules)")
    return channel().request({"op": "import", "module": module}, timeout)


def run(argv: list, stdin: str | None = None, timeout: float = DEFAULT_TIMEOUT,
        cwd: str | None = None) -> dict:
    """Run a command in the subject's workspace: {"exit_code", "stdout", "stderr"}."""
    return channel().request({"op": "run", "argv": list(argv), "stdin": stdin,
                              "timeout": timeout, "cwd": cwd}, timeout + 5)


def build(script: str, files: dict | None = None, timeout: float = 60.0) -> dict:
    """Write `files` ({path in a tmp_dir(): text}, written by the judge) and run `sh -c
    script` in the subject's workspace; a failed build fails the check with its output. Send
    only what holds no expected value: the subject may read it."""
    for path, text in (files or {}).items():
        files_module.write_text(path, text)
    done = run(["sh", "-c", script], timeout=timeout)
    assert done["exit_code"] == 0, f"build failed:\n{done['stdout']}{done['stderr']}"[-2000:]
    return done


def output() -> Output:
    """What the subject printed to stdout and stderr during the latest call."""
    return channel().last
