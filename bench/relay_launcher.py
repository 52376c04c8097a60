"""The relay launcher the door's prelude replaced, kept only so the bench can measure both.

It was pid 1 of an agent sandbox with a door: `python3 -I -S relay_launcher.py DOOR_SOCKET
PORT STDIN_FILE -- ARGV...`. It listened on 127.0.0.1:PORT and relayed each connection, with a
thread each way, to the door's unix socket, then forked the agent and reaped until it exited:
a Python process of about 9 MiB for the whole run of every sandbox. Only builtin modules.
"""

import os
import sys

import _signal
import _socket
import _thread

BUFFER = 65536


def _pump(src, dst, done=None) -> None:
    try:
        while True:
            data = src.recv(BUFFER)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(_socket.SHUT_WR)
        except OSError:
            pass
        if done is not None:
            done.release()


def relay(client, upstream) -> None:
    """Copy bytes both ways until each side has closed."""
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(_pump, (upstream, client, done))
    _pump(client, upstream)
    done.acquire()
    client.close()
    upstream.close()


def _to_door(fd: int, door: str) -> None:
    client = _socket.socket(fileno=fd)
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(door)
    except OSError:
        client.close()
        upstream.close()
        return
    relay(client, upstream)


def _serve(listener, door: str) -> None:
    while True:
        fd, _ = listener._accept()
        _thread.start_new_thread(_to_door, (fd, door))


def open_door(door: str, port: int) -> None:
    """Listen on 127.0.0.1:port (before the agent starts) and relay to the door's socket."""
    listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    _thread.start_new_thread(_serve, (listener, door))


def _status(code: int) -> int:
    if os.WIFEXITED(code):
        return os.WEXITSTATUS(code)
    return 128 + os.WTERMSIG(code) if os.WIFSIGNALED(code) else 1


def main(args: list) -> int:
    door, port, stdin, separator, argv = args[0], int(args[1]), args[2], args[3], args[4:]
    if separator != "--" or not argv:
        os.write(2, b"evalq sandbox launcher: DOOR PORT STDIN -- ARGV...\n")
        return 2
    if door != "-":
        open_door(door, port)
    # pid 1 gets no default signal actions: a TERM from outside ends everything
    _signal.signal(_signal.SIGTERM, lambda *_: os.kill(-1, _signal.SIGKILL))
    agent = os.fork()
    if agent == 0:
        try:
            if stdin != "-":
                os.dup2(os.open(stdin, os.O_RDONLY), 0)
            os.execv(argv[0], argv)
        except OSError as exc:
            os.write(2, f"evalq sandbox: cannot start {argv[0]}: {exc}\n".encode())
        os._exit(127)
    while True:  # reap every orphan re-parented to us until the agent itself is gone
        try:
            pid, code = os.wait()
        except ChildProcessError:
            return 1
        if pid == agent:
            return _status(code)


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
