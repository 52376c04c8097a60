"""The `docker` sandbox backend: one throw-away container per command, through the `docker` SDK.

The container has no network, a read-only root, every capability dropped, no-new-privileges,
a non-root user, memory (no swap), CPU and pids limits, a size-limited tmpfs at /tmp and only
two writable host directories (the workspace and the report dir). Output is read straight from
the container's stdio (the log driver is off, so nothing piles up on the engine's disk) and the
container is killed once it passes the output cap or the wall-time limit, and always removed.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from evalq.errors import SandboxError
from evalq.proc import STOP_CHECK_SECONDS
from evalq.graders.sandbox.base import (
    REPORT_PATH,
    SHM_MB,
    WORKSPACE_PATH,
    ExecResult,
    RunExtras,
    Sandbox,
    SandboxLimits,
)
from evalq.graders.sandbox.toolchain import DEFAULT_IMAGE, Toolchain, image_toolchain

#: The grader user inside every image: Debian's nobody:nogroup.
SANDBOX_UID = 65534
SANDBOX_GID = 65534
#: Labels on every container this backend makes, so a sweep can find orphans.
LABEL_SANDBOX = "evalq.sandbox"
LABEL_LABEL = "evalq.label"
LABEL_CREATED = "evalq.created"
#: when the container is past any use: its wall time, the kill grace and an engine call's timeout
LABEL_DEADLINE = "evalq.deadline"

START_HINT = "how to start it: scripts/ensure-docker.sh"
BUILD_HINT = "build the local images with scripts/build-grader-images.sh, or docker pull it"

#: Seconds allowed for engine calls other than the wall-time wait (create, kill, inspect, remove).
API_TIMEOUT = 60
#: Seconds to wait for a killed container to report its exit.
KILL_GRACE = 15


@dataclass
class ContainerRun:
    """One container's run: the result, and its output as the bytes it wrote."""

    result: ExecResult
    stdout: bytes
    stderr: bytes
    output_exceeded: bool = False


def container_labels(label: str, limits: SandboxLimits, **extra: str) -> dict[str, str]:
    """Labels a sweep finds a leftover by: ours, what it ran, when, and when it is past use."""
    now = time.time()
    return {LABEL_SANDBOX: "1", LABEL_LABEL: label, LABEL_CREATED: str(int(now)),
            LABEL_DEADLINE: str(int(now + limits.timeout_seconds + KILL_GRACE
                                    + 2 * API_TIMEOUT)), **extra}


def locked_down(limits: SandboxLimits) -> dict:
    """containers.create arguments every sandbox container gets (grading's and agents'): no
    network, read-only root, no capability, no privilege gain, memory (no swap), CPU and pids
    limits, a /tmp tmpfs of the disk allowance, no core dumps, no file over that allowance."""
    from docker.types import Ulimit

    memory = f"{int(limits.memory_mb)}m"
    disk_bytes = int(limits.disk_mb) * 1024 * 1024
    return dict(network_mode="none", mem_limit=memory, memswap_limit=memory,
                nano_cpus=int(limits.cpus * 1e9), pids_limit=int(limits.pids), read_only=True,
                shm_size=f"{SHM_MB}m",
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={int(limits.disk_mb)}m,mode=1777"},
                cap_drop=["ALL"], security_opt=["no-new-privileges"],
                ulimits=[Ulimit(name="core", soft=0, hard=0),
                         Ulimit(name="fsize", soft=disk_bytes, hard=disk_bytes)])


def _client(timeout: int = API_TIMEOUT):
    import docker  # imported here so the package loads on hosts without the SDK

    return docker.from_env(timeout=timeout)


def _make_writable_by_sandbox(root: Path, uid: int = SANDBOX_UID) -> None:
    """Give the grader user the caller's fresh copy; never follows a symlink out of it."""
    paths = [root]
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        paths.extend(Path(dirpath, n) for n in dirnames + filenames)
    try:
        for p in paths:
            os.lchown(p, uid, uid)
    except PermissionError:
        # Not root: open the tree up instead (the caller's copy is throw-away).
        for p in paths:
            if p.is_symlink():
                continue
            mode = p.lstat().st_mode
            extra = 0o777 if p.is_dir() else (0o777 if mode & 0o111 else 0o666)
            os.chmod(p, mode | extra)


