"""The docker executor around the evaluations: choosing it, refusing it, and what a run records.

The behaviours of evaluations inside containers are in ``tests/conformance/``. Here: a dead
engine, a missing or unlocked image and ``executor=auto`` each give the promised one line (or
fallback) before any work; a run records the image id in its result, manifest and MLflow run;
containers of a killed kbench are cleaned up; the GPU is handed over by UUID or CDI name.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from runner.executors.base import ExecutorSettings
from runner.executors.image_lock import LOCK_PATH, LockError, read_lock
from tests.conformance.engine import require_docker
from tests.conftest import FAST_TIMING, REPO, kbench, make_kernelbench_dir

NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def _run(tmp: Path, *overrides: str, env: dict | None = None):
    suite = make_kernelbench_dir(tmp / "kb", ["1_a"])
    return kbench(
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=reference",
        "run.progress=false",
        *FAST_TIMING,
        *overrides,
        cwd=tmp,
        env=env,
    )


def _lock_copy(tmp: Path, **cpu_fields) -> Path:
    data = yaml.safe_load(LOCK_PATH.read_text())
    data["images"]["cpu"].update(cpu_fields)
    path = tmp / "images.lock"
    path.write_text(yaml.safe_dump(data))
    return path


# -- without an engine -----------------------------------------------------------------------
def test_no_engine_is_one_line_before_any_work(tmp_path: Path):
    proc = _run(tmp_path, "executor=docker", "tracking=off", env=NO_ENGINE)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no Docker engine answers at unix:///nonexistent" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_auto_without_engine_runs_locally_and_says_so(tmp_path: Path):
    proc = _run(tmp_path, "executor=auto", "tracking=off", env=NO_ENGINE)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "executor=auto: docker is not usable" in proc.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    env = json.loads((run_dir / "manifest.json").read_text())["environment"]["executor"]
    assert env["executor"] == "local" and env["requested"] == "auto"
    assert env["note"].startswith("host environment, not container") and "no Docker engine" in env["fallback_reason"]
    assert "host environment, not container" in (run_dir / "report.md").read_text()


@pytest.mark.parametrize(
    "text, message",
    [
        ("images: [", "not valid YAML"),
        ("other: {}\n", "no `images:` mapping"),
        ("images:\n  cpu: {tag: a, base: b, id: 'md5:1'}\n", "not sha256"),
        ("images:\n  cpu: {id: null}\n", "needs `tag` and `base`"),
    ],
)
def test_a_broken_lock_is_one_line(tmp_path: Path, text: str, message: str):
    path = tmp_path / "images.lock"
    path.write_text(text)
    with pytest.raises(LockError, match=message):
        read_lock(path)


def test_the_committed_lock_pins_the_gpu_base_by_digest():
    gpu = read_lock()["gpu"]
    assert "@sha256:" in gpu.base
    assert f"FROM {gpu.base}\n" in (REPO / "images" / "gpu" / "Dockerfile").read_text()


# -- with an engine and the locked CPU image ---------------------------------------------------
@pytest.mark.docker
def test_a_missing_image_is_one_line(tmp_path: Path):
    require_docker()
    lock = _lock_copy(tmp_path, tag="kbench-cpu:not-built", id=None)
    proc = _run(tmp_path, "executor=docker", "tracking=off", f"executor.image_lock={lock}")
    assert proc.returncode == 2
    assert "kbench-cpu:not-built (not locked) is not on this engine" in proc.stderr
    assert "make image-cpu" in proc.stderr and not (tmp_path / "runs").exists()


@pytest.mark.docker
def test_an_unlocked_image_is_refused_unless_allowed(tmp_path: Path):
    require_docker()
    lock = _lock_copy(tmp_path, id="sha256:" + "0" * 64)
    refused = _run(tmp_path, "executor=docker", "tracking=off", f"executor.image_lock={lock}")
    assert refused.returncode == 2 and "but the lock says sha256:000" in refused.stderr
    allowed = _run(
        tmp_path,
        "executor=docker",
        "tracking=off",
        f"executor.image_lock={lock}",
        "executor.allow_unlocked_image=true",
    )
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    (job,) = (run_dir / "jobs").iterdir()
    env = json.loads((job / "out" / "result.json").read_text())["environment"]["executor"]
    assert "accepted by executor.allow_unlocked_image=true" in env["lock_check"]
    assert env["image_id"] == read_lock()["cpu"].id and env["locked_id"] == "sha256:" + "0" * 64


@pytest.mark.docker
def test_auto_takes_docker_and_mlflow_carries_the_image(tmp_path: Path):
    require_docker()
    proc = _run(tmp_path, "executor=auto", "tracking.uri=sqlite:///mlflow.db")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "executor docker" in proc.stdout
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    (experiment,) = [e for e in client.search_experiments() if e.name == "kbench"]
    children = [run for run in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" in run.data.tags]
    assert len(children) == 1 and children[0].data.params["executor"] == "docker"
    result = json.loads(
        Path(client.download_artifacts(children[0].info.run_id, "result.json", str(tmp_path))).read_text()
    )
    assert result["environment"]["executor"]["image_id"] == read_lock()["cpu"].id


@pytest.mark.docker
def test_containers_of_a_dead_kbench_are_removed():
    require_docker()
    import docker

    from runner.executors.docker import DockerExecutor
    from runner.executors.docker_engine import LABEL_HOST, LABEL_OWNER, LABEL_PID

    client = docker.from_env()
    orphan = client.containers.create(
        read_lock()["cpu"].id,
        command=["true"],
        labels={LABEL_OWNER: "test-orphan", LABEL_PID: "999999999", LABEL_HOST: socket.gethostname()},
        network_mode="none",
    )
    executor = DockerExecutor(ExecutorSettings(image="cpu"))
    try:
        assert not client.containers.list(all=True, filters={"id": orphan.id})
    finally:
        executor.close()


@pytest.mark.docker
@pytest.mark.parametrize(
    "request_kind, driver, device",
    [("uuid", "nvidia", "GPU-0e6d"), ("cdi", "cdi", "nvidia.com/gpu=GPU-0e6d")],
)
def test_the_gpu_is_handed_over_by_uuid_or_cdi_name(tmp_path: Path, request_kind: str, driver: str, device: str):
    require_docker()
    from runner.executors.docker import DockerExecutor

    executor = DockerExecutor(ExecutorSettings(image="cpu", gpu_request=request_kind))
    try:
        config = executor.container_config(tmp_path, "GPU-0e6d")
        (device_request,) = config["device_requests"]
        assert (device_request["Driver"], device_request["DeviceIDs"]) == (driver, [device])
        assert "CUDA_VISIBLE_DEVICES" not in config["environment"]
        assert executor.container_config(tmp_path, None)["device_requests"] is None
    finally:
        executor.close()


@pytest.mark.docker
def test_containers_share_cudas_jit_cache_only_with_the_shared_compile_cache(tmp_path: Path):
    """CUDA's cache of kernels compiled from PTX goes where the compile caches go: the run's shared folder when
    ``executor.shared_compile_cache`` (read-write, shared: weaker isolation), else the container's private HOME."""
    require_docker()
    from runner.executors.docker import DockerExecutor

    for shared in (False, True):
        executor = DockerExecutor(
            ExecutorSettings(image="cpu", cache_dir=tmp_path / "cache", shared_compile_cache=shared)
        )
        try:
            config = executor.container_config(tmp_path, None)
        finally:
            executor.close()
        cache_mounts = [mount for mount in config["mounts"] if mount["Target"] == "/cache"]
        if shared:
            assert config["environment"]["CUDA_CACHE_PATH"] == "/cache/cuda"
            assert [mount["Source"] for mount in cache_mounts] == [str(tmp_path / "cache" / "compile")]
            assert (tmp_path / "cache" / "compile" / "cuda").is_dir()
        else:
            assert "CUDA_CACHE_PATH" not in config["environment"] and not cache_mounts
            assert config["environment"]["HOME"] == "/home/kbench" and "/home/kbench" in config["tmpfs"]


