"""Which host CPUs a worker may use, which one its measuring thread ran each batch on, how long it waited for one.

A task whose calls wait on the host (cuSOLVER's batched factorizations with their host round trips, say) runs at the
speed of the host thread between its kernels: cholesky_spd_blocks_fp32 and batched_solve_small_fp32 ran at
torch_compile speedups of 0.97-0.99 in both passes of a suite on the H200 and 1.01-1.04 in every fresh process on an
idle GPU, batched_solve's two sides 9-10% apart between the passes (BENCHMARKS.md, fifty-sixth session). Each batch's
CPU goes into ``samples.json`` (``batch_host_cpu``, ``timing.py``) and the CPUs the worker may use into the result
(``environment.host_cpus``), so a pass can be read against the cores its processes ran on and the GPU's nearest ones
(``local_cpus`` in the GPU's readings, ``runner/gpu/nvml.py``). Each batch also gets the time its measuring thread
spent runnable but waiting for a core while the batch was in flight (``batch_host_wait_ms``, the scheduler's own
count, ``waited_ns``). On the H200 every core is the GPU's (one NUMA node); busy loops on 14 of its 16 cores moved
neither task's floors in processes kept to the other two; and over a cold torch_compile pass of half the suite the
measuring thread waited more than 0.25 ms in 32 of 4,022 batches (0.8%), no more often in the disturbed ones, while
the host kept 2.3 of its 16 cores busy (median; BENCHMARKS.md, fifty-seventh session). So neither the cores nor the
host's load set those tasks' speeds there. Read only: nothing here moves a thread.
"""

from __future__ import annotations

import os
from pathlib import Path

# The calling thread's own stat line (Linux): its field 39 is the CPU it last ran on.
_THREAD_STAT = Path("/proc/thread-self/stat")
# The calling thread's scheduler statistics (Linux): nanoseconds on a CPU, nanoseconds runnable but waiting for one,
# and time slices.
_THREAD_SCHEDSTAT = Path("/proc/thread-self/schedstat")
# Field 39's index among the fields after the command name's closing parenthesis (fields 3 on).
_PROCESSOR_FIELD = 39 - 3


def cpu_of_stat(line: str) -> int | None:
    """The CPU a ``/proc/.../stat`` line says its thread last ran on; None where the line has no such field. The
    command name (field 2) may hold spaces and parentheses: the fields are read after its last ``)``."""
    fields = line.rpartition(")")[2].split()
    try:
        return int(fields[_PROCESSOR_FIELD])
    except (IndexError, ValueError):
        return None


def current_cpu() -> int | None:
    """The CPU the calling thread runs on; None where the system does not say (not Linux)."""
    try:
        return cpu_of_stat(_THREAD_STAT.read_text())
    except OSError:
        return None


def allowed_cpus() -> list[int] | None:
    """The CPUs this process may run on, in order; None where the system does not say."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def waited_ns() -> int | None:
    """How long the calling thread has waited, runnable, for a CPU since it started (ns): the scheduler's run delay;
    None where the system does not say (not Linux, or a kernel without scheduler statistics)."""
    try:
        return int(_THREAD_SCHEDSTAT.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
