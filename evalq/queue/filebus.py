"""The embedded broker: kombu's filesystem transport that wakes on new files instead of polling.

Stock kombu sleeps `polling_interval` whenever a queue is empty or the prefetch window is
full, so each of a trial's three hops waited up to that long (issue 19: 6.5 no-op trials/s
against 25/s through Redis). Here a consumer blocks on an inotify watch of the queue folder
and on a doorbell rung by its own acks, and reads the folder as soon as either fires.

Three fixes to the stock file handling come with it, because waking at once exposes them:
a message is written under incoming/ and renamed into the queue folder (a reader never
sees half a file), and a reader claims a message by renaming it into claimed/ on the same
filesystem (an atomic rename: two worker processes can never both take one message; stock
kombu moves to /tmp, a copy across filesystems); declared bindings are remembered per broker
folder, not per process. Still no server.
"""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic, monotonic_ns

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.json import dumps, loads

from evalq.queue.dirwatch import DirWatch

#: with inotify, how often the folder is read anyway (a safety net; wake-ups need no timer)
RESCAN_SECONDS = 1.0
#: messages this process sent: with the machine's monotonic clock in nanoseconds, zero-padded,
#: it makes file names sort in the order they were sent. Stock kombu names by milliseconds
#: then a random uuid, so two messages of one millisecond came out in either order, and an
#: unpadded count sorts 999 after 1000 (a study's trials would not run in planned order).
_sent = itertools.count()


def folders(root: Path) -> dict[str, Path]:
    """The broker's folders under `root`; one filesystem, so renames between them are atomic."""
    return {name: root / name for name in ("queue", "incoming", "claimed", "processed",
                                           "control")}


def transport_options(root: Path) -> dict:
    """Transport options for kombu: the stock filesystem ones plus where incoming/claimed are."""
    paths = folders(root)
    return {"data_folder_in": str(paths["queue"]), "data_folder_out": str(paths["queue"]),
            "processed_folder": str(paths["processed"]), "store_processed": False,
            "control_folder": str(paths["control"]), "incoming_folder": str(paths["incoming"]),
            "claimed_folder": str(paths["claimed"]), "polling_interval": 0.1}


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Write the message beside the queue, then rename it in: readers see whole files only."""
        name = f"{monotonic_ns():020d}{next(_sent):012d}_{uuid.uuid4()}.{queue}.msg"
        staging = os.path.join(self._folder("incoming_folder"), name)
        try:
            with open(staging, "wb") as handle:
                handle.write(dumps(payload).encode())
            os.rename(staging, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"cannot add message {name!r} to {self.data_folder_out}: "
                               f"{exc}") from exc

    def _get(self, queue):
        """Claim the oldest message of `queue` by an atomic rename; the loser of a race skips it."""
        suffix = f"{queue}.msg"
        claimed = self._folder("claimed_folder")
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != suffix:
                continue
            mine = os.path.join(claimed, f"{os.getpid()}-{name}")
            try:
                os.rename(os.path.join(self.data_folder_in, name), mine)
            except FileNotFoundError:
                continue  # another process claimed it first
            payload = _read_whole(mine)
            try:
                message = loads(payload)
            except (ValueError, UnicodeDecodeError):
                os.rename(mine, mine + ".unreadable")  # kept for inspection, never re-read
                continue
            os.unlink(mine)
            return message
        raise Empty()

    def _folder(self, option: str) -> str:
        return self.transport_options[option]  # made by Transport.__init__

    def basic_ack(self, delivery_tag, multiple=False):
        super().basic_ack(delivery_tag, multiple)
        self.connection.ring()  # a prefetch slot is free: the waiting consumer may fetch again

    def basic_reject(self, delivery_tag, requeue=False):
        super().basic_reject(delivery_tag, requeue)
        self.connection.ring()

    def basic_qos(self, *args, **kwargs):
        super().basic_qos(*args, **kwargs)
        self.connection.ring()


def _read_whole(path: str) -> bytes:
    """Read a claimed file; a shared lock waits out a writer still holding stock kombu's lock."""
    with open(path, "rb") as handle:
        filesystem.lock(handle, filesystem.LOCK_SH)
        try:
            return handle.read()
        finally:
            filesystem.unlock(handle)


class Transport(filesystem.Transport):
    Channel = Channel
    driver_type = "filesystem"
    driver_name = "evalq-filebus"

    #: declared bindings, one cache per broker folder; stock kombu keeps one for the whole
    #: process, so a second broker folder in the same process never got its bindings written
    #: and its messages were dropped
    states: dict[str, virtual.BrokerState] = {}

    def __init__(self, client, **kwargs):
        super().__init__(client, **kwargs)
        options = client.transport_options
        control = os.path.abspath(options.get("control_folder", "control"))
        self.state = self.states.setdefault(control, virtual.BrokerState())
        queue_folder = options.get("data_folder_in", "data_in")
        for option in ("data_folder_in", "incoming_folder", "claimed_folder"):
            if options.get(option):
                os.makedirs(options[option], exist_ok=True)
        self.watch = DirWatch(queue_folder)
        self._bell: tuple[int, int] | None = os.pipe()  # (read end, write end)
        for fd in self._bell:
            os.set_blocking(fd, False)

    def ring(self) -> None:
        """Wake a consumer blocked in drain_events (called from any thread of this process)."""
        bell = self._bell
        if bell is None:
            return  # closed: nobody waits
        try:
            os.write(bell[1], b"!")
        except BlockingIOError:
            pass  # the pipe is full: a wake-up is already pending

    def drain_events(self, connection, timeout=None):
        """Deliver one message; between empty reads, block on the folder watch and the doorbell."""
        started = monotonic()
        rescan = RESCAN_SECONDS if self.watch.fd is not None else self.polling_interval
        while True:
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                pass
            left = None if timeout is None else timeout - (monotonic() - started)
            if left is not None and left <= 0:
                raise TimeoutError("no message")  # socket.timeout is TimeoutError
            bell = () if self._bell is None else (self._bell[0],)
            self.watch.wait(rescan if left is None else min(rescan, left), bell)

    def close_connection(self, connection):
        """Close the watch and the doorbell once (kombu may call this again on a closed one:
        closing the same fd numbers twice would close whatever reused them)."""
        super().close_connection(connection)
        self.watch.close()
        bell, self._bell = self._bell, None
        for fd in bell or ():
            os.close(fd)
