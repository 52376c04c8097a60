"""The visible-check shim: what the agent's PATH finds first under the check's program name.

`python3 -I -S shim.py FOLDER PROGRAM ARGS...`, from the wrapper FOLDER/bin/PROGRAM. It tells
the worker, over the unix socket FOLDER/channel.sock, which arguments it was given, waits for
the worker's answer (the worker snapshots the workspace at the first run of the declared
check before it answers), then execs the real PROGRAM: the first one on PATH outside
FOLDER/bin. The worker alone decides whether the run was the check and keeps the count; this
process records nothing, so killing it or talking to the socket directly changes no record
already made. With no worker to answer (the socket gone), the program runs all the same.

Only builtin modules: it runs before every run of the program, on the toolchain's python3
with no site-packages. Exit 127: the real program was not found.
"""

import os
import sys

import _socket

#: what each message starts with; the worker ignores any other
GREETING = b"evalq visible check 1\0"
#: the most one message carries (longer argument lists are cut; the worker judges what came)
MAX_MESSAGE = 65536


def tell_worker(folder: str, args: list) -> None:
    """Send the arguments and wait for the answer; any failure means run unobserved."""
    channel = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    try:
        channel.connect(os.path.join(folder, "channel.sock"))
        message = GREETING + b"\0".join(os.fsencode(a) for a in args)
        channel.send(message[:MAX_MESSAGE])
        channel.recv(64)  # blocks until the worker has taken its snapshot, if this is the first
    except OSError:
        pass
    finally:
        channel.close()


def real_program(folder: str, program: str):
    """The first executable PROGRAM on PATH that is not this shim's wrapper."""
    mine = os.path.join(folder, "bin")
    for entry in os.environ.get("PATH", "").split(":"):
        if not entry or os.path.normpath(entry) == os.path.normpath(mine):
            continue
        candidate = os.path.join(entry, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def main(args: list) -> int:
    if len(args) < 2:
        os.write(2, b"evalq visible-check shim: FOLDER PROGRAM ARGS...\n")
        return 2
    folder, program, rest = args[0], args[1], args[2:]
    tell_worker(folder, rest)
    found = real_program(folder, program)
    if found is None:
        os.write(2, f"{program}: command not found\n".encode())
        return 127
    try:
        os.execv(found, [found, *rest])  # an absolute argv[0]: sys.executable is never the shim
    except OSError as exc:
        os.write(2, f"{program}: cannot start {found}: {exc}\n".encode())
    return 127


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