@pytest.mark.docker
def test_a_spare_container_dismissed_without_a_job_leaves_the_record_of_its_start(tmp_path: Path):
    """A spare container writes its start's record into its slot's one writable folder once its start is done; the
    executor keeps it for each spare it dismisses without a job (``dismissed_spares``, which ``kbench run`` appends to
    the run's ``spares.jsonl``), as the local executor does: here the one container started ahead as a job (one the
    worker refuses: empty files) was handed over, dismissed once its start was done (its pid, when ready, when
    dismissed)."""
    import time

    require_docker()
    from runner.executors.docker import DockerExecutor
    from runner.worker.protocol import CANDIDATE_FILE, JOB_FILE, OUT_DIR, TASK_FILE

    job = tmp_path / "job"
    (job / OUT_DIR).mkdir(parents=True)
    for name in (JOB_FILE, TASK_FILE, CANDIDATE_FILE):
        (job / name).write_text("")
    executor = DockerExecutor(ExecutorSettings(image="cpu", prestart=1, timeout_s=60, cache_dir=tmp_path / "cache"))
    try:
        executor.run(job, None)
        (spare,) = executor._pool.members()
        record = spare.spare_record_file
        deadline = time.time() + 120  # a container's start and its imports, on a loaded 2-core machine
        while not record.exists() and time.time() < deadline:
            time.sleep(0.2)
        assert record.exists(), "the spare container never wrote the record of its start"
    finally:
        executor.close()
    (line,) = executor.dismissed_spares()
    assert line["start_done"] is True and line["started"] == {"started_by": "container"}
    assert isinstance(line["pid"], int) and line["ready_at"] <= line["dismissed_at"]
