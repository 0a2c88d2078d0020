"""Re-run the notebooks under other floating-point kernels, then under load (`make test-portable`).

Stored outputs come from one machine; a reader's machine has other BLAS and SIMD kernels and
other programs running. Two passes:

1. Each setting below runs the whole notebook suite in its own process environment, both at
   once, each single-threaded:
   - ``OPENBLAS_CORETYPE=Prescott``: OpenBLAS's oldest x86-64 kernels (SSE3 instead of AVX-512);
   - ``NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,AVX512_ICL``: NumPy's own SIMD dispatch down to its
     baseline (disabling a feature the CPU lacks is harmless).
2. The chapters whose asserts depend on wall time (``metadata.book.timing_claims``, checked by
   tests/test_notebooks.py) run again with the default kernels while a busy loop keeps every
   core busy. The loop is bounded (it stops by itself
   after ``LOAD_SECONDS_MAX``) and is stopped by this script as soon as the pass ends.

Notebook budgets are not enforced in either pass: both share the cores with other work, so
their times are reported, not judged (``make test`` enforces the budgets on an idle machine).
"""

from __future__ import annotations

import glob
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {
    "openblas-prescott": {"OPENBLAS_CORETYPE": "Prescott"},
    "numpy-baseline-simd": {"NPY_DISABLE_CPU_FEATURES": "X86_V3,X86_V4,AVX512_ICL"},
}
LOAD_SECONDS_MAX = 1200


def pytest_command(notebooks: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "--nbval",
        "--nbval-current-env",
        "--nbval-sanitize-with",
        str(ROOT / "scripts" / "nbval_sanitize.cfg"),
        *notebooks,
    ]


def times_something(path: str) -> bool:
    """True when the notebook declares asserts that depend on wall time (they could on load)."""
    meta = json.loads(Path(path).read_text())["metadata"]
    return bool(meta.get("book", {}).get("timing_claims"))


def busy(seconds: float) -> None:
    """Keep one core busy for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    x = 0
    while time.monotonic() < deadline:
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF


def run_suites(suites: dict[str, tuple[list[str], dict]]) -> list[str]:
    """Run the suites at once; print one line per suite; return the names that failed."""
    procs = {}
    for name, (notebooks, extra) in suites.items():
        env = dict(os.environ, NPFORMER_SKIP_BUDGETS="1", **extra)
        log = open(ROOT / "_build" / f"portable-{name}.log", "w")
        proc = subprocess.Popen(
            pytest_command(notebooks), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        procs[name] = (proc, log, time.perf_counter())
    failed = []
    for name, (proc, log, start) in procs.items():
        code = proc.wait()
        log.close()
        text = (ROOT / "_build" / f"portable-{name}.log").read_text()
        lines = [line for line in text.splitlines() if line.strip()]
        times = [line for line in lines if re.match(r"^chapters/\S+\.ipynb: ", line)]
        settings = " ".join(f"{k}={v}" for k, v in suites[name][1].items()) or "default kernels"
        print(f"[{name}] {settings}: exit {code} in {time.perf_counter() - start:.0f} s: ")
        print(f"  {lines[-1] if lines else '(no output)'}")
        for line in times:
            print(f"  {line}")
        if code != 0:
            failed.append(name)
            print(text[-6000:])
    return failed


def main(argv: list[str]) -> int:
    notebooks = argv or sorted(glob.glob(str(ROOT / "chapters" / "*.ipynb")))
    failed = run_suites({name: (notebooks, extra) for name, extra in SETTINGS.items()})

    timed = [nb for nb in notebooks if times_something(nb)]
    if timed:
        cores = os.cpu_count() or 1
        loaders = [
            multiprocessing.Process(target=busy, args=(LOAD_SECONDS_MAX,), daemon=True)
            for _ in range(cores)
        ]
        for p in loaders:
            p.start()
        print(f"[loaded] {cores} busy loop(s) on {cores} core(s) while the timing chapters run:")
        try:
            failed += run_suites({"loaded": (timed, {})})
        finally:
            for p in loaders:
                p.terminate()
            for p in loaders:
                p.join()
        print(f"[loaded] busy loops stopped ({sum(p.is_alive() for p in loaders)} still alive)")
    return 1 if failed else 0


if __name__ == "__main__":
    (ROOT / "_build").mkdir(exist_ok=True)
    sys.exit(main(sys.argv[1:]))
