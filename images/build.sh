#!/usr/bin/env bash
# Builds an evaluation image: `images/build.sh cpu` (offline: no registry) or `images/build.sh gpu`.
#
# cpu: debootstrap a minimal Debian bookworm (Python 3.11) into a folder, `docker import` it, download
#      the pinned wheels on the host (pip checks every hash), then `docker build` on top of the imported
#      image's id. The rootfs tarball and the wheels are cached under build/images/ (git-ignored).
# gpu: `docker build` of images/gpu/Dockerfile, whose base is pinned by digest and whose pip packages
#      are pinned by hash; needs a registry (Docker Hub) and PyPI.
# Both copy the kbench worker (runner/worker/ and the runner modules it imports) into the image and label
# it with the hash of those files and the protocol version. `make image-lock` then records the image id.
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-}
case "$kind" in
    cpu | gpu) ;;
    *) echo "usage: images/build.sh cpu|gpu" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-.venv/bin/python}
CACHE=build/images
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
version=$("$PYTHON" -c "import runner; print(runner.__version__)")
tag="kbench-$kind:$version"
worker_hash=$("$PYTHON" -m runner.executors.image_lock worker-hash)
protocol=$("$PYTHON" -c "from runner.worker.protocol import PROTOCOL_VERSION; print(PROTOCOL_VERSION)")
started=$(date +%s)

docker info >/dev/null 2>&1 || { echo "images/build.sh: no Docker engine answers (start dockerd)" >&2; exit 1; }

# The build context: the Dockerfile, the pinned requirements and the worker with the kbench modules
# it imports (image_lock.py worker-files), nothing else of the repo.
context="$CACHE/context-$kind"
rm -rf "$context"
mkdir -p "$context"
cp "images/$kind/Dockerfile" "images/$kind/requirements.txt" "$context/"
"$PYTHON" -m runner.executors.image_lock worker-files | while read -r file; do
    mkdir -p "$context/$(dirname "$file")"
    cp "$file" "$context/$file"
done

if [ "$kind" = gpu ]; then
    from=$(sed -n 's/^FROM \([^ ]*\).*/\1/p' images/gpu/Dockerfile | head -1)
    case "$from" in
        *@sha256:[0-9a-f]*) ;;
        *) echo "images/build.sh: the GPU base '$from' is not pinned by digest; refusing to build" >&2; exit 1 ;;
    esac
    DOCKER_BUILDKIT=0 docker build --quiet -t "$tag" \
        --build-arg WORKER_HASH="$worker_hash" --build-arg PROTOCOL="$protocol" "$context"
else
    rootfs_tar="$CACHE/rootfs-$SUITE.tar"
    if [ ! -s "$rootfs_tar" ]; then
        command -v debootstrap >/dev/null || { echo "images/build.sh: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
        rootfs="$CACHE/rootfs-$SUITE"
        rm -rf "$rootfs"
        echo "debootstrap $SUITE (minbase) from $MIRROR"
        debootstrap --variant=minbase --include=python3,python3-venv,python3-dev,g++ "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log"
        # Package caches, docs and locales are not needed to run the worker.
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
            "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*
        tar --numeric-owner --sort=name -C "$rootfs" -cf "$rootfs_tar.tmp" .
        mv "$rootfs_tar.tmp" "$rootfs_tar"
        rm -rf "$rootfs"
    fi
    # The imported base is named by the tarball's hash: the same tarball always gives the same base.
    rootfs_sha=$(sha256sum "$rootfs_tar" | cut -c1-16)
    base_tag="kbench-rootfs:$SUITE-$rootfs_sha"
    if ! docker image inspect "$base_tag" >/dev/null 2>&1; then
        docker import --message "debootstrap $SUITE minbase (kbench images/build.sh)" "$rootfs_tar" "$base_tag" >/dev/null
    fi
    base_id=$(docker image inspect --format '{{.Id}}' "$base_tag")
    # The wheels, downloaded on the host; pip refuses any whose hash differs from requirements.txt.
    mkdir -p "$CACHE/wheels-cpu"
    # (grep: this machine's pip configuration names index folders that do not all exist.)
    "$PYTHON" -m pip download --quiet --require-hashes --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -r images/cpu/requirements.txt -d "$CACHE/wheels-cpu" 2> >(grep -v "is ignored: it is neither" >&2)
    mkdir -p "$context/wheels"
    while read -r wheel; do
        ln "$CACHE/wheels-cpu/$wheel" "$context/wheels/$wheel" 2>/dev/null || cp "$CACHE/wheels-cpu/$wheel" "$context/wheels/"
    done < <(ls "$CACHE/wheels-cpu")
    DOCKER_BUILDKIT=0 docker build --quiet -t "$tag" --build-arg BASE="$base_id" \
        --build-arg WORKER_HASH="$worker_hash" --build-arg PROTOCOL="$protocol" "$context" >/dev/null
    # The install stage (wheels and all) stays behind, untagged: it is the cache that makes a rebuild
    # after a worker change take seconds. `docker image prune --filter label=org.kbench.stage=install`
    # removes it.
fi
rm -rf "$context"
size=$(docker image inspect --format '{{.Size}}' "$tag")
echo "built $tag $(docker image inspect --format '{{.Id}}' "$tag") ($((size / 1000000)) MB) in $(($(date +%s) - started)) s"
echo "record it in manifests/images.lock with: make image-lock"
