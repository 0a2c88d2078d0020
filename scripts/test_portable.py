"""Re-run the nbval suite under other floating-point kernels (`make test-portable`).

Stored outputs come from one machine; a reader's machine has other BLAS and SIMD kernels. Each
setting below runs the whole notebook suite in its own process environment, both at once, each
single-threaded:

- ``OPENBLAS_CORETYPE=Prescott``: OpenBLAS's oldest x86-64 kernels (SSE3 instead of AVX-512);
- ``NPY_DISABLE_CPU_FEATURES=X86_V3,X86_V4,AVX512_ICL``: NumPy's own SIMD dispatch down to its
  baseline (disabling a feature the CPU lacks is harmless).

Notebook budgets are not enforced here (two suites share the cores).
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {
    "openblas-prescott": {"OPENBLAS_CORETYPE": "Prescott"},
    "numpy-baseline-simd": {"NPY_DISABLE_CPU_FEATURES": "X86_V3,X86_V4,AVX512_ICL"},
}


def main(argv: list[str]) -> int:
    notebooks = argv or sorted(glob.glob(str(ROOT / "chapters" / "*.ipynb")))
    procs = {}
    for name, extra in SETTINGS.items():
        env = dict(os.environ, NPFORMER_SKIP_BUDGETS="1", **extra)
        cmd = [
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
        log = open(ROOT / "_build" / f"portable-{name}.log", "w")
        procs[name] = (
            subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT),
            log,
            time.perf_counter(),
        )
    failed = []
    for name, (proc, log, start) in procs.items():
        code = proc.wait()
        log.close()
        text = (ROOT / "_build" / f"portable-{name}.log").read_text()
        summary = [line for line in text.splitlines() if line.strip()][-1:]
        print(
            f"[{name}] {' '.join(f'{k}={v}' for k, v in SETTINGS[name].items())}: exit {code} "
            f"in {time.perf_counter() - start:.0f} s: {summary[0] if summary else ''}"
        )
        if code != 0:
            failed.append(name)
            print(text[-6000:])
    return 1 if failed else 0


if __name__ == "__main__":
    (ROOT / "_build").mkdir(exist_ok=True)
    sys.exit(main(sys.argv[1:]))