def _pids_limit_reached(pid: int) -> Optional[int]:
    """How often the container's cgroup refused a fork (pids.events `max`), if this host can tell."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "pids":
            events = Path("/sys/fs/cgroup/pids") / path.lstrip("/") / "pids.events"
        elif controllers == "":
            events = Path("/sys/fs/cgroup") / path.lstrip("/") / "pids.events"
        else:
            continue
        try:
            for ev in events.read_text().splitlines():
                key, _, value = ev.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


class _OutputReader(threading.Thread):
    """Reads the attached stdout/stderr until EOF or until the cap is passed."""

    def __init__(self, stream, cap: int, on_cap):
        super().__init__(daemon=True, name="evalq-docker-output")
        self.stream = stream
        self.cap = cap
        self.on_cap = on_cap
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.capped = False
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        total = 0
        try:
            for out, err in self.stream:
                for chunk, buf in ((out, self.stdout), (err, self.stderr)):
                    if not chunk:
                        continue
                    room = self.cap - total
                    buf += chunk[:max(room, 0)]
                    total += len(chunk)
                    if total > self.cap and not self.capped:
                        self.capped = True
                        self.on_cap()
                        return
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            self.error = exc


class DockerSandbox(Sandbox):
    """Runs each command in a fresh, locked-down container of the Docker engine (`docker` SDK)."""

    name: ClassVar[str] = "docker"

    def __init__(self, *, default_image: str = DEFAULT_IMAGE, client: Any = None):
        self.default_image = default_image
        self._client = client
        self._toolchains: dict[str, Toolchain] = {}

    @property
    def client(self):
        if self._client is None:
            try:
                self._client = _client()
            except Exception as exc:  # DockerException, connection errors
                raise SandboxError(
                    f"cannot reach the Docker engine ({_reason(exc)}); {START_HINT}") from exc
        return self._client

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            client = _client(timeout=10)
            client.ping()
            client.close()
        except Exception as exc:
            return False, f"Docker engine not reachable ({_reason(exc)}); {START_HINT}"
        return True, ""

    # ---- run ---------------------------------------------------------------------------------

    def run(self, argv: list[str], *, workspace: Path, report_dir: Path,
            limits: SandboxLimits, env: dict[str, str], image: str | None = None,
            label: str = "", extras: RunExtras | None = None) -> ExecResult:
        _check_request(argv, env)
        extras = extras or RunExtras()
        if extras.pass_fds:
            raise SandboxError("the docker backend cannot pass file descriptors in")
        uid = SANDBOX_UID if extras.uid is None else extras.uid
        mounts = _bind_mounts(workspace, report_dir, uid)
        for source, target in extras.ro_binds:
            mounts[str(Path(source).resolve())] = {"bind": target, "mode": "ro"}
        for source, target in extras.rw_binds:
            mounts[str(Path(source).resolve())] = {"bind": target, "mode": "rw"}
        create = _container_config(argv, env, limits, label, mounts, uid)
        return self.run_container(image or self.default_image, create, limits,
                                  should_stop=extras.should_stop, with_toolchain=True).result

    def run_container(self, image: str, create: dict, limits: SandboxLimits,
                      should_stop: Optional[Callable[[], bool]] = None,
                      with_toolchain: bool = False) -> ContainerRun:
        """Create, attach, start and wait for one container made from `create` (the SDK's
        containers.create arguments); kill it at the wall time, the output cap or should_stop;
        always remove it. Shared by the grading and the agent sandboxes."""
        from docker.types import LogConfig

        config = dict(create, log_config=LogConfig(type="none"), stdin_open=False, tty=False)
        container = stream = None
        try:
            container, stream, reader = _start(self.client, image, config, limits)
            toolchain = self._toolchain(image, container.attrs.get("Image")) \
                if with_toolchain else None
            started = time.monotonic()
            status, killed_for, pids_hits = self._wait(container, limits, should_stop)
            duration = time.monotonic() - started
            notes = _reader_notes(reader)
            result = _result(status, _state(container), reader, killed_for, pids_hits, limits,
                             notes)
            result.duration_seconds = duration
            result.toolchain = toolchain
            return ContainerRun(result, bytes(reader.stdout), bytes(reader.stderr),
                                output_exceeded=reader.capped)
        finally:
            _discard(container, stream)

    def toolchain(self, image: str | None = None) -> Toolchain:
        """The toolchain of the image `image` names now (a re-tagged name: the new image)."""
        image = image or self.default_image
        try:
            image_id = self.client.images.get(image).id
        except SandboxError:
            raise
        except Exception as exc:  # DockerException (no such image), connection errors
            raise SandboxError(f"cannot inspect grader image {image!r}: {_reason(exc)}") from exc
        return self._toolchain(image, image_id)

    def _toolchain(self, image: str, image_id: Optional[str]) -> Toolchain:
        """The rootfs digest (label) of the image the container was made from, by image id:
        an image re-imported under the same name while this worker runs is looked up anew."""
        if image_id not in self._toolchains:
            try:
                labels = self.client.images.get(image_id or image).labels
            except Exception as exc:  # DockerException, connection errors
                raise SandboxError(
                    f"cannot inspect grader image {image!r}: {_reason(exc)}") from exc
            self._toolchains[image_id] = image_toolchain(image, labels, image_id)
        return self._toolchains[image_id]

    def _wait(self, container, limits: SandboxLimits,
              should_stop: Optional[Callable[[], bool]] = None
              ) -> tuple[Optional[dict], Optional[str], Optional[int]]:
        """Wait for the end, or kill at the wall-time limit or when should_stop says so:
        (status, killed_for "time" | "stop" | None, pids hits)."""
        import docker.errors
        import requests.exceptions

        status: Optional[dict] = None
        killed_for: Optional[str] = None
        pids_hits: Optional[int] = None
        deadline = time.monotonic() + limits.timeout_seconds
        while status is None and killed_for is None:
            left = deadline - time.monotonic()
            wait = min(left, STOP_CHECK_SECONDS) if should_stop is not None else left
            try:
                status = container.wait(timeout=max(wait, 0.001))
                break
            except requests.exceptions.RequestException as exc:
                if not _is_timeout(exc):
                    raise SandboxError(
                        f"lost the Docker engine while waiting: {_reason(exc)}") from exc
            except docker.errors.DockerException as exc:
                raise SandboxError(f"lost the Docker engine while waiting: {_reason(exc)}") from exc
            if time.monotonic() >= deadline:
                killed_for = "time"
            elif should_stop is not None and should_stop():
                killed_for = "stop"
        if killed_for is not None:
            pids_hits = self._pids_hits(container)
            try:
                container.kill()
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as kill_exc:
                if "is not running" not in str(kill_exc):
                    raise
        if status is None:
            try:
                status = container.wait(timeout=KILL_GRACE)
            except Exception as exc:
                raise SandboxError(
                    f"container did not stop {KILL_GRACE}s after being killed: {_reason(exc)}"
                ) from exc
        return status, killed_for, pids_hits

    @staticmethod
    def _pids_hits(container) -> Optional[int]:
        try:
            container.reload()
            pid = int(container.attrs["State"]["Pid"])
        except Exception:
            return None
        return _pids_limit_reached(pid) if pid > 0 else None

    def scratch(self, folder: Path, limits: SandboxLimits):
        """The workspace and report on a tmpfs of the disk allowance, as under bwrap, when the
        engine resolves bind sources in this process's mount namespace (so it binds from the
        tmpfs): else each file is capped but not their sum, and graded code could fill the
        host's disk (or the disk the judge's report needs), and the grade says why."""
        from evalq.graders.sandbox.scratch import size_capped, uncapped

        why = engine_mounts_differ()
        return size_capped(folder, limits.disk_mb) if why is None else uncapped(folder, why)

    # ---- sweep -------------------------------------------------------------------------------

    def sweep(self, max_age_seconds: float = 0) -> int:
        """Remove this backend's containers past their deadline or older than max_age_seconds,
        then grading tmpfs mounts whose grading process is gone (sandbox/scratch.py)."""
        from evalq.graders.sandbox.scratch import sweep_mounts

        return self._sweep_containers(max_age_seconds) + sweep_mounts(max_age_seconds)

    def _sweep_containers(self, max_age_seconds: float) -> int:
        import docker.errors

        now = time.time()
        removed = 0
        try:
            containers = self.client.containers.list(
                all=True, filters={"label": f"{LABEL_SANDBOX}=1"}, ignore_removed=True)
        except docker.errors.DockerException as exc:
            raise SandboxError(f"cannot list containers to sweep: {_reason(exc)}") from exc
        for c in containers:
            try:
                created = float(c.labels.get(LABEL_CREATED, "0"))
                deadline = float(c.labels.get(LABEL_DEADLINE, "inf"))
            except ValueError:
                created, deadline = 0.0, float("inf")
            if now - created < max_age_seconds and now <= deadline:
                continue
            try:
                c.remove(force=True, v=True)
                removed += 1
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if "already in progress" not in str(exc):
                    raise SandboxError(f"cannot remove container {c.short_id}: {_reason(exc)}") from exc
        return removed


#: where dockerd records its pid (its default --pidfile)
ENGINE_PID_FILE = Path("/var/run/docker.pid")


def engine_mounts_differ() -> Optional[str]:
    """Why the engine might not see a tmpfs this process mounts (None: it will): a remote
    engine, or one whose mount namespace is not ours or cannot be told."""
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return "no total disk cap (the Docker engine is remote)"
    try:
        pid = int(ENGINE_PID_FILE.read_text().split()[0])
        same = os.readlink(f"/proc/{pid}/ns/mnt") == os.readlink("/proc/self/ns/mnt")
    except (OSError, ValueError, IndexError):
        return "no total disk cap (cannot tell the Docker engine's mount namespace)"
    return None if same else "no total disk cap (the Docker engine has another mount namespace)"


def _check_request(argv: list[str], env: dict[str, str]) -> None:
    if not argv or not all(isinstance(a, str) for a in argv):
        raise SandboxError(f"argv must be a non-empty list of strings, got {argv!r}")
    bad_env = [k for k, v in env.items() if not isinstance(k, str) or not isinstance(v, str)
               or not k or "=" in k]
    if bad_env:
        raise SandboxError(f"env names and values must be strings (bad: {bad_env!r})")


def _bind_mounts(workspace: Path, report_dir: Path, uid: int = SANDBOX_UID) -> dict:
    """The two writable host directories, handed to the sandbox's user."""
    mounts = {}
    for path, target in ((workspace, WORKSPACE_PATH), (report_dir, REPORT_PATH)):
        p = Path(path)
        if not p.is_dir() or p.is_symlink():
            raise SandboxError(f"{target} source {p} is not a directory")
        _make_writable_by_sandbox(p, uid)
        mounts[str(p.resolve())] = {"bind": target, "mode": "rw"}
    return mounts


