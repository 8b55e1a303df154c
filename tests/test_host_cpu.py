"""The host CPUs a worker may run on, the one its measuring thread ran each batch on and how long it waited for one
(``runner/worker/host_cpu.py``), and NVML's CPU masks read as CPUs (``runner/gpu/nvml.py``), read off this machine's
own threads (a real run's batches: ``tests/test_bench.py``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runner.gpu.nvml import cpus_of_mask
from runner.worker.host_cpu import allowed_cpus, cpu_of_stat, current_cpu, waited_ns


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


def test_this_threads_wait_for_a_cpu_is_a_count_that_never_falls():
    first = waited_ns()
    sum(range(100_000))
    assert isinstance(first, int) and 0 <= first <= waited_ns()


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


def test_a_thread_sharing_its_cpu_with_a_busy_process_waits_for_it():
    """A fresh process pinned to one CPU with a busy child pinned there too spins for 0.4 s of wall time: the
    scheduler made it wait for the CPU for a good part of that, and it reads so (``waited_ns``); alone on the CPU
    it waits for next to none of it. Bounded: one busy child, killed at the end, and a 60 s cap."""
    cpu = allowed_cpus()[-1]
    code = (
        "import os, subprocess, sys, time; sys.path.insert(0, '.'); from runner.worker.host_cpu import waited_ns\n"
        f"os.sched_setaffinity(0, {{{cpu}}})\n"
        "def spin(seconds):\n"
        "    before, end = waited_ns(), time.perf_counter() + seconds\n"
        "    while time.perf_counter() < end: pass\n"
        "    return (waited_ns() - before) / 1e6\n"
        "alone = spin(0.4)\n"
        "busy = subprocess.Popen([sys.executable, '-c', 'import time\\nend = time.time() + 30\\n"
        "while time.time() < end: pass'])\n"
        "try:\n"
        "    time.sleep(0.2)\n"
        "    shared = spin(0.4)\n"
        "finally:\n"
        "    busy.kill()\n"
        "print(alone, shared)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    alone, shared = map(float, out.stdout.split())
    assert shared > 100.0 > 20.0 > alone, (alone, shared)  # ms of 400: the busy child had about half the CPU


@pytest.mark.parametrize(
    "words, cpus",
    [([0b1011], [0, 1, 3]), ([0, 1], [64]), ([2**63, 0b1], [63, 64]), ([0, 0], [])],
)
def test_nvmls_cpu_masks_read_as_cpus(words, cpus):
    assert cpus_of_mask(words) == cpus
