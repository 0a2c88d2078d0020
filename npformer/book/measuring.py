"""Measuring honestly: timers, the minimum of repeats, alternating pairs, peak memory, page faults.

Taught in the appendix on measuring (``chapters/14_measuring.ipynb``); chapters 08 and 09 use
these functions for their timings and their memory counts.

Two kinds of numbers come out of a measurement. Counts (bytes allocated, page faults, calls)
are properties of the code and of the allocator's settings: they are the same on every
machine, and a claim about them can be asserted exactly. Times depend on the processor, the
matrix kernels and whatever else the machine is doing; a claim about them is asserted only with
a margin that holds everywhere, and otherwise printed as this machine's measurement.

The allocator part: glibc's ``malloc`` decides whether freed memory is kept for the next
request or returned to the kernel, and environment variables tune it (``mallopt(3)``).
:func:`run_in_child` runs a piece of Python in a fresh process whose environment carries
exactly one allocator setting of :data:`ALLOCATOR_SETTINGS`, every inherited allocator variable
removed, and checks that the child saw exactly that setting.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from typing import NamedTuple

PAGE_BYTES = 4096  # the base page size of x86-64 Linux (huge pages are 2 MiB)
GiB = 2**30

#: Three settings of glibc's allocator. "defaults": as shipped (arrays above a threshold that
#: starts at 128 KiB are fresh mappings, the threshold rises as large arrays are freed, the top
#: of the heap is trimmed). "trim only": a high trim threshold, which (mallopt(3)) also freezes
#: the mapping threshold at 128 KiB. "kept": both thresholds high, so freed memory is reused.
ALLOCATOR_SETTINGS: dict[str, dict[str, str]] = {
    "defaults": {},
    "trim only": {"MALLOC_TRIM_THRESHOLD_": str(GiB)},
    "kept": {"MALLOC_TRIM_THRESHOLD_": str(GiB), "MALLOC_MMAP_THRESHOLD_": str(GiB)},
}


def min_time(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    """Smallest wall time of ``fn()`` in seconds over ``repeats`` calls, after ``warmup`` calls.

    Suited to a short call that can be repeated on a machine whose other work comes and goes:
    an interruption that hits some repeats leaves the smallest time unchanged, provided one
    repeat escapes it. It is not the typical time of a call, and load that lasts through every
    repeat raises it as well, so it describes one machine at one moment (the appendix prints the
    median and the maximum beside it).
    """
    for _ in range(warmup):
        fn()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def wall_and_cpu(fn: Callable[[], object], repeats: int = 1) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of ``repeats`` calls of ``fn()`` in total.

    With one thread, the CPU time cannot exceed the wall time (up to the timers' resolution);
    the gap between them is time the process waited (for the CPU, for the disk, for a sleep).
    """
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def side_by_side(baseline: Callable[[], object], candidate: Callable[[], object], pairs: int = 7):
    """Median over ``pairs`` alternating pairs of baseline time / candidate time (> 1: faster).

    The two calls alternate (baseline first, then candidate first, ...) so that load which
    drifts during the measurement hits both sides alike. Each timed call comes right after an
    untimed call of the same function: otherwise a call would start in the caches the other
    one left (a large working set evicts a small one's data), and the quotient would measure
    that cache state as well as the two calls.
    """
    ratios = []
    for i in range(pairs):
        order = (baseline, candidate) if i % 2 == 0 else (candidate, baseline)
        seconds = {}
        for fn in order:
            fn()  # untimed: the timed call starts in the caches its own work leaves
            start = time.perf_counter()
            fn()
            seconds[fn] = time.perf_counter() - start
        ratios.append(seconds[baseline] / seconds[candidate])
    ratios.sort()
    middle = len(ratios) // 2
    return ratios[middle] if len(ratios) % 2 else (ratios[middle - 1] + ratios[middle]) / 2