def _container_config(argv: list[str], env: dict[str, str], limits: SandboxLimits, label: str,
                      mounts: dict, uid: int = SANDBOX_UID) -> dict:
    """The locked-down grading container: the hidden tests as the grader user, in /workspace."""
    return dict(locked_down(limits), command=list(argv), environment=dict(env),
                working_dir=WORKSPACE_PATH, user=f"{uid}:{uid}", volumes=mounts,
                init=True, hostname="sandbox", labels=container_labels(label, limits))


def _start(client, image: str, config: dict, limits: SandboxLimits):
    """Create the container, attach its output (before start, so nothing early is lost) and
    start it; returns (container, stream, reader). A half-made container is removed."""
    import docker.errors
    import requests.exceptions

    container = stream = None
    try:
        container = client.containers.create(image, **config)
        stream = container.attach(stdout=True, stderr=True, stream=True, logs=False, demux=True)

        def kill_for_output(stream=stream, container=container) -> None:
            # Hang up first: the engine will not finish a kill while its copy of the
            # container's output is blocked on a reader that stopped reading.
            try:
                stream.close()
            except Exception:
                pass
            try:
                container.kill()
            except Exception:  # already gone: fine
                pass

        reader = _OutputReader(stream, int(limits.output_limit_bytes), kill_for_output)
        reader.start()
        container.start()
        return container, stream, reader
    except BaseException as exc:
        _discard(container, stream)
        if isinstance(exc, docker.errors.ImageNotFound):
            raise SandboxError(f"grader image {image!r} not found; {BUILD_HINT}") from exc
        if isinstance(exc, (docker.errors.DockerException, requests.exceptions.RequestException)):
            raise SandboxError(
                f"could not start a container from {image!r}: {_reason(exc)}") from exc
        raise


