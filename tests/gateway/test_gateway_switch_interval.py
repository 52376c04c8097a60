"""The gateway's loop shares the GIL with the worker's trial threads: a gateway lowers the
process's switch interval, so a busy thread gives the GIL back to the loop within half a
millisecond instead of five after each of the loop's system calls (gateway.py says what that
measured), and never raises one that is already lower."""

from __future__ import annotations

import sys

from evalq.workers.gateway import Gateway
from evalq.workers.gateway.gateway import LOOP_SWITCH_INTERVAL


def test_a_gateway_lowers_the_switch_interval_and_keeps_a_lower_one():
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        with Gateway():
            assert sys.getswitchinterval() == LOOP_SWITCH_INTERVAL < 0.005
        sys.setswitchinterval(LOOP_SWITCH_INTERVAL / 2)
        with Gateway():
            assert sys.getswitchinterval() == LOOP_SWITCH_INTERVAL / 2
    finally:
        sys.setswitchinterval(before)
