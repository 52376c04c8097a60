"""A process's own peak memory, for the bench children that measure one piece of work each.

Not getrusage's ru_maxrss: Linux carries a process's high-water mark across exec, so a child
started by the bench (fork or vfork, then exec) reports at least the bench's own RSS at that
moment (hundreds of MiB after the scale section) whatever it used itself. VmHWM is the peak
of the memory map exec gave the child, which is its own.
"""

from __future__ import annotations

import resource


def peak_rss_mib() -> float:
    """This process's peak resident memory in MiB since it exec'd (VmHWM; ru_maxrss where
    /proc is not there)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