def _reader_notes(reader: _OutputReader) -> list[str]:
    reader.join(timeout=KILL_GRACE)
    if reader.is_alive():
        return ["output stream did not close after the container ended"]
    if reader.error is not None:
        return [f"output stream error: {_reason(reader.error)}"]
    return []


def _state(container) -> dict:
    import docker.errors

    try:
        container.reload()
        return container.attrs.get("State", {})
    except docker.errors.DockerException:
        return {}


def _limit_hit(oom: bool, capped: bool, timed_out: bool, pids_hits: Optional[int],
               limits: SandboxLimits, notes: list[str]) -> Optional[str]:
    """Which limit ended the container (noted for the reason), if one did."""
    limit_hit: Optional[str] = None
    if oom:
        limit_hit = "memory"
        notes.append(f"killed: memory limit {limits.memory_mb} MB reached")
    elif capped:
        limit_hit = "output"
        notes.append(f"killed: output passed {limits.output_limit_bytes} bytes")
    elif timed_out and pids_hits:
        limit_hit = "pids"
        notes.append(f"pids limit {limits.pids} refused {pids_hits} forks; "
                     f"killed at the {limits.timeout_seconds:g}s time limit")
    elif timed_out:
        limit_hit = "time"
        notes.append(f"killed at the {limits.timeout_seconds:g}s time limit")
    if pids_hits and limit_hit != "pids":
        notes.append(f"pids limit {limits.pids} refused {pids_hits} forks")
    return limit_hit


