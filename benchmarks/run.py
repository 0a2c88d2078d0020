"""Run every side-by-side comparison in benchmarks/ and check its target (`make bench`).

Prints the machine's BLAS and thread settings first, then one line per comparison:
``ratio <name> <value>`` (baseline over candidate: higher is better), and exits non-zero when a
target is missed. ``python benchmarks/run.py quadratic`` runs only the modules whose name
contains "quadratic".
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def machine_report() -> None:
    import numpy as np
    from threadpoolctl import threadpool_info

    print(f"python {platform.python_version()} numpy {np.__version__} on {platform.machine()}")
    for key in (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_MMAP_THRESHOLD_",
        "OPENBLAS_CORETYPE",
        "NPY_DISABLE_CPU_FEATURES",
    ):
        print(f"  {key}={os.environ.get(key, '(unset)')}")
    for pool in threadpool_info():
        print(
            f"  {pool.get('internal_api')} {pool.get('version')} "
            f"kernels={pool.get('architecture')} threads={pool.get('num_threads')}"
        )


def main(argv: list[str]) -> int:
    machine_report()
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if argv:
        modules = [m for m in modules if any(a in m for a in argv)]
    missed = []

    def report(name: str, value: float, target: float) -> None:
        verdict = "ok" if value >= target else "MISSED"
        print(f"ratio {name} {value:.2f}", flush=True)
        print(f"  target >= {target:g}: {verdict}", flush=True)
        if value < target:
            missed.append(f"{name} = {value:.2f} < {target:g}")

    start = time.perf_counter()
    for name in modules:
        print(f"== {name}", flush=True)
        importlib.import_module(name).run(report)
    print(f"bench: {time.perf_counter() - start:.0f} s")
    for line in missed:
        print("MISSED TARGET:", line)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
