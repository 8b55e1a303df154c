"""The host side of the environment fingerprint: project version and commit, packages, GPU."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata

from runner import __version__
from runner.paths import REPO_ROOT


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=10,
    )
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in ("torch", "triton", "hydra-core", "omegaconf", "mlflow", "nvidia-ml-py", "docker", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def host_fingerprint() -> dict:
    return {
        "kbench_version": __version__,
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": platform.node(),
        "packages": package_versions(),
        # Where this process's Python bytecode comes from: a cache of its own (runner/executors/bytecode.py) or the
        # install's.
        "bytecode": sys.pycache_prefix or "installed",
    }
