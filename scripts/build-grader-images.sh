#!/usr/bin/env bash
# Build the local grader images without any image registry (DESIGN.md, "Docker here").
#
#   bash scripts/build-grader-images.sh [--force] [--no-cache] [--rootfs-only] [python] [node] [make] [agent]
#   bash scripts/build-grader-images.sh worker-base redis-base postgres-base
#
# `agent` is evalq-agent:local, the root of the Docker agent sandbox (evalq/workers/sandbox/):
# the toolchains agents need (python3, nodejs, bash, coreutils, git, patch, ripgrep); the agent's own
# install (npm prefix, virtualenv) is bind-mounted read-only at run time. --rootfs-only with no
# name builds the grading toolchains only (the bubblewrap agent sandbox uses the host's).
# worker-base, redis-base and postgres-base are the local base images of the deployment
# (scripts/build-images.sh builds the compose images on them); they are built only when named.
#
# Each toolchain is a Debian minbase root file system made by debootstrap from the machine's
# own apt mirror (read from /etc/apt at run time, never written into the repository),
# given a non-root user (nobody, 65534:65534) and the /workspace and /report directories.
# It is kept as a tree, $CACHE/rootfs/NAME, with its digest beside it in NAME.digest
# (sha256 of a canonical tar of the tree: names, modes, owners, contents; no times): the
# bubblewrap backend binds that tree read-only as its root, and the Docker image is imported
# from the same tree and carries the digest as the label org.evalq.rootfs-digest, so both
# backends grade with one toolchain and every grade records which.
# graders/Dockerfile.* build similar images from public base images for machines that can
# pull (their grades record the image id instead).
#
#   --force        re-import an image even if it is up to date (from the cached rootfs)
#   --no-cache     also redo debootstrap instead of using the cached rootfs tarball
#   --rootfs-only  build the rootfs trees only (for bubblewrap on a host with no Docker engine)
#
# Environment:
#   EVALQ_DEBIAN_MIRROR   use this mirror instead of the one in /etc/apt
#   EVALQ_DEBIAN_SUITE    Debian release of the images (default bookworm)
#   EVALQ_GRADER_CACHE    cache directory (default /var/cache/evalq-graders)
set -euo pipefail

SUITE=${EVALQ_DEBIAN_SUITE:-bookworm}
CACHE=${EVALQ_GRADER_CACHE:-/var/cache/evalq-graders}
# Bump when the rootfs customisation below changes, so cached tarballs are rebuilt.
RECIPE_VERSION=1

# name -> packages given to debootstrap --include
declare -A PACKAGES=(
    [python]="python3,python3-pytest"
    [node]="nodejs,python3,python3-pytest"
    [make]="make,gcc,libc6-dev,bash,python3,python3-pytest"
    [agent]="python3,nodejs,bash,coreutils,git,patch,ripgrep"
    [worker-base]="python3,python3-venv,bubblewrap,libseccomp2,git,patch,tini,ca-certificates,procps"
    [redis-base]="redis-server"
    [postgres-base]="postgresql-15,postgresql-client-15"
)
# python3 + pytest in every grading toolchain: the judge is Python whatever the subject is.
GRADERS=(python node make)
ALL=("${GRADERS[@]}" agent)
# the deployment's base images (root file systems the compose images are built on)
is_base() { case $1 in *-base) return 0 ;; esac; return 1; }

# what else a rootfs recipe does for one image (part of its cache key)
recipe_extra() { if [ "$1" = agent ]; then echo "root-0755"; fi; }
image_of() {
    case $1 in
        agent) echo "evalq-agent:local" ;;
        *-base) echo "evalq-$1:local" ;;
        *) echo "evalq-grader-$1:local" ;;
    esac
}

say() { echo "build-grader-images: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

force=0; nocache=0; rootfs_only=0; wanted=()
for arg in "$@"; do
    case $arg in
        --force) force=1 ;;
        --no-cache) nocache=1; force=1 ;;
        --rootfs-only) rootfs_only=1 ;;
        -h|--help) sed -n '2,/^[^#]/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
        python|node|make|agent|worker-base|redis-base|postgres-base) wanted+=("$arg") ;;
        *) die "unknown argument '$arg' (expected --force, --no-cache, --rootfs-only, python, node, make, agent, worker-base, redis-base or postgres-base)" ;;
    esac
