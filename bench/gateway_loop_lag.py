"""Does a worker's crowd of trial threads starve the gateway's loop? `python -m
bench.gateway_loop_lag [TRIALS]` measures how late the gateway's loop wakes from a 5 ms sleep,
alone, then beside TRIALS sets of the threads a trial holds while its agent runs (two readers
blocked on its pipes, one waiting for its exit, the trial's own thread waking every 0.25 s to
check whether to stop), then alone again, in one process. Equal lateness: the threads cost the
loop nothing, and the gateway needs no process of its own for their sake.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

from evalq.proc import STOP_CHECK_SECONDS
from evalq.workers.gateway import Gateway

from .gateway_bench import percentile


def late_wakeups(loop: asyncio.AbstractEventLoop, seconds: float = 8.0) -> list[float]:
    """How late `loop` wakes from asyncio.sleep(5 ms), in ms, each time over `seconds`."""
    async def probe() -> list[float]:
        late, end = [], time.monotonic() + seconds
        while time.monotonic() < end:
            started = time.monotonic()
            await asyncio.sleep(0.005)
            late.append((time.monotonic() - started - 0.005) * 1000)
        return late

    return asyncio.run_coroutine_threadsafe(probe(), loop).result(seconds + 60)


def lateness(gateway: Gateway, seconds: float = 8.0) -> dict:
    """How late the gateway's loop wakes from asyncio.sleep(5 ms), in ms, over `seconds`."""
    late = late_wakeups(gateway.loop, seconds)
    return {"n": len(late), "p50_ms": percentile(late, 0.5), "p95_ms": percentile(late, 0.95),
            "p99_ms": percentile(late, 0.99), "max_ms": max(late)}


def trial_threads(stop: threading.Event) -> None:
    """One trial's threads while its agent (here `sleep`) runs, as evalq.proc holds them."""
    proc = subprocess.Popen(["sleep", "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for target in (proc.stdout.read, proc.stderr.read, proc.wait):
        threading.Thread(target=target, daemon=True).start()
    wake = threading.Event()
    while not stop.is_set():
        wake.wait(STOP_CHECK_SECONDS)
    proc.kill()
    proc.wait()


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    stop = threading.Event()
    with Gateway() as gateway:
        print(f"alone: {lateness(gateway)}")
        crowd = [threading.Thread(target=trial_threads, args=(stop,)) for _ in range(trials)]
        for thread in crowd:
            thread.start()
        print(f"beside {trials} trials' threads: {lateness(gateway)}")
        stop.set()
        for thread in crowd:
            thread.join(30)
        print(f"alone again: {lateness(gateway)}")


if __name__ == "__main__":
    main()
