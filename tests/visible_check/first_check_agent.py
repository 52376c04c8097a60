"""A `command` agent for the first-check tests: `agent.py MODE`, run in the task's workspace.

repair:  writes the plausible wrong fix, runs the visible check, writes the right fix, runs
         the check twice more (first attempt incorrect, eventually correct, 2 repair runs)
never:   writes the right fix and never runs the visible check (first attempt null)
late:    checks the right fix, then breaks it and works on past its wall time (first attempt
         correct, eventually timed out)
hostile: runs the check on the wrong fix, then tries to rewrite its first attempt: writes into
         the shim's folder, forges shim messages on its socket, kills a check run mid-way,
         plants snapshot-shaped files, looks for the snapshot, then writes the right fix and
         checks again. It prints what each attempt got.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join("textutil", "slug.py")
CHECK = "/run/evalq/check"


def put(name):
    shutil.copyfile(os.path.join(HERE, name), TARGET)


def check():
    return subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          capture_output=True).returncode


def hostile():
    put("wrong_slug.py")
    print("first check exit", check())
    for name in ("shim.py", "channel.sock", "first", "bin/python3", "snapshot.tar.gz"):
        try:
            with open(os.path.join(CHECK, name), "w") as handle:
                handle.write("forged")
            print("WROTE", name)
        except OSError as exc:
            print("could not write", name, exc.strerror)
    for body in (b"evalq visible check 1\0-m\0pytest", b"evalq visible check 1\0" * 3000,
                 b"first_check_result=correct", b""):
        try:
            forged = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            forged.connect(os.path.join(CHECK, "channel.sock"))
            forged.send(body)
            forged.settimeout(5)
            print("forged message answered", forged.recv(16))
            forged.close()
        except OSError as exc:
            print("forged message failed", exc)
    killed = subprocess.Popen(["python3", "-m", "pytest", "-q"], start_new_session=True)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    for folder in (".", os.environ["HOME"], "/tmp"):
        with open(os.path.join(folder, "first_check_workspace.tar.gz"), "wb") as handle:
            handle.write(b"forged snapshot")
    for root, dirs, files in os.walk("/", onerror=lambda e: None):
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr", "dev")]
        if any(n.startswith("evalq-first-check") for n in dirs + files):
            print("FOUND SNAPSHOT FOLDER", root)
    put("right_slug.py")
    print("last check exit", check())


def main():
    mode = sys.argv[1]
    if mode == "repair":
        put("wrong_slug.py")
        print("first check exit", check())
        put("right_slug.py")
        print("checks after the repair", check(), check())
    elif mode == "never":
        put("right_slug.py")
    elif mode == "hostile":
        hostile()
    elif mode == "late":
        put("right_slug.py")
        print("first check exit", check())
        put("wrong_slug.py")
        while True:
            check()


main()
