"""Re-run the notebooks under other floating-point kernels, then under load (`make test-portable`).

Stored outputs come from one machine; a reader's machine has other BLAS and SIMD kernels and
other programs running. Two passes:

1. Each setting below runs the whole notebook suite in its own process environment, one
   setting after the other, each with one pytest worker per core (pytest-xdist) and one BLAS
   thread per worker:
   - the other of OpenBLAS's two AVX kernel sets, with NumPy's full SIMD dispatch: processors
     differ in which they pick (``Haswell``, AVX2, on some; ``SkylakeX``, AVX-512, on Intel
     Xeons and AMD Zen 4), so a machine that picks one runs the other here, as a reader's
     machine may (skipped where the CPU lacks the instructions);
   - ``OPENBLAS_CORETYPE=Prescott``: OpenBLAS's oldest x86-64 kernels (SSE3).
   So every notebook runs under both AVX kernel sets (`make test` runs the machine's own) and
   under the oldest. NumPy's baseline SIMD loops (``NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,
   AVX512_ICL``) are no longer a suite of their own: a third suite would take CI past 45 minutes
   on 2 cores, and the processors readers have run one of the two AVX sets. The float32 page
   (14_deeper_float32) still trains under the baseline loops in its own processes. (Paired
   with Prescott, on an AMD EPYC with 2 cores, the baseline loops took a suite from 345 s to
   757 s, and 05_deeper_extrapolation's threshold of 0.97 for every seed failed in one seed.)
   A setting that only picks OpenBLAS kernels, and picks the machine's default ones (read with
   threadpoolctl), is not run: `make test` has just run them.
2. The chapters whose asserts depend on wall time (``metadata.book.timing_claims``, checked by
   tests/test_notebooks.py) run again with the default kernels while a busy loop keeps every
   core busy. The loop is bounded (it stops by itself
   after ``LOAD_SECONDS_MAX``) and is stopped by this script as soon as the pass ends.

Notebook budgets are not enforced in either pass: the kernels are slower than the machine's own
and the second pass is loaded on purpose, so their times are reported, not judged (``make
test`` enforces the budgets).
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
SETTINGS = {"openblas-prescott": {"OPENBLAS_CORETYPE": "Prescott"}}
PROBE = "import json, numpy, threadpoolctl; print(json.dumps(threadpoolctl.threadpool_info()))"
LOAD_SECONDS_MAX = 1200


def pytest_command(notebooks: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-n",
        str(cores()),
        "--dist",
        "loadfile",
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


def blas_kernels(extra: dict) -> str | None:
    """The OpenBLAS kernels NumPy runs with ``extra`` in the environment (None: not OpenBLAS)."""
    run = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=dict(os.environ, **extra),
        capture_output=True,
        text=True,
        check=True,
    )
    found = [i for i in json.loads(run.stdout) if i.get("internal_api") == "openblas"]
    return found[0].get("architecture") if found else None


def cpu_has(flag: str) -> bool:
    """True when /proc/cpuinfo lists ``flag`` (False where there is no /proc/cpuinfo)."""
    try:
        return f" {flag} " in Path("/proc/cpuinfo").read_text().replace("\n", " ")
    except OSError:
        return False


def cores() -> int:
    """The cores this process may use (a container or affinity mask may allow fewer)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


#: OpenBLAS's AVX-512 kernel sets: a machine that picks one of them runs Haswell's as the other
AVX512_KERNELS = ("SkylakeX", "Cooperlake", "SapphireRapids")


def chosen_settings() -> dict[str, dict]:
    """SETTINGS less the OpenBLAS kernels `make test` already runs and those this CPU lacks."""
    default = blas_kernels({})
    print(f"`make test` runs NumPy with OpenBLAS {default} kernels (this machine's default)")
    other = "Haswell" if default in AVX512_KERNELS else "SkylakeX"
    chosen = {}
    for name, extra in {"other-avx-kernels": {"OPENBLAS_CORETYPE": other}, **SETTINGS}.items():
        coretype = extra.get("OPENBLAS_CORETYPE")
        # the instructions the kernels use
        needs = {"SkylakeX": "avx512f", "Haswell": "avx2"}.get(coretype)
        if needs is not None and not cpu_has(needs):
            # the kernels cannot run here; the rest of the setting (if any) still does
            print(f"[{name}] without {coretype} kernels: this CPU has no {needs}")
            extra = {k: v for k, v in extra.items() if k != "OPENBLAS_CORETYPE"}
            if extra:
                chosen[name] = extra
        elif coretype is not None and coretype == default and len(extra) == 1:
            print(f"[{name}] not run again: these are the kernels `make test` runs")
        else:
            chosen[name] = extra
    return chosen


def run_suites(suites: dict[str, tuple[list[str], dict]]) -> list[str]:
    """Run the suites one after another; print one line per suite; return the names that failed."""
    failed = []
    for name, (notebooks, extra) in suites.items():
        # each notebook trains in its own process: the pytest workers already fill the cores
        env = dict(os.environ, NPFORMER_SKIP_BUDGETS="1", NPFORMER_WORKERS="1", **extra)
        log = open(ROOT / "_build" / f"portable-{name}.log", "w")
        start = time.perf_counter()
        proc = subprocess.Popen(
            pytest_command(notebooks), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
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
    began = time.perf_counter()
    notebooks = argv or sorted(glob.glob(str(ROOT / "chapters" / "*.ipynb")))
    failed = run_suites({name: (notebooks, extra) for name, extra in chosen_settings().items()})

    timed = [nb for nb in notebooks if times_something(nb)]
    if timed:
        n = cores()
        loaders = [
            multiprocessing.Process(target=busy, args=(LOAD_SECONDS_MAX,), daemon=True)
            for _ in range(n)
        ]
        for p in loaders:
            p.start()
        print(f"[loaded] {n} busy loop(s) on {n} core(s) while the timing chapters run:")
        try:
            failed += run_suites({"loaded": (timed, {})})
        finally:
            for p in loaders:
                p.terminate()
            for p in loaders:
                p.join()
        print(f"[loaded] busy loops stopped ({sum(p.is_alive() for p in loaders)} still alive)")
    wall = time.perf_counter() - began
    print(f"make test-portable: {wall:.0f} s in all, failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    (ROOT / "_build").mkdir(exist_ok=True)
    sys.exit(main(sys.argv[1:]))
