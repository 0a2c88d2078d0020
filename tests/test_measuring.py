"""Tests of npformer.book.measuring (the appendix on measuring honestly).

- the timers: a sleep is wall time, not CPU time; min_time is at most any single call;
- side_by_side sees a clearly slower baseline as slower, and times each call after one of
  its own (a call that is slow only after the other function's call is timed fast);
- peak_extra_bytes counts an array's bytes;
- page faults: under "trim only" every large array is fresh pages (at least its pages are
  faulted in), under "kept" a repeated call faults in none; the child sees exactly its setting;
- bad arguments raise ValueError naming the argument.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from npformer.book.measuring import (
    ALLOCATOR_SETTINGS,
    allocator_environment,
    allocator_setting,
    allocator_variable,
    count_faults,
    min_time,
    pages,
    peak_extra_bytes,
    run_in_child,
    side_by_side,
)

SLEEP = """
import time
from npformer.book.measuring import wall_and_cpu
result = wall_and_cpu(lambda: time.sleep(0.05))
"""


def test_sleep_is_wall_time_not_cpu_time(monkeypatch):
    # in a child with one BLAS thread: idle OpenBLAS threads of a multi-threaded build spin
    # and burn CPU time while the main thread sleeps (the appendix shows it)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    wall, cpu = run_in_child(SLEEP, "kept")
    assert wall >= 0.05 and cpu < 0.03


THREADS = """
from threadpoolctl import threadpool_info
result = sorted({pool["num_threads"] for pool in threadpool_info()})
"""


def test_child_runs_with_one_blas_thread_whatever_the_environment(monkeypatch):
    # the appendix's children time attention: they must not inherit a multi-threaded BLAS
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "2")
    assert run_in_child(THREADS, "kept") == [1]


def test_min_time_is_at_most_one_call():
    calls = []
    best = min_time(lambda: calls.append(time.sleep(0.001)), repeats=3, warmup=2)
    assert len(calls) == 5 and 0.001 <= best < 0.5


def test_side_by_side_sees_the_slower_side():
    ratio = side_by_side(lambda: time.sleep(0.02), lambda: None, pairs=3)
    assert ratio > 10


def test_side_by_side_times_each_call_after_one_of_its_own():
    # a stand-in for a cache: the candidate is slow (a 20 ms sleep) only when the last call
    # was the baseline's, as a small working set is after a large one evicted it. Timed
    # right after the baseline, as the first call of a pair or after the previous pair's
    # baseline, it would always be slow and the ratio about 1.
    last = []

    def baseline():
        last.append("baseline")
        time.sleep(0.02)

    def candidate():
        if last and last[-1] == "baseline":
            time.sleep(0.02)
        last.append("candidate")

    assert side_by_side(baseline, candidate, pairs=3) > 10


def test_peak_extra_bytes_counts_an_array():
    n = 1 << 20
    peak = peak_extra_bytes(lambda: np.ones(n))
    assert 8 * n <= peak < 8 * n + 64 * 1024


def test_pages_rounds_up():
    assert pages(0) == 0 and pages(1) == 1 and pages(4096) == 1 and pages(4097) == 2


def test_allocator_environment_removes_inherited_settings():
    base = {"PATH": "/bin", "MALLOC_ARENA_MAX": "2", "GLIBC_TUNABLES": "x", "LD_PRELOAD": "y"}
    assert allocator_environment("defaults", base) == {"PATH": "/bin"}
    kept = allocator_environment("kept", base)
    assert {k for k in kept if allocator_variable(k)} == set(ALLOCATOR_SETTINGS["kept"])


def test_allocator_setting_names_the_environment():
    kept = dict(ALLOCATOR_SETTINGS["kept"], PATH="/bin")
    assert allocator_setting(kept) == "kept"
    assert allocator_setting({"PATH": "/bin"}) == "defaults"
    assert allocator_setting(dict(kept, MALLOC_ARENA_MAX="2")) == "other"


FAULTS = """
import numpy as np
from npformer.book.measuring import count_faults
n = 1 << 19  # 4 MiB of float64: far above glibc's first mapping threshold of 128 KiB
result = count_faults(lambda: np.ones(n), repeats=5).faults_per_call
"""


def test_fresh_pages_are_faults_and_kept_memory_is_not():
    fresh = run_in_child(FAULTS, "trim only")
    kept = run_in_child(FAULTS, "kept")
    # a 4 MiB array is 1024 pages; with transparent huge pages on madvise NumPy may get 2 MiB
    # pages, so the count can fall to a few faults, but never to zero
    assert fresh >= 2 and kept == 0


def test_count_faults_returns_the_result():
    counted = count_faults(lambda: 41 + 1, repeats=2)
    assert counted.result == 42 and counted.faults_per_call >= 0


def test_child_reports_failure():
    with pytest.raises(RuntimeError, match="failed"):
        run_in_child("raise SystemExit(3)", "kept")


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: run_in_child("result = 1", "fast"), "setting"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
