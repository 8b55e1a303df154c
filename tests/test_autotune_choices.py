"""``runner.bench autotune``: two compile caches' autotuning choices compared (``runner/analysis/autotune.py``). The
best_config files are written by torch's own autotune cache (``AutotuneCache.save``), as Inductor writes them after
a kernel's first call on a GPU; the command runs as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from runner.analysis.autotune import compare

REPO = Path(__file__).resolve().parents[1]


def _autotuned(cache: Path, name: str, block: int, warps: int, took_ns: int) -> None:
    """What Inductor leaves in ``cache`` for one kernel that chose ``XBLOCK=block`` on ``warps`` warps."""
    from torch._inductor.runtime.autotune_cache import AutotuneCache, LocalAutotuneCache

    path = cache / "inductor" / name[:2] / f"{name}.best_config"
    path.parent.mkdir(parents=True, exist_ok=True)
    tuned = AutotuneCache("configs-of-" + name, local_cache=(LocalAutotuneCache("local"), str(path)))
    tuned.save(SimpleNamespace(kwargs={"XBLOCK": block}, num_warps=warps, num_stages=1), took_ns, False, "t" + name)


def _bench(*args: str):
    return subprocess.run(
        [sys.executable, "-m", "runner.bench", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def test_two_caches_choices_compared_kernel_by_kernel(tmp_path: Path):
    a, b = tmp_path / "cc_a", tmp_path / "cc_b"
    _autotuned(a, "k1same", 1024, 4, 12_000_000)
    _autotuned(b, "k1same", 1024, 4, 30_000_000)  # the same choice, the autotuning slower: not a difference
    _autotuned(a, "k2moved", 1024, 4, 10_000_000)
    _autotuned(b, "k2moved", 512, 8, 10_000_000)
    _autotuned(a, "k3first", 256, 2, 1_000_000)
    _autotuned(b, "k4second", 256, 2, 1_000_000)
    figures = compare(a, b)
    assert (figures["both"], figures["same"], figures["different"]) == (2, 1, 1)
    assert (figures["only_first"], figures["only_second"]) == (1, 1)
    (moved,) = figures["differences"]
    assert moved["file"].endswith("k2moved.best_config")
    assert (moved["first"]["XBLOCK"], moved["first"]["num_warps"]) == (1024, 4)
    assert (moved["second"]["XBLOCK"], moved["second"]["num_warps"]) == (512, 8)
    assert "time_taken_ms" not in moved["first"] and "triton_cache_hash" not in moved["second"]
    # The command, as a user runs it.
    proc = _bench("autotune", str(a), str(b))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["different"] == 1


def test_autotune_refuses_what_is_not_a_cache_in_one_line(tmp_path: Path):
    a = tmp_path / "cc_a"
    _autotuned(a, "k1", 1024, 4, 1_000_000)
    not_a_directory = tmp_path / "file.txt"
    not_a_directory.write_text("x")
    proc = _bench("autotune", str(a), str(not_a_directory))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "is not a directory" in proc.stderr
    torn = tmp_path / "cc_torn"
    (torn / "ab").mkdir(parents=True)
    (torn / "ab" / "k.best_config").write_text('{"XBLOCK": 10')
    proc = _bench("autotune", str(a), str(torn))
    assert proc.returncode == 2 and "not a readable best_config" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    proc = _bench("autotune", str(a))
    assert proc.returncode == 2 and "takes" in proc.stderr
