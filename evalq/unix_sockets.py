"""Unix sockets bound at any path, however long.

bind() takes a path of at most 107 bytes, and evalq makes its sockets inside folders under
TMPDIR or EVALQ_HOME, which CI runners and macOS make long. Binding through the folder's
descriptor (/proc/self/fd/N/NAME) names the same place in a few bytes.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def bound_unix_socket(path: Path, kind: int = socket.SOCK_STREAM) -> socket.socket:
    """A socket (stream, or `kind`) bound at `path` (its folder must exist; the socket file
    must not)."""
    sock = socket.socket(socket.AF_UNIX, kind)
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sock.bind(f"/proc/self/fd/{folder}/{path.name}")
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(folder)
    return sock
