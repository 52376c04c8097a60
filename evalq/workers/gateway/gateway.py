"""The gateway process side: one asyncio loop in one thread serves every open run's socket.

A worker holding hundreds of waiting trials needs no thread per connection: each run is a
listener on its own unix socket, or on the listening sockets handed to it (a sealed sandbox's
door: bound in the sandbox's network namespace, accepted from here), all on this loop, all
sharing one pool of upstream connections (TLS verified) and one concurrency counter per
provider.

The loop stays in the worker's process, beside its trial and reader threads, and shares the
GIL with them. Threads merely waiting cost it nothing; threads running Python (a trial starting
or tearing down its sandbox) do: each time the loop makes a system call it lets the GIL go,
and getting it back from a busy thread takes up to the interpreter's switch interval (5 ms by
default), a few times per request. So the gateway lowers the process's switch interval to
LOOP_SWITCH_INTERVAL (it never raises one). Side by side in one script (`python -m
bench.gateway_contention`: calls from another process, 60 real trials starting and ending in
this one), the gateway's own part of a call at p95 (its record's latency less the upstream's
part) went from 19-298 ms at 5 ms to 1.4-6.7 ms (1 ms measured alike), and a gateway in a
process of its own measured the same (1.4-3.0 ms). Lower is worse: at 0.1 ms, 200 trials'
threads take turns so often that the loop's p50 alone grew to 20-35 ms. With 200 trials in one
process each calling through its door, on a machine at load 8-30 for 2 cores, the gain went
from half (p95 300-400 ms to 185 ms) to none (100-270 ms either way): the loop's slow steps
there wait for the GIL (60% of their time) and for a CPU (40%), which a process of its own
would partly avoid.

A new connection reaches a run in one of two ways: `open_run(run_id, socket_path, ...)` binds a
unix socket at that path and serves every connection to it until `GatewayRun.close()`, and
`serve_listener(run, listener)` serves a listening socket handed over by a sealed sandbox's
door. How connections get to either is the door's business.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import socket
import ssl
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

import aiohttp
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from evalq.pricing import PriceTable, load_price_table
from evalq.unix_sockets import bound_unix_socket
from evalq.workers.gateway.budgets import RunBudgets
from evalq.workers.gateway.proxy import handle
from evalq.workers.gateway.run import GatewayRun
from evalq.workers.gateway.slots import LocalSlots, RedisSlots
from evalq.workers.gateway.upstreams import Upstream, as_upstreams

log = logging.getLogger("evalq.gateway")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
MAX_SOCKET_PATH = 107  # bytes, Linux sun_path less its terminating NUL


#: the interpreter's switch interval while a gateway runs (seconds; the default is 0.005): how
#: long a busy worker thread may keep the GIL from the loop after each of its system calls
LOOP_SWITCH_INTERVAL = 0.0005


def share_the_gil() -> None:
    """Lower the process's switch interval to LOOP_SWITCH_INTERVAL (a lower one is kept)."""
    if sys.getswitchinterval() > LOOP_SWITCH_INTERVAL:
        sys.setswitchinterval(LOOP_SWITCH_INTERVAL)


#: connections one run may hold open at once. They are this worker's file descriptors, shared
#: by every run it serves: without a bound, one agent opening connections to its door until
#: its own fd limit (inherited: often tens of thousands) would starve all the others.
MAX_CONNECTIONS_PER_RUN = 64


class TimedHandler(RequestHandler):
    """aiohttp's connection handler, noting when a request's first bytes arrive (before the
    loop parses them and calls the handler), so a request's latency counts from there: time
    the loop took to get to it is the gateway's, not hidden."""

    def data_received(self, data: bytes) -> None:
        if self._manager is not None:
            self._manager.arrived.setdefault(self, time.monotonic())
        super().data_received(data)


