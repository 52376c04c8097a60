"""What runs first in an agent sandbox: it opens the door, sets stdin, then becomes the agent.

`python3 -I -S prelude.py CHANNEL PORT STDIN -- ARGV...`, run with the agent's minimal
environment only. CHANNEL is how the worker hears from this sandbox: `fd:N` (a socket it
inherited, under bubblewrap), the path of a unix socket (under Docker), or "-" (no door).
With one, it listens on 127.0.0.1:PORT in the sandbox's own network namespace, hands that
listening socket to the worker over the channel (SCM_RIGHTS) and waits for the worker's
answer: from then on the worker's model gateway accepts the agent's connections itself, from
its own process, and nothing of evalq's keeps running in the sandbox. It then closes the
listener and the channel (the agent holds neither), opens STDIN ("-": keep fd 0) and execs
ARGV. The sandbox's own init stays pid 1 and ends everything when the agent exits.

Only builtin modules: it runs on the toolchain's python3 with no site-packages, in a few ms,
and its memory is gone at exec. Exit 125: the door did not open; 127: ARGV could not start.
"""

import os
import sys

import _socket

#: what the prelude sends with the listener; the worker refuses any other message
GREETING = b"evalq door listener 1"
#: how long the worker may take to answer before the sandbox gives up on its door
ANSWER_SECONDS = 60.0
BACKLOG = 128


def _channel(spec: str):
    if spec.startswith("fd:"):
        return _socket.socket(fileno=int(spec[3:]))
    channel = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    try:
        channel.connect(spec)
    except OSError:
        channel.close()
        raise
    return channel


def open_door(spec: str, port: int) -> None:
    """Listen on 127.0.0.1:port here and hand the listener to the worker; raise if refused."""
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", port))
        listener.listen(BACKLOG)
        channel = _channel(spec)
        try:
            channel.settimeout(ANSWER_SECONDS)
            fd = listener.fileno().to_bytes(4, sys.byteorder)
            channel.sendmsg([GREETING], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd)])
            answer = channel.recv(256)
        finally:
            channel.close()
    finally:
        listener.close()
    if answer != b"ok":
        raise OSError(f"the worker refused it: {answer.decode(errors='replace') or 'no answer'}")


def main(args: list) -> int:
    if len(args) < 5 or args[3] != "--":
        os.write(2, b"evalq sandbox prelude: CHANNEL PORT STDIN -- ARGV...\n")
        return 2
    spec, port, stdin, argv = args[0], int(args[1]), args[2], args[4:]
    if spec != "-":
        try:
            open_door(spec, port)
        except OSError as exc:
            os.write(2, f"evalq sandbox: cannot open the door: {exc}\n".encode())
            return 125
    try:
        if stdin != "-":
            fd = os.open(stdin, os.O_RDONLY)
            os.dup2(fd, 0)
            os.close(fd)
        os.execv(argv[0], argv)
    except OSError as exc:
        os.write(2, f"evalq sandbox: cannot start {argv[0]}: {exc}\n".encode())
    return 127


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
