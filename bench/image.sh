#!/usr/bin/env bash
# Builds Lookout's container image without any container registry and prints its size table (issue #28).
#
# The two base images are made from Debian's package mirror with one debootstrap (bookworm, minbase, plus python3,
# python3-venv, ca-certificates and binutils): the build stage's as it is, the runtime's without RUNTIME_DROPS (below),
# so only Debian's mirror and PyPI are reached. Needs root, podman, runc and debootstrap
# (`apt-get install -y podman buildah debootstrap runc`).
#
# Usage (as root, from the repository): bench/image.sh [--rebuild-base] [--build-arg NAME=VALUE ...]
# Environment: PODMAN (default "podman"; e.g. "podman --storage-driver vfs" where overlay mounts are refused),
# IMAGE (default localhost/lookout:bench), BASE_IMAGE (default localhost/lookout-base:bookworm-slim), BUILD_IMAGE
# (default localhost/lookout-build:bookworm),
# RUN_OPTS (extra `podman run` options). Inside a sandbox without systemd and with hybrid cgroups (as here):
#   PODMAN="podman --runtime runc" RUN_OPTS="--ulimit nofile=4096:4096 --ulimit nproc=4096:4096" bench/image.sh
set -euo pipefail

PODMAN=${PODMAN:-podman}
IMAGE=${IMAGE:-localhost/lookout:bench}
BASE_IMAGE=${BASE_IMAGE:-localhost/lookout-base:bookworm-slim}
BUILD_IMAGE=${BUILD_IMAGE:-localhost/lookout-build:bookworm}
RUN_OPTS=${RUN_OPTS:-}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
root=$(cd "$(dirname "$0")/.." && pwd)

rebuild_base=0
build_args=()
while [ $# -gt 0 ]; do
    case $1 in
        --rebuild-base) rebuild_base=1 ;;
        --build-arg) build_args+=(--build-arg "$2"); shift ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
    shift
done

mb() { awk -v b="$1" 'BEGIN { printf "%.0f MB", b / 1e6 }'; }

# Debian packages the runtime stage never uses: it runs the copied venv with Debian's Python and nothing else (no
# package manager, no perl, no pip or venv module, no TLS stack but OpenSSL's library, no binutils).
RUNTIME_DROPS="binutils binutils-common binutils-x86-64-linux-gnu libbinutils libctf0 libctf-nobfd0 libgprofng0
libjansson4 python3-venv python3.11-venv python3-pip-whl python3-setuptools-whl perl-base debconf adduser apt
libapt-pkg6.0 gpgv debian-archive-keyring libgnutls30 libp11-kit0 libtasn1-6 libhogweed6 libnettle8
libidn2-0 libunistring2 libseccomp2 openssl e2fsprogs libext2fs2 libss2 logsave dpkg"

if [ $rebuild_base = 1 ] || ! $PODMAN image exists "$BASE_IMAGE" || ! $PODMAN image exists "$BUILD_IMAGE"; then
    rootfs=$(mktemp -d)
    trap 'rm -rf "$rootfs"' EXIT
    started=$(date +%s)
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,binutils bookworm "$rootfs" \
        "$MIRROR" >/dev/null
    # The host's own extra certificate authorities (a TLS-intercepting proxy's, for one), so the build reaches PyPI
    # from here as the host does; a machine without any adds nothing.
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
    fi
    # What Debian's own slim images leave out: package caches and lists, documentation, manuals, translations.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
    tar -C "$rootfs" -c . | $PODMAN import --quiet - "$BUILD_IMAGE" >/dev/null
    # The runtime's base: the same tree without RUNTIME_DROPS (their files, as dpkg lists them), dpkg's and apt's
    # state, Python's pydoc topics and regression-test helpers.
    for package in $RUNTIME_DROPS; do
        chroot "$rootfs" dpkg-query -L "$package" 2>/dev/null || true
    done | sort -u | while read -r path; do
        # Files and links to files only: a folder, or a link to one (/lib, /bin), stays.
        if [ -n "$path" ] && [ ! -d "$rootfs$path" ]; then rm -f "$rootfs$path"; fi
    done
    rm -rf "$rootfs"/var/lib/dpkg "$rootfs"/var/lib/apt "$rootfs"/var/cache/apt "$rootfs"/var/cache/debconf \
        "$rootfs"/etc/apt "$rootfs"/usr/lib/python3.11/pydoc_data "$rootfs"/usr/lib/python3.11/test \
        "$rootfs"/var/log/*
    # Nothing left behind needs a library that went: every remaining ELF file resolves its libraries.
    missing=$(cd "$rootfs" && find usr -type f \( -perm -u+x -o -name '*.so*' \) -printf '/%p\0' \
        | xargs -0 -n 50 chroot "$rootfs" /usr/bin/ldd 2>/dev/null | grep 'not found' | sort -u || true)
    if [ -n "$missing" ]; then echo "the runtime base misses libraries: $missing" >&2; exit 1; fi
    tar -C "$rootfs" -c . | $PODMAN import --quiet - "$BASE_IMAGE" >/dev/null
    echo "base images $BUILD_IMAGE and $BASE_IMAGE made in $(($(date +%s) - started)) s"
fi

started=$(date +%s)
log=$(mktemp)
$PODMAN build --isolation chroot --format docker --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --build-arg "BUILD_IMAGE=$BUILD_IMAGE" "${build_args[@]}" \
    -t "$IMAGE" "$root" >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
rm -f "$log"
build_seconds=$(($(date +%s) - started))

# It runs, as its unprivileged user, and answers (`--health-cmd none`: no health checks for a one-off command).
# shellcheck disable=SC2086
$PODMAN run --rm --health-cmd none $RUN_OPTS "$IMAGE" lookout --help >/dev/null
# shellcheck disable=SC2086
user=$($PODMAN run --rm --health-cmd none $RUN_OPTS "$IMAGE" id -un)

base_size=$($PODMAN image inspect --format '{{.Size}}' "$BASE_IMAGE")
size=$($PODMAN image inspect --format '{{.Size}}' "$IMAGE")
mount=$($PODMAN image mount "$IMAGE")
venv="$mount/app/.venv"
site=$(echo "$venv"/lib/python3*/site-packages)
venv_size=$(du -sb "$venv" | cut -f1)
pyc_size=$(find "$venv" -name '*.pyc' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')

echo
echo "build: ${build_seconds} s; runs as: $user"
echo
echo "| part | size |"
echo "|---|---|"
echo "| image (\`podman image inspect --format '{{.Size}}'\`) | $(mb "$size") |"
echo "| … the base ($BASE_IMAGE) | $(mb "$base_size") |"
echo "| … the virtual environment (\`du -sb\`) | $(mb "$venv_size") |"
echo "| … … of which compiled bytecode (\`.pyc\`) | $(mb "$pyc_size") |"
du -sb "$site"/* | sort -rn | awk "NR <= 12" | while read -r bytes path; do
    echo "| … … $(basename "$path") | $(mb "$bytes") |"
done
$PODMAN image unmount "$IMAGE" >/dev/null
echo
$PODMAN history --format '{{.Size}}\t{{.CreatedBy}}' "$IMAGE" | awk -F'\t' '$1 != "0 B" { print "layer", $1, substr($2, 1, 90) }'
echo
# The image as a service: `lookout run` against the fake Telegram Bot API, /healthz and `lookout healthcheck`.
PODMAN="$PODMAN" IMAGE="$IMAGE" RUN_OPTS="$RUN_OPTS" uv run --project "$root" python "$root/bench/image_run.py"