done
if [ "${#wanted[@]}" -eq 0 ]; then
    if [ "$rootfs_only" -eq 1 ]; then wanted=("${GRADERS[@]}"); else wanted=("${ALL[@]}"); fi
fi

recipe_key() {  # name: what the cached tarball and tree were made from
    { printf '%s\n' "$RECIPE_VERSION" "$SUITE" "${PACKAGES[$1]}"; recipe_extra "$1"; } \
        | sha256sum | cut -c1-16
}
tree_current() {  # name
    [ -d "$CACHE/rootfs/$1/usr" ] && [ -s "$CACHE/rootfs/$1.digest" ] \
        && [ "$(cat "$CACHE/rootfs/$1.key" 2>/dev/null)" = "$(recipe_key "$1")" ]
}
if [ "$rootfs_only" -eq 1 ] && [ "$force" -eq 0 ]; then
    stale=()
    for name in "${wanted[@]}"; do tree_current "$name" || stale+=("$name"); done
    if [ "${#stale[@]}" -eq 0 ]; then
        say "rootfs trees up to date in $CACHE/rootfs: ${wanted[*]}"
        exit 0
    fi
    wanted=("${stale[@]}")
fi

[ "$(id -u)" -eq 0 ] || die "run as root: debootstrap needs it"
tools=(debootstrap tar sha256sum); [ "$rootfs_only" -eq 1 ] || tools+=(docker)
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found: run 'bash scripts/ensure-docker.sh' first"
done
if [ "$rootfs_only" -eq 0 ]; then
    docker info >/dev/null 2>&1 || die "the Docker engine does not answer: run 'bash scripts/ensure-docker.sh' first (or use --rootfs-only)"
fi

