#!/opt/evalq/venv/bin/python3
"""Entry point of the evalq worker image: settings from the deployment's .env, the servers
waited for, an agent worker made able to seal its agents, then `evalq ARGS`.

compose.yaml hands every container the .env file as it is (never the shell's variables), so
the server URLs are put together here from the passwords and host names it holds; the
passwords themselves are then dropped from the environment evalq runs with.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from urllib.parse import quote

#: where an agent worker mounts a proc of process folders only (see seal_agents)
PID_PROC = "/run/evalq/proc"
CAP_SYS_ADMIN = 21
DOCKER_SOCKET = "/var/run/docker.sock"
#: plain .env keys that only serve to build the URLs below; never passed on
SECRETS = ("REDIS_PASSWORD", "POSTGRES_PASSWORD", "FLOWER_USER", "FLOWER_PASSWORD")


def say(message: str) -> None:
    print(f"evalq-entrypoint: {message}", file=sys.stderr, flush=True)


def settings(env: dict[str, str]) -> dict[str, str]:
    """The environment evalq runs with: empty keys unset, URLs derived where not given."""
    env = {k: v for k, v in env.items() if not (k.startswith("EVALQ_") and v == "")}
    if "EVALQ_BROKER_URL" not in env and env.get("REDIS_PASSWORD"):
        env["EVALQ_BROKER_URL"] = (
            f"redis://:{quote(env['REDIS_PASSWORD'], safe='')}@"
            f"{env.get('EVALQ_REDIS_HOST') or 'redis'}:{env.get('EVALQ_REDIS_PORT') or 6379}/0")
    if "EVALQ_DATABASE_URL" not in env and env.get("POSTGRES_PASSWORD"):
        env["EVALQ_DATABASE_URL"] = (
            f"postgresql+psycopg2://evalq:{quote(env['POSTGRES_PASSWORD'], safe='')}@"
            f"{env.get('EVALQ_POSTGRES_HOST') or 'postgres'}:"
            f"{env.get('EVALQ_POSTGRES_PORT') or 5432}/evalq")
    if "EVALQ_ARTIFACTS_URL" not in env and env.get("EVALQ_ARTIFACTS_DIR"):
        env["EVALQ_ARTIFACTS_URL"] = env["EVALQ_ARTIFACTS_DIR"]
    if env.get("EVALQ_GRADING_SCRATCH"):
        # the engine binds grading folders by their path here, which is the host's too
        env["TMPDIR"] = env["EVALQ_GRADING_SCRATCH"]
    if env.get("FLOWER_USER") and env.get("FLOWER_PASSWORD") and "FLOWER_BASIC_AUTH" not in env:
        env["FLOWER_BASIC_AUTH"] = f"{env['FLOWER_USER']}:{env['FLOWER_PASSWORD']}"
    return {k: v for k, v in env.items() if k not in SECRETS}


def check(argv: list[str], env: dict[str, str]) -> None:
    command = argv[0] if argv else ""
    if command in ("worker", "flower") and not env.get("EVALQ_BROKER_URL"):
        sys.exit("evalq-entrypoint: no broker: set REDIS_PASSWORD in .env "
                 "(or EVALQ_BROKER_URL=redis://:PASSWORD@HOST:6379/0)")
    if command == "worker" and not env.get("EVALQ_DATABASE_URL"):
        sys.exit("evalq-entrypoint: no results database: set POSTGRES_PASSWORD in .env "
                 "(workers on several machines need the shared PostgreSQL)")
    if command == "worker" and "agents" in " ".join(argv) \
            and env.get("EVALQ_AGENT_SANDBOX") == "docker" and not os.path.exists(DOCKER_SOCKET):
        sys.exit("evalq-entrypoint: EVALQ_AGENT_SANDBOX=docker: an agent worker in compose has no "
                 "Docker engine (its socket would be root on the host); set "
                 "EVALQ_AGENT_SANDBOX=bwrap in .env, or run agent workers with the Docker "
                 "sandbox on the host (`evalq worker --queues agents`)")
    if command == "flower" and not env.get("FLOWER_BASIC_AUTH"):
        sys.exit("evalq-entrypoint: Flower needs FLOWER_USER and FLOWER_PASSWORD in .env")


def wait_for_servers(env: dict[str, str]) -> None:
    """Up to EVALQ_WAIT_SECONDS for Redis and PostgreSQL, so start order does not matter."""
    deadline = time.monotonic() + float(env.get("EVALQ_WAIT_SECONDS", "60"))
    while (problem := _not_ready(env)) is not None:
        if time.monotonic() > deadline:
            sys.exit(f"evalq-entrypoint: servers not reachable: {problem}")
        time.sleep(1)


def _not_ready(env: dict[str, str]) -> str | None:
    try:
        broker = env.get("EVALQ_BROKER_URL", "")
        if broker.startswith(("redis://", "rediss://")):
            import redis

            redis.Redis.from_url(broker, socket_timeout=2).ping()
        database = env.get("EVALQ_DATABASE_URL", "")
        if database.startswith("postgresql"):
            import sqlalchemy

            with sqlalchemy.create_engine(database).connect():
                pass
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not yet"; the URL stays unprinted
        return type(exc).__name__


def has_capability(bit: int) -> bool:
    for line in open("/proc/self/status"):
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


def seal_agents(argv: list[str], env: dict[str, str]) -> list[str]:
    """An agent worker's bubblewrap makes a user namespace per agent, whose fresh /proc the
    kernel refuses while every proc in the container has paths masked over (as Docker's has).
    With CAP_SYS_ADMIN (compose.yaml adds it to agent workers only) a proc of process folders
    only is mounted apart, which shows the kernel a whole proc without giving the worker
    /proc/sys or sysrq-trigger; then the capability is dropped for good, so evalq itself runs
    as root without it, and bwrap's namespaces are made by the unprivileged agent user."""
    command = ["evalq", *argv]
    if not has_capability(CAP_SYS_ADMIN):
        return command
    agents = argv[:1] == ["worker"] and "agents" in " ".join(argv) \
        and env.get("EVALQ_AGENT_SANDBOX", "bwrap") == "bwrap"
    if agents and not os.path.ismount(PID_PROC):
        os.makedirs(PID_PROC, mode=0o700, exist_ok=True)
        problem = mount_pid_proc(PID_PROC)
        if problem:
            say(f"could not mount {PID_PROC} ({problem}): agents' sandboxes may fail to start")
    return ["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--", *command]


def mount_pid_proc(target: str) -> str | None:
    """mount -t proc -o subset=pid (through libc: the image needs no mount(8))."""
    libc = ctypes.CDLL(None, use_errno=True)
    flags = 0x2 | 0x4 | 0x8  # MS_NOSUID | MS_NODEV | MS_NOEXEC
    if libc.mount(b"evalq-pid-proc", target.encode(), b"proc", flags, b"subset=pid") != 0:
        return os.strerror(ctypes.get_errno())
    return None


def main() -> None:
    argv = sys.argv[1:] or ["worker", "--queues", "agents,grading,results"]
    env = settings(dict(os.environ))
    check(argv, env)
    if argv[0] in ("worker", "flower"):
        wait_for_servers(env)
    command = seal_agents(argv, env)
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
