#!/usr/bin/env bash
# Builds Lookout's container image without any container registry and prints its size table (issue #28).
#
# The base image is made from Debian's package mirror with debootstrap (bookworm, minbase, plus python3,
# python3-venv and ca-certificates), so only Debian's mirror and PyPI are reached. Needs root, podman and
# debootstrap (`apt-get install -y podman buildah debootstrap`).
#
# Usage (as root, from the repository): bench/image.sh [--rebuild-base] [--build-arg NAME=VALUE ...]
# Environment: PODMAN (default "podman"; e.g. "podman --storage-driver vfs" where overlay mounts are refused),
# IMAGE (default localhost/lookout:bench), BASE_IMAGE (default localhost/lookout-base:bookworm),
# RUN_OPTS (extra `podman run` options). Inside a sandbox without systemd and with hybrid cgroups (as here):
#   PODMAN="podman --runtime runc" RUN_OPTS="--ulimit nofile=4096:4096 --ulimit nproc=4096:4096" bench/image.sh
set -euo pipefail

PODMAN=${PODMAN:-podman}
IMAGE=${IMAGE:-localhost/lookout:bench}
BASE_IMAGE=${BASE_IMAGE:-localhost/lookout-base:bookworm}
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

if [ $rebuild_base = 1 ] || ! $PODMAN image exists "$BASE_IMAGE"; then
    rootfs=$(mktemp -d)
    trap 'rm -rf "$rootfs"' EXIT
    started=$(date +%s)
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$MIRROR" \
        >/dev/null
    # The host's own extra certificate authorities (a TLS-intercepting proxy's, for one), so the build reaches PyPI
    # from here as the host does; a machine without any adds nothing.
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
    fi
    # What Debian's own slim images leave out: package caches and lists, documentation, manuals, translations.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
    tar -C "$rootfs" -c . | $PODMAN import --quiet - "$BASE_IMAGE" >/dev/null
    echo "base image $BASE_IMAGE made in $(($(date +%s) - started)) s"
fi

started=$(date +%s)
log=$(mktemp)
$PODMAN build --isolation chroot --format docker --build-arg "BASE_IMAGE=$BASE_IMAGE" "${build_args[@]}" \
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
