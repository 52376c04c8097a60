"""What this process may ask of the kernel: decided by capability, not by uid.

Root in a container usually lacks CAP_SYS_ADMIN (Docker's default set): it may not make a pid,
mount or network namespace outside a user namespace, nor mount a tmpfs. The sandboxes then go
the unprivileged way: they switch to the sandbox user first, and bubblewrap makes a user
namespace as that user; capped folders stay plain folders, and say so.
"""

from __future__ import annotations

import os

#: the capability bit (linux/capability.h) that namespaces and mounts need
CAP_SYS_ADMIN = 21


def effective_capabilities() -> int:
    """This process's effective capability set (CapEff of /proc/self/status); 0 if unreadable."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def can_mount() -> bool:
    """Whether this process holds CAP_SYS_ADMIN: namespaces without a user namespace, mounts."""
    return bool(effective_capabilities() >> CAP_SYS_ADMIN & 1)


def mount_refused() -> str | None:
    """Why a mount by this process would be refused before trying it, else None."""
    if can_mount():
        return None
    if os.geteuid() == 0:
        return "mounting a tmpfs needs CAP_SYS_ADMIN, which this root process lacks"
    return "mounting a tmpfs needs root"


def as_user(uid: int) -> list[str]:
    """The command prefix that runs what follows as the host's `uid` (gid the same, no
    supplementary group), with no capability left, not even in the bounding set."""
    return ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--"]