class RunServer(web.Server):
    """aiohttp's server for one run's socket, closing connections past `limit` at once."""

    def __init__(self, *args: Any, limit: int = MAX_CONNECTIONS_PER_RUN, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.limit = limit
        self.open: set = set()
        #: when the request each connection is sending began to arrive (proxy.handle takes it)
        self.arrived: dict[Any, float] = {}

    def __call__(self) -> RequestHandler:
        return TimedHandler(self, loop=self._loop, **self._kwargs)

    def connection_made(self, handler, transport) -> None:
        if len(self.open) >= self.limit:
            transport.close()
            return
        self.open.add(handler)
        super().connection_made(handler, transport)

    def connection_lost(self, handler, exc: Optional[BaseException] = None) -> None:
        self.open.discard(handler)
        self.arrived.pop(handler, None)
        super().connection_lost(handler, exc)


#: connections taken from one handed listener per wake-up of the loop
ACCEPT_BATCH = 16
#: pause before accepting again when the worker is out of file descriptors or memory
ACCEPT_RETRY_SECONDS = 1.0


def _close_on_failure(conn: socket.socket, task: "asyncio.Task") -> None:
    """A handed connection the loop could not take up (closed already, say) is closed."""
    if not task.cancelled() and task.exception() is not None:
        conn.close()


#: aiohttp's own errors (malformed requests, mostly) logged per run; the rest are dropped
MAX_LOGGED_ERRORS_PER_RUN = 5


class FewErrors(logging.LoggerAdapter):
    """aiohttp's logger for one run's connections: its first few errors are logged, then none.
    A malformed request never reaches the handler (no Record, no request cap), and aiohttp
    logs a traceback for each: an agent sending them in a loop would write thousands a
    second to the worker's log, until its disk is full."""

    def __init__(self, run_id: str, limit: int = MAX_LOGGED_ERRORS_PER_RUN):
        super().__init__(log, {})
        self.run_id, self.left = run_id, limit

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if not self.isEnabledFor(level) or self.left <= 0:
            return
        self.left -= 1
        suffix = "; later ones are not logged" if self.left == 0 else ""
        super().log(level, f"run {self.run_id}: {msg}{suffix}", *args, **kwargs)


def _origin(upstream: Union[str, Upstream]) -> str:
    return (Upstream(upstream) if isinstance(upstream, str) else upstream).origin


class Gateway:
    """`Gateway(redis_url=None)`: start the loop thread; `open_run` per trial; `close` at exit.

    `redis_url` shares provider concurrency limits with every gateway on that Redis (leases of
    `slot_lease` seconds, renewed while a request runs); without it, or with a broker URL that
    is not Redis (the embedded default's), they hold in this process. Each run compares the
    shared count at an origin with its own limit.
    `ssl_context` replaces the default (system CAs, certificates and host names verified)."""

    def __init__(self, redis_url: Optional[str] = None, *,
                 ssl_context: Optional[ssl.SSLContext] = None,
                 price_table: Optional[PriceTable] = None, slot_lease: float = 30.0):
        self.price_table = price_table or load_price_table()
        shared = bool(redis_url) and redis_url.startswith(REDIS_SCHEMES)
        self.slots = RedisSlots(redis_url, lease=slot_lease) if shared else LocalSlots()
        self.ssl_context = ssl_context or ssl.create_default_context()
        self.runs: dict[str, GatewayRun] = {}
        self.runs_lock = threading.Lock()
        #: run id -> the listeners handed to serve_listener (touched on the loop only)
        self.handed: dict[str, list[socket.socket]] = {}
        share_the_gil()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evalq-gateway",
                                       daemon=True)
        self.thread.start()
        try:
            self._call(self._start())
        except Exception as exc:
            self._stop_loop()
            if shared:
                raise RuntimeError("the model gateway cannot reach Redis for its provider "
                                   f"slots ({type(exc).__name__}: {exc}); start Redis or "
                                   "leave the broker unset") from exc
            raise

    def _call(self, coro, timeout: float = 30.0) -> Any:
        if threading.current_thread() is self.thread:
            raise RuntimeError("Gateway methods are called from the worker, not the loop")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> None:
        await self.slots.start()
        connector = aiohttp.TCPConnector(limit=0, ssl=self.ssl_context, ttl_dns_cache=300)
        self.session = aiohttp.ClientSession(
            connector=connector, trust_env=False, auto_decompress=True,
            timeout=aiohttp.ClientTimeout(total=None, connect=30, sock_read=600))

    # ------------------------------------------------------------------ runs
    def open_run(self, run_id: str, socket_path: Optional[Union[str, Path]],
                 upstreams: Sequence[Union[str, Upstream]],
                 credentials: Optional[Mapping[str, str]] = None,
                 budgets: Optional[RunBudgets] = None, concurrency: Optional[int] = None,
                 on_exhausted: Optional[Callable[[str], None]] = None,
                 socket_mode: int = 0o600,
                 models: Optional[Iterable[str]] = None) -> GatewayRun:
        """Listen for one run on `socket_path` (its parent should be a directory only the
        worker can enter) and return its handle once the socket accepts connections;
        `socket_path=None`: no socket of its own, its connections come from the listeners
        given to `serve_listener` (a sealed sandbox's door).

        With `models`, a model call naming any other model is refused (403 model_not_allowed)."""
        path = None if socket_path is None else Path(socket_path)
        if path is not None and len(os.fsencode(path)) > MAX_SOCKET_PATH:
            raise ValueError(f"socket path {path} is over {MAX_SOCKET_PATH} bytes; "
                             "use a shorter directory")
        run = GatewayRun(self, run_id, path, as_upstreams(upstreams), credentials or {},
                         budgets or RunBudgets(), concurrency, on_exhausted,
                         None if models is None else frozenset(models))
        with self.runs_lock:
            if run_id in self.runs:
                raise ValueError(f"run {run_id!r} is already open on this gateway")
            self.runs[run_id] = run
        try:
            self._call(self._listen(run, socket_mode))
        except BaseException:
            with self.runs_lock:
                self.runs.pop(run_id, None)
            raise
        return run

    async def _listen(self, run: GatewayRun, mode: int) -> None:
        server = RunServer(functools.partial(handle, self, run), access_log=None,
                           logger=FewErrors(run.run_id))
        run.http_server = server
        path = run.socket_path
        if path is None:
            return
        if path.exists() or path.is_symlink():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise FileExistsError(f"{path} exists and is not a socket; give the run a "
                                      "fresh socket path")
            path.unlink()
        listener = await self.loop.create_unix_server(server, sock=bound_unix_socket(path))
        os.chmod(path, mode)
        run.listener = listener

    # ------------------------------------------------------------------ handed listeners
    def serve_listener(self, run: GatewayRun, listener: socket.socket) -> None:
        """Serve `run` on every connection `listener` accepts as well: a listening stream
        socket, TCP or unix, bound in any network namespace (a sealed sandbox's own: its door
        hands it over, evalq/workers/sandbox/handoff.py). From here the gateway owns it: it
        is closed with the run, or at once if accepting from it fails (only that run loses
        its door). Callable from any thread, the loop's own included; returns at once."""
        if threading.current_thread() is self.thread:
            self._adopt(run, listener)
        else:
            self.loop.call_soon_threadsafe(self._adopt, run, listener)

    def _adopt(self, run: GatewayRun, listener: socket.socket) -> None:
        if run.closed or run.http_server is None:
            listener.close()
            return
        listener.setblocking(False)
        self.handed.setdefault(run.run_id, []).append(listener)
        self.loop.add_reader(listener.fileno(), self._accept, run, listener)

    def _accept(self, run: GatewayRun, listener: socket.socket) -> None:
        """Accept what is waiting (a bounded batch per wake-up, so one busy door cannot hold
        the loop) and serve each connection as one from the run's own socket."""
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # the worker's limit, not this run's doing: try again shortly
                    self.loop.remove_reader(listener.fileno())
                    self.loop.call_later(ACCEPT_RETRY_SECONDS, self._resume, run, listener)
                    return
                log.warning("run %s: its door stopped accepting (%s); it is closed",
                            run.run_id, exc)
                self._drop(run, listener)
                return
            conn.setblocking(False)
            task = self.loop.create_task(
                self.loop.connect_accepted_socket(run.http_server, sock=conn))
            task.add_done_callback(functools.partial(_close_on_failure, conn))

    def _resume(self, run: GatewayRun, listener: socket.socket) -> None:
        if listener in self.handed.get(run.run_id, ()):
            self.loop.add_reader(listener.fileno(), self._accept, run, listener)

    def _drop(self, run: GatewayRun, listener: socket.socket) -> None:
        held = self.handed.get(run.run_id, [])
        if listener in held:
            held.remove(listener)
            self.loop.remove_reader(listener.fileno())
            listener.close()
        if not held:
            self.handed.pop(run.run_id, None)

    def close_run(self, run: GatewayRun) -> None:
        if run.closed:
            return
        run.closed = True
        with self.runs_lock:
            self.runs.pop(run.run_id, None)
        self._call(self._unlisten(run))

    async def _unlisten(self, run: GatewayRun) -> None:
        for listener in list(self.handed.get(run.run_id, ())):
            self._drop(run, listener)
        if run.listener is not None:
            run.listener.close()
        pending = list(run.in_flight)  # requests still running (a stream the agent left)
        for task in pending:
            task.cancel()
        if pending:  # their records and slot releases happen as they unwind: wait for that
            await asyncio.wait(pending, timeout=5.0)
        await run.http_server.shutdown(0.5)  # idle kept-alive connections
        if run.listener is None:
            return
        await run.listener.wait_closed()
        try:
            run.socket_path.unlink()
        except FileNotFoundError:
            pass

    # ------------------------------------------------------------------ helpers
    def queued(self, upstream: Union[str, Upstream]) -> int:
        """Requests of this gateway waiting for a concurrency slot at an upstream's origin."""
        return self.slots.waiters.counts[_origin(upstream)]

    def wait_queued(self, upstream: Union[str, Upstream], count: int,
                    timeout: float = 10.0) -> bool:
        """Block until exactly `count` requests wait for a slot there; False on timeout."""
        return self.slots.waiters.wait_for(_origin(upstream), count, timeout)

    def notify(self, callback: Callable[[str], None], reason: str) -> None:
        """Run a worker's callback off the loop, so a slow one cannot stall other runs."""
        def call() -> None:
            try:
                callback(reason)
            except Exception:  # noqa: BLE001 - the worker's bug must not kill the gateway
                log.exception("gateway on_exhausted callback failed")
        self.loop.run_in_executor(None, call)

    def close(self) -> None:
        """Close every run, the upstream connections and the slots; stop the loop thread."""
        if not self.loop.is_running():
            return
        with self.runs_lock:
            runs = list(self.runs.values())
        for run in runs:
            self.close_run(run)
        try:
            self._call(self._shutdown())
        finally:
            self._stop_loop()

    async def _shutdown(self) -> None:
        await self.session.close()
        await self.slots.close()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
