"""``runner/analysis/clock_mix.py``: a speedup's move between two runs compared clock by clock. The samples files are
written here in the worker's format (``samples.json``: each side's samples in batch order, each sample's batch clock,
each batch's placement), since a CPU has no clock to read; ``repeat`` over real CPU runs is in test_bench.py."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest

from runner.analysis.clock_mix import batch_speedups_by_clock, moved_at_matched_clocks, read_samples

BATCH = 8


def _samples(clocks: list[float | None], seed: int) -> dict:
    """A run of one power-capped task: a batch per clock, both sides at the batch's clock; the reference's time is
    set by memory (1 ms, hardly the clock's), the candidate's by the clock (0.5 ms at 1,980 MHz, 1/f below it), with
    0.1% noise. So its speedup is 2 at 1,980 MHz and less at lower clocks."""
    rng = random.Random(seed)
    samples = {"reference": [], "candidate": [], "sm_clock_mhz": {"reference": [], "candidate": []}}
    for clock in clocks:
        f = clock or 1980.0
        for _ in range(BATCH):
            samples["reference"].append(1.0 * (1 + 0.001 * rng.gauss(0, 1)))
            samples["candidate"].append(0.5 * 1980.0 / f * (1 + 0.001 * rng.gauss(0, 1)))
            for side in ("reference", "candidate"):
                samples["sm_clock_mhz"][side].append(clock)
    samples["batch_placement"] = [k % 2 for k in range(len(clocks))]
    return samples


def _pooled_speedup(samples: dict) -> float:
    return statistics.median(samples["reference"]) / statistics.median(samples["candidate"])


def test_a_move_made_by_the_clock_mix_goes_away_at_matched_clocks():
    # The first run got mostly low clocks, the second mostly high ones; at each clock the speedup is the same.
    first = _samples([1500.0] * 7 + [1980.0] * 3, seed=1)
    second = _samples([1500.0] * 2 + [1980.0] * 8, seed=2)
    pooled_move = _pooled_speedup(second) / _pooled_speedup(first) - 1
    assert pooled_move > 0.2  # the pooled medians differ by what the mix is worth (2 against 1.52)
    matched = moved_at_matched_clocks(first, second)
    assert matched["clocks"] == 2 and matched["batches"] == 2 + 3
    assert abs(matched["moved_pct"]) < 0.2


def test_a_move_of_the_kernels_own_stays_at_matched_clocks():
    first = _samples([1800.0, 1815.0, 1980.0] * 3, seed=3)
    second = _samples([1800.0, 1815.0, 1980.0] * 3, seed=4)
    second["candidate"] = [value / 1.03 for value in second["candidate"]]  # 3% faster at every clock
    assert moved_at_matched_clocks(first, second)["moved_pct"] == pytest.approx(3.0, abs=0.2)


def test_clocks_are_taken_to_nvmls_steps_and_batches_without_one_are_left_out():
    samples = _samples([1972.6, 1987.4, None, 1500.0], seed=5)
    by_clock = batch_speedups_by_clock(samples)
    assert sorted(by_clock) == [1500, 1980] and len(by_clock[1980]) == 2
    assert by_clock[1980][0] == pytest.approx(2 * 1972.6 / 1980, rel=0.01)  # in batch order
    # A CPU run (no readings) or a run with no clock in common: nothing to compare.
    cpu = _samples([None] * 4, seed=6)
    assert batch_speedups_by_clock(cpu) == {} and moved_at_matched_clocks(cpu, cpu) is None
    assert moved_at_matched_clocks(_samples([1500.0] * 3, 7), _samples([1980.0] * 3, 8)) is None
    assert batch_speedups_by_clock({"reference": [], "candidate": [], "batch_placement": []}) == {}


def test_a_missing_or_foreign_samples_file_reads_as_none(tmp_path):
    assert read_samples(tmp_path / "absent.json") is None
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    assert read_samples(tmp_path / "bad.json") is None and read_samples(tmp_path / "list.json") is None
    samples = _samples([1980.0], seed=9)
    (tmp_path / "samples.json").write_text(json.dumps(samples))
    assert read_samples(tmp_path / "samples.json") == samples
    assert math.isclose(_pooled_speedup(samples), 2.0, rel_tol=0.01)
