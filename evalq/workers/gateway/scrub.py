"""Masks secrets in a byte stream as it passes, even when one is split across two chunks.

Only a chunk's tail that could begin a secret is held back until the next chunk, so a server-
sent event (which ends in a blank line) reaches the agent at once.
"""

from __future__ import annotations

from typing import Iterable

MASK = b"[redacted by evalq gateway]"


class Scrubber:
    def __init__(self, secrets: Iterable[str]):
        self.secrets = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)
        self.held = b""

    def _partial_tail(self, data: bytes) -> int:
        """Length of the longest tail of `data` that is a proper prefix of some secret."""
        longest = 0
        for secret in self.secrets:
            start = max(0, len(data) - len(secret) + 1)
            at = data.find(secret[:1], start)
            while at != -1:
                if secret.startswith(data[at:]):
                    longest = max(longest, len(data) - at)
                    break
                at = data.find(secret[:1], at + 1)
        return longest

    def feed(self, chunk: bytes) -> bytes:
        """What of `held + chunk` can be sent now, every whole secret in it masked."""
        if not self.secrets:
            return chunk
        data = self.held + chunk
        for secret in self.secrets:
            data = data.replace(secret, MASK)
        keep = self._partial_tail(data)
        self.held = data[len(data) - keep:] if keep else b""
        return data[:len(data) - keep]

    def flush(self) -> bytes:
        """The held-back tail at the end of the stream (it was no secret after all)."""
        rest, self.held = self.held, b""
        return rest

    def whole(self, data: bytes) -> bytes:
        return self.feed(data) + self.flush()
