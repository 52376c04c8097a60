#!/usr/bin/env bash
# Build the images compose.yaml runs, with no image registry at all:
#
#   bash scripts/build-images.sh [--index-url URL] [--ca-bundle FILE] [--base-image IMAGE]
#
#   evalq-worker:local    every evalq service (workers/Dockerfile)
#   evalq-redis:local     the broker           (workers/servers/redis.Dockerfile)
#   evalq-postgres:local  the results database (workers/servers/postgres.Dockerfile)
#
# Their bases are Debian root file systems debootstrapped from this machine's own apt mirror
# (scripts/build-grader-images.sh worker-base redis-base postgres-base). The Python packages
# evalq needs are downloaded beforehand into workers/wheelhouse/ by the base image's own pip on
# this host's network (through the index and CA bundle given), so no build step needs one.
# Set the images compose uses in .env: EVALQ_IMAGE, EVALQ_REDIS_IMAGE, EVALQ_POSTGRES_IMAGE.
#
#   --index-url URL     the Python package index (a mirror); default: this host's pip setting
#   --ca-bundle FILE    CA certificates to trust for it; default: this host's pip setting (`cert`)
#   --base-image IMAGE  build the worker on IMAGE (a Debian-like image with python3 and its venv
#                       module, present locally) instead of the local Debian base
#
# Environment: those of scripts/build-grader-images.sh (EVALQ_DEBIAN_MIRROR, EVALQ_GRADER_CACHE).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "build-images: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

index_url=""; ca_bundle=""; base_image=""
while [ $# -gt 0 ]; do
    case $1 in
        --index-url) index_url=${2:?--index-url needs a URL}; shift 2 ;;
        --ca-bundle) ca_bundle=${2:?--ca-bundle needs a file}; shift 2 ;;
        --base-image) base_image=${2:?--base-image needs an image}; shift 2 ;;
        -h|--help) sed -n '2,/^[^#]/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (expected --index-url URL, --ca-bundle FILE or --base-image IMAGE)" ;;
    esac
done
# by default, the index and CA bundle this host's pip is configured with
host_pip() {  # KEY: pip's own precedence (its environment variables first, then its files)
    python3 -m pip config list 2>/dev/null | sed -n "s/^[^.]*\.$1='\(.*\)'\$/\1/p" | head -n1
}
index_url=${index_url:-$(host_pip index-url)}
ca_bundle=${ca_bundle:-$(host_pip cert)}
[ -z "$ca_bundle" ] || [ -r "$ca_bundle" ] || die "--ca-bundle $ca_bundle: no such readable file"
command -v docker >/dev/null 2>&1 || die "no docker CLI: run 'bash scripts/ensure-docker.sh' first"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer: run 'bash scripts/ensure-docker.sh' first"

# ---- 1. base images from the local apt mirror ------------------------------------------------
bases=(redis-base postgres-base)
[ -n "$base_image" ] || bases+=(worker-base)
bash scripts/build-grader-images.sh "${bases[@]}"
base_image=${base_image:-evalq-worker-base:local}

# ---- 2. the wheelhouse ------------------------------------------------------------------------
# Made by the base image's own pip (so every wheel and environment marker fits its Python), on
# this host's network, into the build context; the build itself then installs with no network.
wheelhouse=workers/wheelhouse
# what the wheels were fetched for: the requirements, the base's interpreter, the index
key=$( { cat pyproject.toml; docker image inspect -f '{{.Id}}' "$base_image"; echo "$index_url"; } \
    | sha256sum | cut -c1-16)
if [ "$(cat "$wheelhouse/.key" 2>/dev/null)" = "$key" ] && ls "$wheelhouse"/*.whl >/dev/null 2>&1; then
    say "wheelhouse up to date ($key)"
else
    find "$wheelhouse" -maxdepth 1 \( -name '*.whl' -o -name ca.pem -o -name .key \) -delete
    # as pip's environment variables, which also reach the pip that installs build requirements
    pip_env=(-e HOME=/tmp -e PIP_DISABLE_PIP_VERSION_CHECK=1)
    mounts=(-v "$PWD:/src:ro" -v "$PWD/$wheelhouse:/wheelhouse")
    [ -z "$index_url" ] || pip_env+=(-e "PIP_INDEX_URL=$index_url")
    if [ -n "$ca_bundle" ]; then
        mounts+=(-v "$(realpath "$ca_bundle"):/ca.pem:ro"); pip_env+=(-e PIP_CERT=/ca.pem)
    fi
    say "wheelhouse: evalq's dependencies for $base_image's Python into $wheelhouse"
    # setuptools and wheel too: the image builds evalq from this checkout's source, offline
    docker run --rm --network host --user "$(id -u):$(id -g)" "${pip_env[@]}" "${mounts[@]}" \
        --entrypoint sh "$base_image" -c 'python3 -m venv /tmp/pip && mkdir /tmp/evalq-src \
            && cp -r /src/pyproject.toml /src/README.md /src/evalq /tmp/evalq-src/ \
            && /tmp/pip/bin/pip wheel -q --wheel-dir /wheelhouse "/tmp/evalq-src[object-store]" setuptools wheel \
            && rm -f /wheelhouse/evalq-*.whl' \
        || die "the base image's pip could not fetch evalq's dependencies (set --index-url / --ca-bundle)"
    echo "$key" > "$wheelhouse/.key"
fi
rm -f "$wheelhouse/ca.pem"
[ -z "$ca_bundle" ] || cp "$ca_bundle" "$wheelhouse/ca.pem"

# ---- 3. the images -----------------------------------------------------------------------------
build() {  # tag dockerfile base
    say "building $1 on $3"
    docker build -q -f "$2" --build-arg "BASE_IMAGE=$3" ${index_url:+--build-arg "PIP_INDEX_URL=$index_url"} \
        -t "$1" . >/dev/null || die "docker build of $1 failed"
}
build evalq-worker:local workers/Dockerfile "$base_image"
build evalq-redis:local workers/servers/redis.Dockerfile evalq-redis-base:local
build evalq-postgres:local workers/servers/postgres.Dockerfile evalq-postgres-base:local
docker run --rm --network none --entrypoint sh evalq-worker:local -c \
    'evalq --version && python3 -c "import s3fs"' >&2 \
    || die "evalq-worker:local does not run evalq, or lacks the object-store extra"
say "done: evalq-worker:local, evalq-redis:local, evalq-postgres:local"