def _result(status: Optional[dict], state: dict, reader: _OutputReader,
            killed_for: Optional[str], pids_hits: Optional[int], limits: SandboxLimits,
            notes: list[str]) -> ExecResult:
    """What the container's end means: exit status, signal, the limit it hit, its output."""
    exit_code: Optional[int] = status.get("StatusCode") if status else None
    if status and status.get("Error"):
        notes.append(f"engine: {status['Error'].get('Message', status['Error'])}")
    timed_out = killed_for == "time"
    limit_hit = _limit_hit(bool(state.get("OOMKilled")), reader.capped, timed_out, pids_hits,
                           limits, notes)
    signal: Optional[int] = None
    if timed_out or reader.capped or killed_for == "stop":
        exit_code, signal = None, 9  # we killed it: it has no exit status of its own
    elif exit_code is not None and 128 < exit_code < 128 + 65:
        signal = exit_code - 128  # the init process reports death by signal N as 128+N
    return ExecResult(
        exit_code=exit_code,
        stdout=bytes(reader.stdout).decode("utf-8", errors="replace"),
        stderr=bytes(reader.stderr).decode("utf-8", errors="replace"),
        duration_seconds=0.0,
        timed_out=timed_out,
        limit_hit=limit_hit,
        signal=signal,
        notes=notes,
    )


def _discard(container, stream) -> None:
    """Hang up and remove the container, whatever happened; else sweep() does."""
    import docker.errors

    if stream is not None:
        try:
            stream.close()
        except Exception:
            pass
    if container is not None:
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except Exception:
            # The engine is gone; sweep() removes it once it is back (it is labelled).
            pass


def _is_timeout(exc: BaseException) -> bool:
    import requests.exceptions

    if isinstance(exc, (requests.exceptions.ReadTimeout, requests.exceptions.Timeout)):
        return True
    # urllib3 wraps a read timeout on a unix socket as ConnectionError(ReadTimeoutError(...))
    return "timed out" in str(exc).lower()


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())
