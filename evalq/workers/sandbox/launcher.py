"""pid 1 of an agent sandbox: opens the model door, starts the agent, reaps, and ends it all.

Run as `python3 -I -S launcher.py CONFIG_JSON` with the agent's minimal environment only, so
/proc/1/environ inside shows nothing of the worker. Standard library only (it runs on the
sandbox's own python3, with no site-packages). When the agent exits, this process exits with
its status; the kernel then kills every process left in the pid namespace, `setsid` or not.

CONFIG_JSON: {"argv": [...], "cwd": "...", "door": "/run/evalq/door.sock" | null, "port": N,
              "stdin": a file to read as the agent's standard input | null}
"""

import json
import os
import signal
import socket
import sys
import threading


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until each side has closed (also used by evalq.workers.door)."""
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _to_door(client: socket.socket, door: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(door)
    except OSError:
        client.close()
        upstream.close()
        return
    relay(client, upstream)


def open_door(door: str, port: int) -> None:
    """Listen on 127.0.0.1:port and relay each connection to the door's unix socket."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)

    def serve() -> None:
        while True:
            client, _ = listener.accept()
            threading.Thread(target=_to_door, args=(client, door), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def _status(code: int) -> int:
    if os.WIFEXITED(code):
        return os.WEXITSTATUS(code)
    return 128 + os.WTERMSIG(code) if os.WIFSIGNALED(code) else 1


def main() -> int:
    config = json.loads(sys.argv[1])
    if config.get("door"):
        open_door(config["door"], int(config["port"]))
    # pid 1 gets no default signal actions: forward a TERM to everything, then leave
    signal.signal(signal.SIGTERM, lambda *_: os.kill(-1, signal.SIGKILL))
    agent = os.fork()
    if agent == 0:
        try:
            os.chdir(config["cwd"])
            if config.get("stdin"):
                os.dup2(os.open(config["stdin"], os.O_RDONLY), 0)
            os.execv(config["argv"][0], config["argv"])
        except OSError as exc:
            os.write(2, f"evalq sandbox: cannot start {config['argv'][0]}: {exc}\n".encode())
        os._exit(127)
    while True:  # reap every orphan re-parented to us until the agent itself is gone
        try:
            pid, code = os.wait()
        except ChildProcessError:
            return 1
        if pid == agent:
            return _status(code)


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
