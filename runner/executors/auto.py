"""Choosing the executor before any work starts: ``preflight`` and ``executor=auto``.

``docker`` must find an engine and its locked image, else the run stops with one line. ``auto``
takes docker when it would pass that check, and otherwise the local executor, saying so loudly
and recording why in the environment ("host environment, not container").
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.executors.base import ExecutorSettings, ExecutorUnavailable
from runner.executors.local import LocalExecutor


@dataclass(frozen=True)
class Preflight:
    kind: str  # the executor that will run: "local" or "docker"
    fallback: str = ""  # executor=auto only: why docker was not taken
    warnings: tuple[str, ...] = ()


def preflight(kind: str, settings: ExecutorSettings) -> Preflight:
    if kind == "local":
        return Preflight("local")
    from runner.executors.docker_engine import choose_image, connect

    try:
        image = choose_image(connect(), settings)
    except ExecutorUnavailable as exc:
        if kind == "docker":
            raise
        return Preflight("local", fallback=str(exc).removeprefix("executor=docker: "))
    warnings = ()
    if not image.worker_matches_host:
        warnings = (
            f"image {image.tag} carries a worker that differs from this checkout's runner/worker; "
            "the image's worker is what runs (rebuild the image to measure this checkout's worker)",
        )
    return Preflight("docker", warnings=warnings)


class FallbackLocalExecutor(LocalExecutor):
    """The local executor chosen by ``executor=auto`` because docker was not usable."""

    def __init__(self, settings: ExecutorSettings, reason: str) -> None:
        super().__init__(settings)
        self.reason = reason

    def environment(self) -> dict:
        env = super().environment()
        env["requested"] = "auto"
        env["fallback_reason"] = self.reason
        env["note"] = f"host environment, not container (executor=auto: docker unusable: {self.reason})"
        return env


def make_auto(settings: ExecutorSettings):
    """The executor ``auto`` stands for on this machine, now."""
    choice = preflight("auto", settings)
    if choice.kind == "docker":
        from runner.executors.docker import DockerExecutor

        return DockerExecutor(settings)
    return FallbackLocalExecutor(settings, choice.fallback)
