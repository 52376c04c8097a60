"""The subject side: imports and calls the agent's code on the judge's behalf, answers as data.

Runs in its own sandbox, as its own user, with the agent's workspace as its only view of the
project. It never sees the hidden tests or the report directory. Whatever the agent's code
does to this process can change only the answers it sends, which the judge then checks.
Usage: python3 -I -B subject_server.py CHANNEL WORKSPACE (CHANNEL: fd:N or unix:PATH)
"""

import importlib
import io
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir out
import codec  # noqa: E402

BUILTINS = {"len": len, "list": list, "str": str, "repr": repr, "bool": bool, "sorted": sorted,
            "dict": dict, "tuple": tuple, "set": set, "type_name": lambda o: type(o).__name__,
            "iter_list": lambda o: list(o)}


class Server:
    def __init__(self, channel):
        self.channel = channel
        self.objects = {}

    def handle(self, obj) -> int:
        self.objects[len(self.objects) + 1] = obj
        return len(self.objects)

    def value(self, data):
        return codec.decode(data, lambda hid, _type: self.objects[hid], path=pathlib.Path)

    def answer(self, result) -> dict:
        if isinstance(result, HandleOnly):
            return {"ok": {"$h": self.handle(result.obj), "type": type(result.obj).__name__}}
        return {"ok": codec.encode(result, self.handle)}

    def serve(self) -> None:
        self.send({"hello": "evalq-subject/1", "pid": os.getpid()})
        for line in self.channel:
            request = codec.loads(line)
            out, err = io.StringIO(), io.StringIO()
            saved = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = out, err
            try:
                reply = self.answer(self.perform(request))
            except BaseException as exc:  # noqa: BLE001 - every failure goes back as data
                reply = {"error": {"type": type(exc).__name__, "message": str(exc),
                                   "mro": [c.__name__ for c in type(exc).__mro__]}}
            finally:
                sys.stdout, sys.stderr = saved
            reply.update(id=request.get("id"), out=out.getvalue(), err=err.getvalue())
            self.send(reply)

    def send(self, message) -> None:
        self.channel.write(codec.dumps(message))
        self.channel.flush()

    def perform(self, request):
        op = request["op"]
        if op == "import":
            return importlib.import_module(request["module"])
        if op == "run":
            return self.run(request)
        target = self.objects[request["target"]]
        if op == "getattr":
            return getattr(target, request["name"])
        if op == "ref":
            return HandleOnly(getattr(target, request["name"]))
        if op == "setattr":
            return setattr(target, request["name"], self.value(request["value"]))
        args = self.value(request.get("args", []))
        kwargs = {k: self.value(v) for k, v in request.get("kwargs", {}).items()}
        if op == "call":
            return target(*args, **kwargs)
        if op == "callattr":
            return getattr(target, request["name"])(*args, **kwargs)
        if op == "builtin":
            return BUILTINS[request["name"]](target)
        raise ValueError(f"unknown operation {op!r}")

    @staticmethod
    def run(request) -> dict:
        """A command in the workspace (a built program, make): its exit code and output."""
        stdin = request.get("stdin")
        try:
            done = subprocess.run(request["argv"], input=None if stdin is None else
                                  stdin.encode("utf-8", "surrogateescape"), capture_output=True,
                                  timeout=request.get("timeout"), cwd=request.get("cwd") or None)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"{request['argv'][0]} ran over {exc.timeout}s") from None
        return {"exit_code": done.returncode,
                "stdout": done.stdout.decode("utf-8", "replace"),
                "stderr": done.stderr.decode("utf-8", "replace")}


class HandleOnly:
    """Marks a value the judge asked to keep in the subject (to call its methods)."""

    def __init__(self, obj):
        self.obj = obj


def main() -> None:
    workspace = sys.argv[2]
    channel = codec.connect(sys.argv[1]).makefile("rwb")
    sys.path = [workspace] + sys.path[1:]
    os.chdir(workspace)
    Server(channel).serve()


if __name__ == "__main__":
    main()
