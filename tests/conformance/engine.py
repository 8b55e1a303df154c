"""Whether the docker executor can run here, for tests: skip without it, or fail when CI requires it.

``KBENCH_REQUIRE_DOCKER=1`` (set by ``.ci/run``) turns a missing engine or image into a failure,
so that CI never passes by skipping the container tests.
"""

from __future__ import annotations

import os

import pytest

from runner.executors.base import ExecutorSettings, ExecutorUnavailable


def why_no_docker() -> str | None:
    """None when an engine answers and the locked CPU image is present, else the executor's one line."""
    from runner.executors.auto import preflight

    try:
        preflight("docker", ExecutorSettings(image="cpu"))
    except ExecutorUnavailable as exc:
        return str(exc)
    return None


def require_docker() -> None:
    reason = why_no_docker()
    if reason is None:
        return
    if os.environ.get("KBENCH_REQUIRE_DOCKER") == "1":
        pytest.fail(f"KBENCH_REQUIRE_DOCKER=1, but {reason}")
    pytest.skip(reason)


def leaked_containers() -> list[str]:
    """kbench containers whose kbench process is gone: what an executor failed to remove."""
    import docker

    from runner.executors.docker_engine import LABEL_OWNER, LABEL_PID

    leaked = []
    for container in docker.from_env().containers.list(all=True, filters={"label": LABEL_OWNER}):
        pid = container.labels.get(LABEL_PID, "")
        if not pid.isdigit() or not os.path.exists(f"/proc/{pid}"):
            leaked.append(f"{container.short_id} ({container.status})")
    return leaked