def peak_extra_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes traced by ``tracemalloc`` while ``fn()`` runs, above those alive at its start.

    NumPy reports its array buffers to tracemalloc, so this counts what the call allocates
    (its temporaries and its result). One call runs first, outside the count.
    """
    fn()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - before
        del result
    finally:
        tracemalloc.stop()
    return peak


def minor_faults() -> int:
    """Minor page faults of this process so far (``ru_minflt`` of ``getrusage``)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Counted(NamedTuple):
    """What :func:`count_faults` found: the result of the last call and the mean per call."""

    result: object
    faults_per_call: float
    best_seconds: float


def count_faults(fn: Callable[[], object], repeats: int = 1) -> Counted:
    """Minor page faults per call of ``fn()`` (mean over ``repeats``), and its best wall time.

    One warm-up call first, outside the count. A page fault is the kernel handing the process
    a fresh zeroed page on its first touch: a count, the same on every processor.
    """
    fn()
    best, result = math.inf, None
    faults = minor_faults()
    for _ in range(repeats):
        result = None  # the previous result is freed before the next call, as in a loop
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return Counted(result, (minor_faults() - faults) / repeats, best)


def pages(nbytes: int) -> int:
    """Base pages (4 KiB) spanned by ``nbytes`` bytes, rounded up."""
    return -(-nbytes // PAGE_BYTES)


def allocator_variable(name: str) -> bool:
    """True for an environment variable that can set or replace glibc's allocator."""
    return name.startswith("MALLOC_") or name in ("GLIBC_TUNABLES", "LD_PRELOAD")


def allocator_environment(setting: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without any allocator variable, plus
    exactly the variables of ``ALLOCATOR_SETTINGS[setting]``."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if not allocator_variable(k)}
    env.update(ALLOCATOR_SETTINGS[setting])
    return env


def allocator_setting(environ: Mapping[str, str] | None = None) -> str:
    """The name in :data:`ALLOCATOR_SETTINGS` whose variables ``environ`` (default: this
    process's environment) carries exactly, or ``"other"``.

    A timing page prints it: the allocator is chosen when the process starts, so a kernel
    started without the variables times with glibc's defaults.
    """
    environ = os.environ if environ is None else environ
    seen = {k: v for k, v in environ.items() if allocator_variable(k)}
    for name, variables in ALLOCATOR_SETTINGS.items():
        if seen == variables:
            return name
    return "other"


_CHILD_PRELUDE = """\
import json as _json, os as _os
import numpy as _np  # loads the BLAS library first, so that the limit below reaches it
from threadpoolctl import threadpool_limits as _threadpool_limits
_threadpool_limits(limits=1)  # one BLAS thread, as in the pages that time, whatever the env
_seen = {k: v for k, v in _os.environ.items()
         if k.startswith("MALLOC_") or k in ("GLIBC_TUNABLES", "LD_PRELOAD")}
"""
_CHILD_EPILOGUE = """
print(_json.dumps({"allocator variables": _seen, "result": result}))
"""


def run_in_child(code: str, setting: str) -> object:
    """Run ``code`` in a fresh Python process under one allocator setting; return its ``result``.

    ``code`` must assign a JSON-ready value to the name ``result``. The child starts from this
    process's environment with every allocator variable removed and ``setting``'s added, and
    runs with one BLAS thread (``threadpool_limits``) whatever that environment says; it
    reports the allocator variables it saw, and a RuntimeError is raised unless they are exactly
    ``ALLOCATOR_SETTINGS[setting]`` (or if the child fails): the run, not an argument, is wrong.
    """
    if setting not in ALLOCATOR_SETTINGS:
        raise ValueError(
            f"run_in_child: setting must be one of {tuple(ALLOCATOR_SETTINGS)}, got {setting!r}"
        )
    env = allocator_environment(setting)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD_PRELUDE + code + _CHILD_EPILOGUE],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"run_in_child: the child failed under {setting!r}:\n{done.stderr}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if report["allocator variables"] != ALLOCATOR_SETTINGS[setting]:
        raise RuntimeError(
            f"run_in_child: under {setting!r} the child saw {report['allocator variables']}, "
            f"expected {ALLOCATOR_SETTINGS[setting]}"
        )
    return report["result"]
