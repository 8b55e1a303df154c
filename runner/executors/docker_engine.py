"""The Docker engine and the evaluation image: connecting, choosing the locked image, cleaning up.

Owns the checks that run before any work (an engine answers, the locked image is present, its
worker speaks this protocol) and the labels that mark kbench's containers. Every failure is an
``ExecutorUnavailable`` with one line that says what to do. It starts no container.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import docker
import requests
from docker.errors import DockerException, ImageNotFound

from runner.executors.base import ExecutorSettings, ExecutorUnavailable
from runner.executors.image_lock import LABEL_PROTOCOL, LABEL_WORKER_HASH, LockError, read_lock, worker_hash
from runner.worker.protocol import PROTOCOL_VERSION

LABEL_OWNER = "org.kbench.executor"  # one id per executor instance: what close() and the leak checks find
LABEL_PID = "org.kbench.pid"
LABEL_HOST = "org.kbench.host"


@dataclass(frozen=True)
class ImageChoice:
    """The image an executor will run, and what the lock check said about it."""

    name: str
    tag: str
    id: str
    locked_id: str | None
    lock_check: str  # "matched" or why a mismatch was accepted
    worker_hash: str | None
    worker_matches_host: bool


def connect() -> docker.DockerClient:
    """A client for the engine of this environment (DOCKER_HOST or the default socket), or one line why not."""
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=120, max_pool_size=32)
        client.ping()
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise ExecutorUnavailable(
            f"executor=docker: no Docker engine answers at {where} ({first_line(exc)}); "
            "start dockerd, or run with executor=local"
        ) from None
    return client


def choose_image(client: docker.DockerClient, settings: ExecutorSettings) -> ImageChoice:
    """The locked image for ``settings.image``; refuses a missing or unlocked one unless told otherwise."""
    try:
        locked = read_lock(settings.image_lock)
    except LockError as exc:
        raise ExecutorUnavailable(f"executor=docker: {exc}") from None
    entry = locked.get(settings.image)
    if entry is None:
        raise ExecutorUnavailable(
            f"executor=docker: no image {settings.image!r} in {settings.image_lock} (known: {', '.join(sorted(locked))})"
        )
    build = "make image-cpu" if settings.image == "cpu" else "make image"
    image = None
    if entry.id is not None:
        image = _get_image(client, entry.id)
    lock_check = "matched"
    if image is None:
        image = _get_image(client, entry.tag)
        if image is None:
            raise ExecutorUnavailable(
                f"executor=docker: image {entry.tag} ({entry.id or 'not locked'}) is not on this engine; "
                f"build it with `{build}` and record it with `make image-lock`"
            )
        if not settings.allow_unlocked_image:
            why = "is not locked" if entry.id is None else f"is {image.id}, but the lock says {entry.id}"
            raise ExecutorUnavailable(
                f"executor=docker: image {entry.tag} {why} ({settings.image_lock}); record this build with "
                "`make image-lock`, or accept it for this run with executor.allow_unlocked_image=true"
            )
        lock_check = f"not matched, accepted by executor.allow_unlocked_image=true (lock: {entry.id})"
    protocol = image.labels.get(LABEL_PROTOCOL)
    if protocol != str(PROTOCOL_VERSION):
        raise ExecutorUnavailable(
            f"executor=docker: image {entry.tag} carries a worker of protocol {protocol}, this kbench speaks "
            f"{PROTOCOL_VERSION}; rebuild it with `{build}` and `make image-lock`"
        )
    image_worker = image.labels.get(LABEL_WORKER_HASH)
    return ImageChoice(
        settings.image,
        entry.tag,
        image.id,
        entry.id,
        lock_check,
        image_worker,
        image_worker == worker_hash(),
    )


def _get_image(client: docker.DockerClient, ref: str):
    try:
        return client.images.get(ref)
    except ImageNotFound:
        return None
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise ExecutorUnavailable(f"executor=docker: the engine failed to look up {ref}: {first_line(exc)}") from None


def remove_orphans(client: docker.DockerClient) -> None:
    """Remove containers left by a kbench process of this host that no longer exists (killed by SIGKILL)."""
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": LABEL_OWNER}):
        labels = container.labels
        if labels.get(LABEL_HOST) != host or not labels.get(LABEL_PID, "").isdigit():
            continue
        try:
            os.kill(int(labels[LABEL_PID]), 0)
        except ProcessLookupError:
            container.remove(force=True)
        except PermissionError:
            pass  # alive, another user's


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
