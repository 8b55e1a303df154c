"""The host CPUs a worker may run on and the one its measuring thread ran each batch on (``runner/worker/host_cpu.py``),
and NVML's CPU masks read as CPUs (``runner/gpu/nvml.py``), read off this machine's own threads (a real run's
batches: ``tests/test_bench.py``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner.gpu.nvml import cpus_of_mask
from runner.worker.host_cpu import allowed_cpus, cpu_of_stat, current_cpu


def _stat_line(command: str, processor: int) -> str:
    """A ``/proc/.../stat`` line of 52 fields whose field 39 is ``processor``."""
    fields = ["4242", f"({command})", "S"] + [str(k) for k in range(4, 53)]
    fields[38] = str(processor)
    return " ".join(fields)


def test_the_cpu_is_read_after_the_command_names_last_parenthesis():
    assert cpu_of_stat(_stat_line("python3", 7)) == 7
    assert cpu_of_stat(_stat_line("a (b) c) d", 13)) == 13  # a name with spaces and parentheses of its own
    assert cpu_of_stat("4242 (cut short) S 1 2 3") is None


def test_this_threads_cpu_is_one_it_may_run_on():
    allowed = allowed_cpus()
    assert allowed and allowed == sorted(set(allowed))
    assert current_cpu() in allowed


def test_a_thread_pinned_to_one_cpu_reads_that_cpu():
    """A fresh process pins itself to this machine's last allowed CPU and reads where it runs (bounded: one process,
    a 60 s cap)."""
    last = allowed_cpus()[-1]
    code = (
        "import os, sys; sys.path.insert(0, '.'); from runner.worker.host_cpu import current_cpu, allowed_cpus; "
        f"os.sched_setaffinity(0, {{{last}}}); print(current_cpu(), allowed_cpus())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split(None, 1) == [str(last), f"[{last}]\n"]


@pytest.mark.parametrize(
    "words, cpus",
    [([0b1011], [0, 1, 3]), ([0, 1], [64]), ([2**63, 0b1], [63, 64]), ([0, 0], [])],
)
def test_nvmls_cpu_masks_read_as_cpus(words, cpus):
    assert cpus_of_mask(words) == cpus