# ---- the mirror, from this machine's apt configuration -----------------------------------
# Prefer a source that carries SUITE itself (not -security/-updates); fall back to any deb source.
find_mirror() {
    local f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        uri=$(awk -v suite="$SUITE" '
            function flush() {
                if (uris != "" && types ~ /(^| )deb( |$)/) {
                    if (first == "") first = uris
                    if (match_ == "" && (" " suites " ") ~ (" " suite " ")) match_ = uris
                }
                uris = ""; suites = ""; types = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "uris:"   { uris = $2 }
            tolower($1) == "suites:" { $1 = ""; suites = $0 }
            tolower($1) == "types:"  { $1 = ""; types = $0 }
            END { flush(); print (match_ != "" ? match_ : first) }
        ' "$f")
        [ -n "$uri" ] && { echo "$uri"; return; }
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        # deb [options] URI suite components...
        uri=$(awk -v suite="$SUITE" '
            $1 == "deb" {
                i = 2; if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if (first == "") first = $i
                if (match_ == "" && $(i+1) == suite) match_ = $i
            }
            END { print (match_ != "" ? match_ : first) }
        ' "$f")
        [ -n "$uri" ] && { echo "$uri"; return; }
    done
}

MIRROR=${EVALQ_DEBIAN_MIRROR:-$(find_mirror)}
[ -n "$MIRROR" ] || die "no Debian mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; set EVALQ_DEBIAN_MIRROR"

mkdir -p "$CACHE" "$CACHE/rootfs"
chmod 0755 "$CACHE" "$CACHE/rootfs"  # the sandbox user must reach the trees

# ---- one image (each runs in a subshell of its own, the images in parallel) ---------------
ROOTFS=""
cleanup() {
    if [ -n "$ROOTFS" ] && [ -d "$ROOTFS" ]; then
        # debootstrap may leave these mounted if it was interrupted
        for m in proc sys dev/pts; do umount -l "$ROOTFS/$m" 2>/dev/null || true; done
        rm -rf --one-file-system "$ROOTFS"
    fi
}

make_rootfs() {  # name pkgs tarball
    local name=$1 pkgs=$2 tarball=$3 log="$CACHE/$name.debootstrap.log"
    # In $WORK (a tmpfs of our own, see below), not /tmp: /tmp may be small or noexec.
    # One .deb cache per image, so parallel builds never write the same file.
    mkdir -p "$CACHE/debs-$name"
    ROOTFS=$(mktemp -d "$WORK/rootfs-$name.XXXXXX")
    say "$name: debootstrap $SUITE (+$pkgs) from $MIRROR, log: $log"
    if ! debootstrap --variant=minbase --include="$pkgs" --cache-dir="$CACHE/debs-$name" \
            "$SUITE" "$ROOTFS" "$MIRROR" >"$log" 2>&1; then
        tail -n 20 "$log" | sed "s/^/$name: /" >&2
        die "$name: debootstrap failed; full log in $log"
    fi
    # The grader user is nobody:nogroup (65534), which base-passwd creates; the sandbox
    # bind-mounts the workspace and report over these directories.
    grep -q '^nobody:x:65534:65534:' "$ROOTFS/etc/passwd" || die "$name: no nobody (65534) user in the rootfs"
    is_base "$name" || install -d -m 0755 -o 65534 -g 65534 "$ROOTFS/workspace" "$ROOTFS/report"
    chmod 1777 "$ROOTFS/tmp"
    # the agent sandbox runs as 65534 and must reach agents installed under /root (bind-mounted)
    if [ "$name" = agent ]; then chmod 0755 "$ROOTFS/root"; fi
    # Trim what a grader never needs.
    rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
           "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* \
           "$ROOTFS"/var/log/*.log "$ROOTFS"/debootstrap
    tar --numeric-owner --xattrs -C "$ROOTFS" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf --one-file-system "$ROOTFS"; ROOTFS=""
}

smoke_test() {  # name image: the toolchain runs as the grader user with no network
    local name=$1 image=$2 check
    case $name in
        python) check='python3 --version && python3 -m pytest --version' ;;
        node)   check='python3 -m pytest --version && node --version && cd /tmp && echo "require(\"node:test\")(\"ok\", () => {})" > t.test.js && node --test --test-reporter=tap t.test.js >/dev/null' ;;
        agent)  check='python3 --version && node --version && git --version && patch --version | head -n1 && rg --version | head -n1' ;;
        make)   check='python3 -m pytest --version && make --version | head -n1 && gcc --version | head -n1 && cd /tmp && printf "int main(void){return 0;}\n" > t.c && gcc -o t t.c && ./t' ;;
        worker-base)   check='python3 -m venv --help >/dev/null && bwrap --version && tini --version && git --version && setpriv --version' ;;
        redis-base)    check='redis-server --version && redis-cli --version' ;;
        postgres-base) check='/usr/lib/postgresql/15/bin/postgres --version && pg_isready --version' ;;
    esac
    if is_base "$name"; then  # a base has no grader user or folders; just its tools
        docker run --rm --network none "$image" sh -c "$check" 2>&1 | sed "s/^/$name: /" >&2
        [ "${PIPESTATUS[0]}" -eq 0 ] || die "$name: smoke test of $image failed"
        return
    fi
    docker run --rm --network none --user 65534:65534 --read-only --tmpfs /tmp:exec "$image" \
        sh -c "test -d /workspace && test -d /report && [ \"\$(id -u)\" = 65534 ] && $check" 2>&1 \
        | sed "s/^/$name: /" >&2
    [ "${PIPESTATUS[0]}" -eq 0 ] || die "$name: smoke test of $image failed"
}

tree_digest() {  # dir: sha256 of a canonical tar (sorted names, numeric owners, no times)
    printf 'sha256:%s\n' "$(tar --format=gnu --sort=name --numeric-owner --mtime=@0 \
        -C "$1" -cf - . | sha256sum | cut -d' ' -f1)"
}

