"""Pausing Python's cyclic garbage collector while a bulk step builds objects that form no cycles.

A report or a launch over 100,000 trials makes a million small containers; each collection
of the oldest generation rescans all of them again while they grow (over half a report's
time at 100,000 attempts, a quarter of a launch's build: bench/). Reference counting still
frees everything; the collector resumes, if it ran before, when the block ends.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
