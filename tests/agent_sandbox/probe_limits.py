"""The limits the sandbox-level hostile tests run their probe agents under (import it)."""

from evalq.graders.sandbox.base import SandboxLimits

#: a minute, 512 MB, 64 processes, one CPU, 1 MB of output, a 64 MB disk allowance
PROBE_LIMITS = SandboxLimits(timeout_seconds=60, memory_mb=512, pids=64, cpus=1.0,
                             output_limit_bytes=1_000_000, disk_mb=64)