install_tree() {  # name key tarball: $CACHE/rootfs/NAME from the tarball, with NAME.key and NAME.digest
    local name=$1 key=$2 tarball=$3 tree="$CACHE/rootfs/$1" new old
    if [ "$nocache" -eq 0 ] && tree_current "$name"; then
        return
    fi
    new="$tree.new.$$"; old="$tree.old.$$"
    rm -rf --one-file-system "$new"; mkdir -p "$new"
    tar --numeric-owner --xattrs -xpf "$tarball" -C "$new" || die "$name: cannot unpack $tarball"
    chmod 0755 "$new"
    tree_digest "$new" > "$new.digest"
    # Swap in: a grading that bound the old tree keeps its mount; new gradings see the new one.
    [ -d "$tree" ] && mv "$tree" "$old"
    mv "$new" "$tree"; mv "$new.digest" "$tree.digest"; echo "$key" > "$tree.key"
    rm -rf --one-file-system "$old"
    say "$name: rootfs tree $tree ($(cat "$tree.digest"))"
}

image_current() {  # name digest: whether the image was imported from this very tree
    [ "$(docker image inspect --format '{{ index .Config.Labels "org.evalq.rootfs-digest" }}' \
        "$(image_of "$1")" 2>/dev/null)" = "$2" ]
}

build_one() {  # name
    local name=$1 image pkgs=${PACKAGES[$1]} start=$SECONDS key tarball old_id new_id digest
    trap cleanup EXIT
    image=$(image_of "$name")
    key=$(recipe_key "$name")
    tarball="$CACHE/rootfs-$name-$key.tar"
    if [ "$nocache" -eq 1 ] || [ ! -s "$tarball" ]; then
        make_rootfs "$name" "$pkgs" "$tarball"
    fi
    install_tree "$name" "$key" "$tarball"
    for stale in "$CACHE/rootfs-$name"-*.tar; do  # tarballs of an older recipe
        [ "$stale" = "$tarball" ] || rm -f "$stale"
    done
    digest=$(cat "$CACHE/rootfs/$name.digest")
    [ "$rootfs_only" -eq 0 ] || return 0
    if [ "$force" -eq 0 ] && image_current "$name" "$digest"; then
        say "$name: $image is up to date ($digest)"
        return 0
    fi
    old_id=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
    # graders run as nobody in /workspace; a base keeps root and / for the image built on it
    local user='USER 65534:65534' workdir='WORKDIR /workspace'
    if is_base "$name"; then user='USER 0:0'; workdir='WORKDIR /'; fi
    tar --numeric-owner --xattrs -C "$CACHE/rootfs/$name" -cf - . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change "$user" \
        --change "$workdir" \
        --change 'CMD ["/bin/sh"]' \
        --change "LABEL org.evalq.grader=$name org.evalq.rootfs-key=$key org.evalq.rootfs-digest=$digest" \
        - "$image" >/dev/null || die "$name: docker import failed"
    smoke_test "$name" "$image"
    new_id=$(docker image inspect --format '{{.Id}}' "$image")
    if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
        docker image rm "$old_id" >/dev/null 2>&1 || true  # the replaced image, if unused
    fi
    say "$name: built $image in $((SECONDS - start)) s"
}

# Build the root file systems on a tmpfs of their own: dpkg fsyncs every file it unpacks,
# which on a virtual disk costs more than everything else together (and serialises the
# parallel builds). Set EVALQ_BUILD_TMPFS=0 to build on disk instead.
WORK="$CACHE/work"
mkdir -p "$WORK"
work_mounted=0
unmount_work() { [ "$work_mounted" -eq 1 ] && umount -l "$WORK" 2>/dev/null || true; }
trap unmount_work EXIT
if [ "${EVALQ_BUILD_TMPFS:-1}" != 0 ] && ! mountpoint -q "$WORK"; then
    if mount -t tmpfs -o "size=${EVALQ_BUILD_TMPFS_SIZE:-4g},mode=0755" evalq-grader-build "$WORK"; then
        work_mounted=1
    else
        say "NOTE: could not mount a tmpfs on $WORK; building on disk (slower)"
    fi
fi

pids=(); names=()
for name in "${wanted[@]}"; do
    ( build_one "$name" ) &
    pids+=($!); names+=("$name")
done
failed=()
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=("${names[$i]}")
done
[ "${#failed[@]}" -eq 0 ] || die "failed to build: ${failed[*]}"
[ "${#names[@]}" -eq 0 ] || say "done in $SECONDS s: ${names[*]}"
