"""`make mutants`: apply each bug of the catalogue in mutants/ and check that the book catches it.

Every file ``mutants/<name>.mutant`` describes one realistic bug as a small patch to the package:

    description: one line saying what the bug is
    catch: tests/test_attention.py chapters/01_attention.ipynb   (what is expected to catch it)
    file: npformer/core/attention.py
    --- old
    <lines of the package, exactly as they are>
    +++ new
    <the same lines with the bug>

(several ``file:`` / ``--- old`` / ``+++ new`` groups may follow one another). For each bug, the
tracked files of the repository are copied to a scratch folder, the patch is applied there (the
old text must occur exactly once: a patch that no longer applies is an error, not a pass), and
pytest runs what ``catch`` names, with nbval for notebooks, importing the scratch copy of the
package; it stops at the first failing test (``-x``), which is the one the table names.
The bug is caught when that run fails (pytest exit 1; a usage or internal error of
pytest is reported as not caught, with its message). Two bugs run at once (``MUTANT_WORKERS``).

Prints a table (bug, caught by, seconds) and ends with ``caught N of N``; exits 1 if any bug
was not caught, or a patch did not apply.

Usage: python scripts/mutants.py [NAME_SUBSTRING ...]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = ROOT / "mutants"
TIMEOUT = 600


class Mutant(NamedTuple):
    name: str
    description: str
    catch: list[str]
    patches: list[tuple[str, str, str]]  # (file, old, new)


class Outcome(NamedTuple):
    mutant: Mutant
    caught: bool
    by: str
    seconds: float
    error: str = ""


def parse(path: Path) -> Mutant:
    text = path.read_text()
    head, _, body = text.partition("\nfile: ")
    fields = dict(re.findall(r"^(description|catch): (.+)$", head, re.M))
    if set(fields) != {"description", "catch"} or not body:
        raise ValueError(f"{path.name}: needs description:, catch: and at least one file: group")
    patches = []
    for group in ("file: " + body).split("\nfile: "):
        group = group.removeprefix("file: ")
        m = re.match(r"(\S+)\n--- old\n(.*?)\n\+\+\+ new(?:\n(.*))?$", group, re.S)
        if not m:
            raise ValueError(f"{path.name}: a file: group needs '--- old' and '+++ new' parts")
        new = m.group(3) or ""  # an empty new part deletes the old lines
        if new and not new.endswith("\n"):
            new += "\n"
        patches.append((m.group(1), m.group(2) + "\n", new))
    return Mutant(path.stem, fields["description"].strip(), fields["catch"].split(), patches)


def scratch_copy(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file() and not src.is_symlink():
            target = dest / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def apply(mutant: Mutant, dest: Path) -> None:
    for file, old, new in mutant.patches:
        path = dest / file
        text = path.read_text()
        count = text.count(old)
        if count != 1:
            raise ValueError(f"{mutant.name}: the old text occurs {count} times in {file}")
        path.write_text(text.replace(old, new))


def failing(output: str) -> list[str]:
    """The tests (or notebook cells) that failed, from pytest's short summary, without their
    parameters: ``tests/test_masks.py::test_padding_mask_marks_the_first_length_positions``."""
    ids = re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", output, re.M)
    return sorted({i.split("[")[0].strip() for i in ids})


def run_one(mutant: Mutant) -> Outcome:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        dest = Path(tmp)
        scratch_copy(dest)
        try:
            apply(mutant, dest)
        except ValueError as exc:
            return Outcome(mutant, False, "", time.perf_counter() - start, str(exc))
        notebooks = [c for c in mutant.catch if c.endswith(".ipynb")]
        cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *mutant.catch]
        if notebooks:
            cmd += ["--nbval", "--nbval-current-env", "--nbval-sanitize-with",
                    "scripts/nbval_sanitize.cfg"]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=str(dest), NPFORMER_SKIP_BUDGETS="1")
        env.pop("CI", None)  # a skipped test here is not a CI failure
        where = subprocess.run(
            [sys.executable, "-c", "import npformer; print(npformer.__file__)"],
            cwd=dest / "chapters", env=env, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        if not where.startswith(str(dest)):
            raise RuntimeError(f"the scratch copy's package is not the one imported: {where}")
        try:
            run = subprocess.run(
                cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=TIMEOUT
            )
        except subprocess.TimeoutExpired:
            return Outcome(mutant, True, "timeout (the bug hangs the run)", TIMEOUT)
        output = run.stdout + run.stderr
        seconds = time.perf_counter() - start
        if run.returncode not in (0, 1, 5):  # interrupted, internal or usage error: no verdict
            last = output.strip().splitlines()[-1:] or [""]
            return Outcome(mutant, False, "", seconds, f"pytest exit {run.returncode}: {last[0]}")
        caught = run.returncode == 1  # some test failed
        by = ", ".join(failing(output)) or ("(exit 1)" if caught else "")
        return Outcome(mutant, caught, by, seconds)


def main(argv: list[str]) -> int:
    mutants = [parse(p) for p in sorted(CATALOGUE.glob("*.mutant"))]
    if argv:
        mutants = [m for m in mutants if any(a in m.name for a in argv)]
    workers = int(os.environ.get("MUTANT_WORKERS", "2"))
    start = time.perf_counter()
    print(f"{'bug':<42} {'caught by':<90} {'s':>5}")
    with ThreadPoolExecutor(workers) as pool:
        outcomes = []
        for outcome in pool.map(run_one, mutants):
            outcomes.append(outcome)
            m = outcome.mutant
            by = outcome.by if outcome.caught else f"NOT CAUGHT {outcome.error}".strip()
            print(f"{m.name:<42} {by:<90} {outcome.seconds:5.0f}", flush=True)
    caught = sum(o.caught for o in outcomes)
    print(f"mutants: {time.perf_counter() - start:.0f} s with {workers} worker(s)")
    print(f"caught {caught} of {len(outcomes)}")
    return 0 if caught == len(outcomes) and outcomes else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
