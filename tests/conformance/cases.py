"""The hostile candidates of the conformance suite, and what each executor must make of them.

Each case is a candidate for the small task of ``tests/conftest.py`` with the verdict it must end
as. A case that needs an isolation the local executor does not have (a network namespace, a
read-only root, a pids or memory cgroup, a parent it cannot kill) names it in ``needs``; it runs
only against executors that provide it. Cases shared with ``tests/test_verdicts.py`` are taken
from there, not copied. Every case is bounded: a fixed number of processes, sleeps ended by the
time limit, no traffic off the machine (a connection to 127.0.0.1 and a route lookup only).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.conftest import HONEST_CANDIDATE
from tests.test_verdicts import CASES as VERDICT_CASES

FORKS = 100  # the fork bomb's bound: more than the docker run's pids limit, harmless on the host


@dataclass(frozen=True)
class Case:
    source: str
    verdict: str
    reason: str
    needs: frozenset[str] = frozenset()


# What each executor isolates beyond wall time, output capture and a scrubbed environment.
ISOLATION = {
    "local": frozenset(),
    "docker": frozenset({"network", "filesystem", "pids", "memory", "parent"}),
}


def _shared(name: str) -> Case:
    source, verdict, reason = VERDICT_CASES[name]
    return Case(source, verdict, reason)


def _at_import(probe: str) -> str:
    """The honest candidate with ``probe`` run once at import (the worker's cwd is the output folder)."""
    return probe.strip() + "\n\n" + HONEST_CANDIDATE


def _in_forward(code: str) -> str:
    indented = "\n".join("        " + line for line in code.strip().splitlines())
    return HONEST_CANDIDATE.replace("        return torch.clamp_min", indented + "\n        return torch.clamp_min")


BUSY_LOOP = _in_forward("while True:\n    pass")

FORK_BOMB = _in_forward(
    f"""
import os, time
made = 0
for _ in range({FORKS}):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(3600)
        os._exit(0)
    made += 1
with open("forks.txt", "w") as note:
    note.write(str(made))
time.sleep(3600)
"""
)

FLOOD = _at_import(
    """
import sys
for _ in range(16):
    sys.stdout.write("o" * (1 << 20))
    sys.stderr.write("e" * (1 << 20))
"""
)

SECRETS = {"KBENCH_TEST_SECRET": "hunter2", "OPENAI_API_KEY": "sk-kbench-test", "AWS_SECRET_ACCESS_KEY": "kbench-aws"}

READS_ENV = _at_import(
    """
import json, os
with open("env.json", "w") as note:
    json.dump(dict(os.environ), note)
"""
)

WRITES_OUTSIDE = _at_import(
    """
import json
attempts = {}
for path in ("/job/task.py", "/job/escape.txt", "/escape.txt", "/opt/kbench/runner/worker/evaluate.py", "/etc/passwd"):
    try:
        with open(path, "a") as target:
            target.write("escaped")
        attempts[path] = "written"
    except OSError as exc:
        attempts[path] = f"refused: {exc.strerror}"
with open("escape.json", "w") as note:
    json.dump(attempts, note)
"""
)

# PORT is replaced by the port of a listener the test opens on the host's 127.0.0.1.
OPENS_NETWORK = _at_import(
    """
import json, socket
report = {"interfaces": sorted(name for _, name in socket.if_nameindex())}
tcp = socket.socket()
tcp.settimeout(2)
try:
    tcp.connect(("127.0.0.1", PORT))
    report["host_loopback"] = "connected"
except OSError as exc:
    report["host_loopback"] = f"failed: {exc.strerror}"
finally:
    tcp.close()
# A UDP connect only looks up a route: nothing is sent. 192.0.2.1 is a documentation address.
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    udp.connect(("192.0.2.1", 9))
    report["route_off_machine"] = "routable"
except OSError as exc:
    report["route_off_machine"] = f"failed: {exc.strerror}"
finally:
    udp.close()
with open("network.json", "w") as note:
    json.dump(report, note)
"""
)

KILLS_PARENT = _at_import(
    """
import json, os, signal
parent = os.getppid()
os.kill(parent, signal.SIGKILL)
with open("parent.json", "w") as note:
    json.dump({"parent": parent}, note)
"""
)

MEMORY_HOG = _in_forward("hog = torch.ones(1 << 30)  # 4 GiB, past the memory limit\nhog.add_(1)")

CASES: dict[str, Case] = {
    "01_honest": _shared("1_honest"),
    "02_raises": _shared("7_raises"),
    "03_exits_quietly": _shared("10_exits_quietly"),
    "04_segfault": _shared("9_segfault"),
    "05_hangs_with_child": _shared("8_hangs"),
    "06_busy_loop": Case(BUSY_LOOP, "timeout", "wall_time"),
    "07_fork_bomb": Case(FORK_BOMB, "timeout", "wall_time"),
    "08_floods_output": Case(FLOOD, "correct", ""),
    "09_reads_host_env": Case(READS_ENV, "correct", ""),
    "10_writes_outside": Case(WRITES_OUTSIDE, "correct", "", frozenset({"filesystem"})),
    "11_opens_network": Case(OPENS_NETWORK, "correct", "", frozenset({"network"})),
    "12_kills_parent": Case(KILLS_PARENT, "correct", "", frozenset({"parent"})),
    "13_memory_hog": Case(MEMORY_HOG, "runtime_error", "crashed", frozenset({"memory"})),
    "99_honest_after": _shared("1_honest"),
}


def cases_for(executor: str) -> dict[str, Case]:
    return {name: case for name, case in CASES.items() if case.needs <= ISOLATION[executor]}
