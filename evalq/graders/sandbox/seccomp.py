"""A seccomp deny-list for the bubblewrap sandbox, compiled with the system's libseccomp.

It refuses (EPERM) the system calls graded code has no business making and that widen the
kernel's attack surface: mounting, namespaces, tracing other processes, kernel modules,
keyrings, BPF, perf, userfaultfd, clocks and reboot. Docker's default profile blocks these too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from functools import lru_cache

DENIED = (
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "swapon", "swapoff",
    "reboot", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "bpf", "perf_event_open", "ptrace", "process_vm_readv",
    "process_vm_writev", "kcmp", "keyctl", "add_key", "request_key", "userfaultfd",
    "open_by_handle_at", "name_to_handle_at", "acct", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "syslog", "quotactl", "lookup_dcookie", "fanotify_init",
    "iopl", "ioperm", "vhangup", "fsopen", "fsmount", "fsconfig", "move_mount", "open_tree",
    "mount_setattr",
)
ACT_ALLOW = 0x7FFF0000
NR_UNKNOWN = -1  # __NR_SCMP_ERROR


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


@lru_cache(maxsize=1)
def compiled_filter() -> bytes | None:
    """The BPF program denying DENIED, built once per process; None without libseccomp.

    Kept in memory, not in a temp file: a file per worker process was left behind in /tmp.
    """
    name = ctypes.util.find_library("seccomp")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                     ctypes.c_uint]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(ACT_ALLOW)
    if not ctx:
        return None
    try:
        for syscall in DENIED:
            number = lib.seccomp_syscall_resolve_name(syscall.encode())
            if number == NR_UNKNOWN:
                continue
            if lib.seccomp_rule_add(ctx, _act_errno(errno.EPERM), number, 0) != 0:
                return None
        fd = os.memfd_create("evalq-seccomp")
        try:
            if lib.seccomp_export_bpf(ctx, fd) != 0:
                return None
            os.lseek(fd, 0, os.SEEK_SET)
            return read_all(fd)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)


def filter_fd() -> int | None:
    """A fresh readable fd holding the filter at offset 0 (bwrap --seccomp reads it to the end)."""
    program = compiled_filter()
    if program is None:
        return None
    fd = os.memfd_create("evalq-seccomp")
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)
