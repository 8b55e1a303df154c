"""The docker executor: one fresh, locked-down container per evaluation, from a locked image.

Each evaluation gets a new container (``container.py``: its slot, the FIFO its worker waits on,
collecting its outputs); with ``prestart=N`` the next N are created and started while the current
one runs, and each still serves exactly one evaluation. This module owns the executor: the
container's configuration, the spares, and what ``environment()`` records. The engine and the
image checks are in ``docker_engine.py``.

Locked down by default: no network, a non-root user, every capability dropped, no-new-privileges,
a read-only root with tmpfs for scratch and compile caches, an init process (nothing outlives the
worker), limits on memory (no swap), processes, CPU time, wall time, file size and captured output.
Nothing of the host's environment is passed in except ``executor.env_passthrough``. The GPU the
orchestrator holds the lock of is the only one handed in (a DeviceRequest by UUID, or a CDI name).

It knows nothing about kernels and never decides a verdict. A failure of the engine (no daemon,
no image, a refused container) raises ``ExecutorUnavailable``: the runner's fault, one line.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import uuid
from pathlib import Path

from docker.types import DeviceRequest, LogConfig, Mount, Ulimit

from runner.executors.base import CUDA_JIT_CACHE_ENV, ExecutionOutcome, ExecutorSettings, SparePool
from runner.executors.container import COMMAND, CONTAINER_TOKEN, Container, container_user
from runner.executors.docker_engine import LABEL_HOST, LABEL_OWNER, LABEL_PID, choose_image, connect, remove_orphans
from runner.gpu.lock import work_token
from runner.worker.device_token import PREINIT_ENV, TOKEN_ENV, token_files
from runner.worker.protocol import CHECKS_CACHE_ENV, OUT_DIR, SPARE_RECORD_ENV, SPARE_RECORD_FILE


class DockerExecutor:
    name = "docker"

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings
        self.client = connect()
        self.image = choose_image(self.client, settings)
        self.owner = uuid.uuid4().hex[:16]
        self._pool = SparePool()
        self._own_slots: Path | None = None
        version = self.client.version()
        info = self.client.info()
        self._engine = {
            "engine": f"Docker {version.get('Version')} (API {version.get('ApiVersion')})",
            "runtime": info.get("DefaultRuntime"),
            "cgroup": info.get("CgroupVersion"),
        }
        remove_orphans(self.client)

    # -- the interface ----------------------------------------------------------------------
    def environment(self) -> dict:
        s = self.settings
        image = self.image
        return {
            "kind": "container",
            "executor": "docker",
            "note": f"container from {image.tag} {image.id} (lock: {image.lock_check})",
            "image": image.tag,
            "image_id": image.id,
            "image_name": image.name,
            "locked_id": image.locked_id,
            "lock_check": image.lock_check,
            "worker_hash": image.worker_hash,
            "worker_matches_host": image.worker_matches_host,
            **self._engine,
            "network": "none",
            "user": container_user(),
            "read_only_root": True,
            "capabilities": "all dropped, no-new-privileges",
            "gpu_request": s.gpu_request,
            "compile_cache": "shared (run folder)" if s.shared_compile_cache else "tmpfs",
            "limits": {
                "timeout_s": s.timeout_s,
                "memory_bytes": s.memory_limit_bytes,
                "pids": s.pids_limit,
                "cpus": s.cpus,
                "cpu_seconds": _cpu_seconds(s),
                "file_size_bytes": s.file_size_limit_bytes,
                "output_bytes": s.output_limit_bytes,
                "scratch_mb": s.scratch_mb,
            },
            "prestart": s.prestart,
        }

    def own_pids(self) -> set[int]:
        pids: set[int] = set()
        for container in self._pool.members():
            pids |= container.host_pids()
        return pids

    def prepare(self, gpus: list[str | None]) -> None:
        """Nothing: a container started now would start its worker before the device is locked."""

    def run(self, job_dir: Path, gpu: str | None) -> ExecutionOutcome:
        job_dir = job_dir.resolve()
        container = self._pool.take(gpu, lambda spare: spare.waiting()) or Container(self, gpu)
        try:
            with self._pool.running(container):
                container.hand_over(job_dir)
                # The next evaluations' containers start now: their start-up overlaps this one's run.
                self._pool.refill(gpu, self.settings.prestart, lambda device: Container(self, device))
                return container.finish(job_dir)
        finally:
            container.discard()

    def close(self) -> None:
        # Each one's record lies in its slot, which the discard removes: read first.
        for spare in self._pool.drain(lambda spare: (spare.spare_record_file, {"started_by": "container"})):
            spare.discard()
        for leftover in self.client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={self.owner}"}):
            leftover.remove(force=True)
        if self._own_slots is not None:
            shutil.rmtree(self._own_slots, ignore_errors=True)

    def dismissed_spares(self) -> list[dict]:
        return self._pool.dismissed()

    # -- helpers for the containers ---------------------------------------------------------
    def slots_root(self) -> Path:
        if self.settings.cache_dir is not None:
            root = self.settings.cache_dir / "slots"
            root.mkdir(parents=True, exist_ok=True)
            return root
        if self._own_slots is None:
            self._own_slots = Path(tempfile.mkdtemp(prefix="kbench-slots-"))
        return self._own_slots

    def container_config(self, slot: Path, gpu: str | None) -> dict:
        s = self.settings
        scratch = f"rw,exec,nosuid,nodev,size={s.scratch_mb}m,mode=1777"
        token = work_token(gpu)
        mounts = [
            Mount("/job", str(slot / "job"), type="bind", read_only=True),
            Mount(f"/job/{OUT_DIR}", str(slot / "job" / OUT_DIR), type="bind", read_only=False),
            Mount("/ctl", str(slot / "ctl"), type="bind", read_only=True),
            # The host's device token, its turnstile, its ready gate and its context lock (flocks arbitrated by the
            # host kernel), read-only.
            *(
                Mount(str(inside), str(outside), type="bind", read_only=True)
                for inside, outside in zip(token_files(CONTAINER_TOKEN), token_files(token))
            ),
        ]
        tmpfs = {"/tmp": scratch, "/home/kbench": scratch}
        shared_cache = s.shared_compile_cache and s.cache_dir is not None
        if shared_cache:
            shared = s.cache_dir / "compile"
            for folder in (shared, shared / "cuda"):  # cuda/: CUDA's JIT cache (below)
                folder.mkdir(parents=True, exist_ok=True)
                folder.chmod(0o1777)
            mounts.append(Mount("/cache", str(shared), type="bind", read_only=False))
        else:
            tmpfs["/cache"] = scratch
        env = {
            "HOME": "/home/kbench",
            "TMPDIR": "/tmp",
            "PYTHONHASHSEED": "0",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "TORCHINDUCTOR_CACHE_DIR": "/cache/inductor",
            "TRITON_CACHE_DIR": "/cache/triton",
            CHECKS_CACHE_ENV: "/tmp/kbench-checks",  # private to the container, even with a shared /cache
            "TORCHINDUCTOR_COMPILE_THREADS": str(s.compile_threads),
            TOKEN_ENV: CONTAINER_TOKEN,
            SPARE_RECORD_ENV: f"/job/{OUT_DIR}/{SPARE_RECORD_FILE}",  # the slot's one writable folder
        }
        if shared_cache:
            # The kernels CUDA compiles from PTX at their first use, once per run (base.py says why); without
            # the shared cache they stay under the container's private HOME, compiled again in each container.
            env[CUDA_JIT_CACHE_ENV] = "/cache/cuda"
        env.update({key: os.environ[key] for key in s.env_passthrough if key in os.environ})
        device_requests = []
        if gpu is None:
            env["CUDA_VISIBLE_DEVICES"] = ""
        else:
            env[PREINIT_ENV] = s.cuda_preinit
            if s.gpu_request == "cdi":
                device_requests.append(DeviceRequest(driver="cdi", device_ids=[f"{s.cdi_kind}={gpu}"]))
            else:
                device_requests.append(DeviceRequest(driver="nvidia", device_ids=[gpu], capabilities=[["gpu"]]))
        limit = s.file_size_limit_bytes
        return {
            "image": self.image.id,
            "command": COMMAND,
            "environment": env,
            "user": container_user(),
            "working_dir": "/tmp",
            "hostname": "sandbox",
            "labels": {LABEL_OWNER: self.owner, LABEL_PID: str(os.getpid()), LABEL_HOST: socket.gethostname()},
            "mounts": mounts,
            "tmpfs": tmpfs,
            "read_only": True,
            "network_mode": "none",
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges:true"],
            "init": True,
            "ipc_mode": "private",
            "shm_size": "256m",
            "mem_limit": s.memory_limit_bytes,
            "memswap_limit": s.memory_limit_bytes,
            "pids_limit": s.pids_limit,
            "nano_cpus": int(s.cpus * 1e9) if s.cpus else None,
            "ulimits": [
                Ulimit(name="fsize", soft=limit, hard=limit),
                Ulimit(name="core", soft=0, hard=0),
                Ulimit(name="cpu", soft=_cpu_seconds(s), hard=_cpu_seconds(s)),
            ],
            # Nothing is logged by the engine: output is read through the attach stream, capped.
            "log_config": LogConfig(type="none"),
            "device_requests": device_requests or None,
        }


def _cpu_seconds(settings: ExecutorSettings) -> int:
    """RLIMIT_CPU per process: more than a whole evaluation could use on every core, so it bounds, never judges."""
    cores = settings.cpus or os.cpu_count() or 1
    return int(settings.timeout_s * cores) + 60
