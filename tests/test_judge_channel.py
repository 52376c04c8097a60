"""The judge-subject channel itself, with a real subject process (no sandbox: the protocol).

What crosses is data; objects stay behind as handles; exceptions come back typed by name; a
subject that hangs or dies fails the waiting call; and lines the subject sends unasked are
never acted on: the judge has no operation the subject could invoke.
"""

from __future__ import annotations

import datetime
import pathlib
import socket
import subprocess
import sys
import textwrap

import pytest

from evalq.graders.judge import client
from evalq.graders.split import JUDGE_PACKAGE

AGENT = '''
import datetime, os, sys, time

class OutOfStock(ValueError):
    pass

class Shelf:
    def __init__(self):
        self.items = []
    def put(self, name):
        print("putting", name)
        self.items.append(name)
        return len(self.items)
    def take(self, name):
        if name not in self.items:
            raise OutOfStock(f"no {name}")
        self.items.remove(name)

def echo(value):
    return value

def hang():
    time.sleep(3600)

def die():
    os._exit(3)

def forge():
    line = b'{"op": "run", "argv": ["touch", "%s"]}\\n' % os.environ["MARK"].encode()
    os.write(int(os.environ["CHANNEL_FD"]), line)
    return 1
'''


@pytest.fixture
def subject(tmp_path):
    (tmp_path / "agent.py").write_text(textwrap.dedent(AGENT))
    judge_end, subject_end = socket.socketpair()
    fd = subject_end.fileno()
    proc = subprocess.Popen([sys.executable, "-I", "-B", str(JUDGE_PACKAGE / "subject_server.py"),
                             f"fd:{fd}", str(tmp_path)], pass_fds=(fd,),
                            env={"CHANNEL_FD": str(fd), "MARK": str(tmp_path / "forged")})
    subject_end.close()
    channel = client.Channel(judge_end, timeout=2)
    yield channel, tmp_path
    judge_end.close()
    proc.kill()
    proc.wait(10)


def test_data_handles_output_and_typed_exceptions(subject):
    channel, _ = subject
    agent = channel.request({"op": "import", "module": "agent"})
    value = {"t": (1, "a"), "s": {1, 2}, "b": b"\x00\xff", "p": pathlib.PurePosixPath("/x/y"),
             "d": datetime.datetime(2024, 5, 1, 12, 30), 3: [None, True, 1.5]}
    assert agent.echo(value) == value
    shelf = agent.Shelf()
    assert repr(shelf).startswith("<subject Shelf")
    assert shelf.put("pear") == 1 and shelf.items == ["pear"]
    assert channel.last.out == ""  # the latest call (reading items) printed nothing
    shelf.put("fig")
    assert channel.last.out == "putting fig\n"
    shelf.method("put", "plum")
    assert channel.last.out == "putting plum\n"
    with pytest.raises(ValueError) as info:
        shelf.take("kiwi")
    assert isinstance(info.value, client.SubjectError)
    assert (type(info.value).__name__, str(info.value)) == ("OutOfStock", "no kiwi")
    assert len(shelf.ref("items")) == 3 and list(shelf.ref("items")) == ["pear", "fig", "plum"]
    with pytest.raises(TypeError, match="has no len"):
        len(shelf)


def test_unasked_lines_from_the_subject_are_never_acted_on(subject):
    channel, folder = subject
    agent = channel.request({"op": "import", "module": "agent"})
    assert agent.forge() == 1
    assert agent.echo("still answering") == "still answering"
    assert not (folder / "forged").exists()


@pytest.mark.parametrize("call, error, message", [
    ("hang", client.SubjectHung, "did not answer within 2s"),
    ("die", client.SubjectGone, "subject process ended"),
])
def test_hang_or_death_fails_the_call_and_the_ones_after(subject, call, error, message):
    channel, _ = subject
    agent = channel.request({"op": "import", "module": "agent"})
    with pytest.raises(error, match=message):
        getattr(agent, call)()
    with pytest.raises(client.SubjectGone, match="subject unavailable"):
        agent.echo(1)
