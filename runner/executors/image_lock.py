"""The image lock, ``manifests/images.lock``: which image id each evaluation image must have.

Owns reading and writing the lock, and which files of kbench an image carries (the worker and
what it imports) with their hash, which images carry as a label. ``python -m
runner.executors.image_lock lock`` (``make image-lock``) records the id of every locked image
present on this engine; ``worker-files`` and ``worker-hash`` serve ``images/build.sh``. It never
builds or pulls anything.
"""

from __future__ import annotations

import ast
import hashlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from runner import __version__
from runner.paths import MANIFESTS_DIR, REPO_ROOT

LOCK_PATH = MANIFESTS_DIR / "images.lock"
LABEL_PROTOCOL = "org.kbench.protocol"
LABEL_WORKER_HASH = "org.kbench.worker_hash"
LABEL_IMAGE = "org.kbench.image"

_HEADER = """\
# The evaluation images and the ids they must have. Written by `make image-lock`
# (runner/executors/image_lock.py); the docker executor refuses an image whose id differs
# unless executor.allow_unlocked_image=true, and then records that it was told to.
# `id` is the image id (sha256 of its configuration): content-addressed, but a rebuild gives
# a new one (timestamps), so a machine that builds its own image locks its own build.
"""


class LockError(ValueError):
    pass


@dataclass(frozen=True)
class LockedImage:
    name: str
    tag: str
    id: str | None
    base: str
    worker_hash: str | None = None
    locked_at: str | None = None


def default_tag(name: str) -> str:
    return f"kbench-{name}:{__version__}"


def read_lock(path: Path = LOCK_PATH) -> dict[str, LockedImage]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise LockError(f"cannot read the image lock {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise LockError(f"the image lock {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), dict):
        raise LockError(f"the image lock {path} has no `images:` mapping")
    locked = {}
    for name, entry in data["images"].items():
        if not isinstance(entry, dict) or "tag" not in entry or "base" not in entry:
            raise LockError(f"the image lock {path}: entry {name!r} needs `tag` and `base`")
        image_id = entry.get("id")
        if image_id is not None and not str(image_id).startswith("sha256:"):
            raise LockError(f"the image lock {path}: entry {name!r} has id {image_id!r}, not sha256:...")
        locked[name] = LockedImage(
            name, entry["tag"], image_id, entry["base"], entry.get("worker_hash"), entry.get("locked_at")
        )
    return locked


def write_lock(images: dict[str, LockedImage], path: Path = LOCK_PATH) -> None:
    body = {
        "images": {
            name: {
                "tag": image.tag,
                "id": image.id,
                "base": image.base,
                "worker_hash": image.worker_hash,
                "locked_at": image.locked_at,
            }
            for name, image in sorted(images.items())
        }
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(_HEADER + yaml.safe_dump(body, sort_keys=False))
    tmp.replace(path)


def worker_files(root: Path = REPO_ROOT) -> list[Path]:
    """What an image needs of kbench to run the worker: ``runner/worker/`` and every ``runner``
    module it imports, transitively (found by reading the imports, not by running them)."""
    package = root / "runner"
    todo = [package / "__init__.py", *sorted((package / "worker").glob("*.py"))]
    found: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in found or not path.exists():
            continue
        found.add(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for name in names:
                if name == "runner" or not name.startswith("runner."):
                    continue
                parts = name.split(".")[1:]
                todo += [package.joinpath(*parts).with_suffix(".py"), package.joinpath(*parts, "__init__.py")]
                # A module inside a subpackage needs the subpackage's __init__ too.
                todo += [package.joinpath(*parts[:depth], "__init__.py") for depth in range(1, len(parts))]
    return sorted(found)


def worker_hash(root: Path = REPO_ROOT) -> str:
    """sha256 over the files an image carries of kbench (``worker_files``)."""
    digest = hashlib.sha256()
    for path in worker_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def lock_present_images(path: Path = LOCK_PATH) -> list[str]:
    """Record the id of every locked image present on the engine; returns one line per image."""
    import docker
    from docker.errors import DockerException, ImageNotFound

    images = read_lock(path)
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise LockError(f"no Docker engine answers: {str(exc).splitlines()[0]}") from None
    lines = []
    for name, entry in sorted(images.items()):
        try:
            image = client.images.get(entry.tag)
        except ImageNotFound:
            lines.append(f"{name}: {entry.tag} is not on this engine; lock entry kept (id {entry.id})")
            continue
        images[name] = LockedImage(
            name,
            entry.tag,
            image.id,
            entry.base,
            image.labels.get(LABEL_WORKER_HASH),
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        lines.append(f"{name}: {entry.tag} locked at {image.id}")
    write_lock(images, path)
    return lines


def main(argv: list[str]) -> int:
    if argv == ["worker-hash"]:
        print(worker_hash())
        return 0
    if argv == ["worker-files"]:
        for path in worker_files():
            print(path.relative_to(REPO_ROOT).as_posix())
        return 0
    if argv == ["lock"]:
        try:
            for line in lock_present_images():
                print(line)
        except LockError as exc:
            print(f"image-lock: {exc}", file=sys.stderr)
            return 2
        return 0
    print("usage: python -m runner.executors.image_lock lock | worker-hash | worker-files", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
