"""Session-wide pytest rules for `make test` and `make test-portable`.

- Each notebook's execution time under nbval is summed and printed. A notebook over its budget
  fails the session (``make test`` only: ``make test-portable`` runs under slower kernels and
  under load on purpose, and sets NPFORMER_SKIP_BUDGETS=1).
- A budget means the same on a slower CPU. ``metadata.book.budget_seconds`` is a time on the
  reference machine (``REFERENCE_MACHINE``); the session times a fixed reference workload (plain
  NumPy: small float32 products, softmax rows and many small calls, what the long chapters
  spend their time on; none of the book's model code, so a slower package does not lengthen
  its own budget) and scales every budget by how much slower that workload runs here than
  there (never below 1). So a slower CPU need not fail a chapter that did not get slower. The
  workload does not see every difference between machines (large float64 products, memory
  bandwidth, two workers sharing it), and the budgets keep a margin for that. The raw seconds
  stay in the report.
- The workload is timed twice: once at the end of the session, on a quiet machine, and once
  beside each notebook, in its worker right after its last cell, under whatever else the
  machine was running then. A notebook's budget scales by the slower of the two, so load that
  slows a notebook (another process on the cores) lengthens its budget too, and a busy machine
  does not fail a chapter that did not get slower.
- Under pytest-xdist (``make test`` runs one worker per core), the longest notebooks are
  started first, and a notebook's cells stay together in one worker (``--dist loadfile``).
- Under CI (``CI=true``) a skipped test fails the session: a green run means everything ran.
- The notebooks of one session share their training runs: ``npformer.training.train.train`` keeps
  each run of 200 steps or more, with a copy of its parameters every 100 steps, in a folder made
  for the session (``$NPFORMER_SHARED_RUNS``, removed at its end), keyed by everything that
  decides its numbers, and a notebook that trains the same run again, or asks for those
  checkpoints of it, reads it. Most of the runs chapters 09, 11 and 12 train are in chapter 10's
  grid. The tests under tests/ never read a shared run (tests/conftest.py), so what they check
  about training is computed. A notebook that read a run is faster than a reader's: its budget
  still holds for a notebook that trained everything itself, as budgets are set on such runs.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from npformer.book.measuring import min_time
from npformer.training.train import SHARED_RUNS_ENV

# The reference workload's best time on the machine the budgets were measured on.
REFERENCE_MACHINE = "AMD EPYC (Zen 4), 2 vCPUs, OpenBLAS 0.3.31 SkylakeX kernels"
REFERENCE_SECONDS = 0.147

LONG_SECONDS = 100  # a notebook with a longer budget starts before the test files
# test files that take minutes (seconds on the reference machine, two workers): they start
# with the long notebooks, so that no worker is left with one of them at the end
SLOW_TEST_FILES = {"tests/test_pdf.py": 300, "tests/test_browser.py": 150}

_seconds: dict[str, float] = defaultdict(float)
_reference: list[float] = []
_beside: dict[str, float] = {}  # the reference timed beside each notebook, in its worker


def reference_workload() -> None:
    """What a chapter spends its time on, in plain NumPy: small float32 matrix products,
    a softmax over short rows, elementwise passes and many small calls (a forward and
    backward step of the experiment's model, roughly: batch 32, 13 positions, width 32,
    4 heads)."""
    rng = np.random.default_rng(0)
    B, T, d, h, f = 32, 13, 32, 4, 128
    x = rng.standard_normal((B * T, d)).astype(np.float32)
    W_qkv, W_o = (rng.standard_normal((d, n)).astype(np.float32) / np.sqrt(d) for n in (3 * d, d))
    W_1 = rng.standard_normal((d, f)).astype(np.float32) / np.sqrt(d)
    W_2 = rng.standard_normal((f, d)).astype(np.float32) / np.sqrt(f)
    for _ in range(150):
        q, k, v = (x @ W_qkv).reshape(B, T, 3, h, d // h).transpose(2, 0, 3, 1, 4)
        scores = q @ k.swapaxes(-1, -2) / np.float32(np.sqrt(d // h))  # (B, h, T, T)
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        y = (weights @ v).transpose(0, 2, 1, 3).reshape(B * T, d) @ W_o
        hidden = np.maximum(y @ W_1, 0)  # (B T, f)
        out = hidden @ W_2
        d_hidden = (out @ W_2.T) * (hidden > 0)  # a backward pass's shapes
        d_W1, d_W2 = y.T @ d_hidden, hidden.T @ out
        d_weights = (out.reshape(B, T, h, d // h).transpose(0, 2, 1, 3)) @ v.swapaxes(-1, -2)
        d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))
        assert np.isfinite(d_W1).all() and np.isfinite(d_W2).all() and np.isfinite(d_scores).all()


def time_reference(repeats: int = 5) -> float:
    return min_time(reference_workload, repeats)


def budget_scale(notebook: str | None = None) -> float:
    """How much longer a budget is on this machine: reference time here / there, at least 1;
    for a notebook, the slower of the quiet reading and the one timed beside it."""
    if not _reference:
        _reference.append(time_reference())
    here = max(_reference[0], _beside.get(notebook, 0.0))
    return max(1.0, here / REFERENCE_SECONDS)


def _in_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _notebook(nodeid: str) -> str | None:
    path = nodeid.split("::", 1)[0]
    return path if path.endswith(".ipynb") else None


def _metadata(path: str) -> dict:
    return json.loads(Path(path).read_text())["metadata"].get("book", {})


def pytest_configure(config):
    """The controller makes the session's folder of shared training runs (unless one is set);
    the workers, and the notebooks' kernels, inherit it through the environment."""
    if _in_worker(config) or os.environ.get(SHARED_RUNS_ENV):
        return
    config.shared_runs = tempfile.mkdtemp(prefix="npformer-shared-runs-")
    os.environ[SHARED_RUNS_ENV] = config.shared_runs


def pytest_unconfigure(config):
    folder = getattr(config, "shared_runs", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(SHARED_RUNS_ENV, None)


def shared_runs_summary(folder: str | None) -> str | None:
    """How many runs the session trained and kept, and how many times one was read instead."""
    if folder is None or not Path(folder).is_dir():
        return None
    kept = len(list(Path(folder).glob("*.pkl")))
    log = Path(folder) / "shared.log"
    read = len(log.read_text().splitlines()) if log.exists() else 0
    trained = Path(folder) / "trained.log"
    times = defaultdict(list)  # run -> the seconds of each time it was trained
    for line in trained.read_text().splitlines() if trained.exists() else ():
        stem, seconds = line.split()
        times[stem].append(float(seconds))
    twice = {stem: t for stem, t in times.items() if len(t) > 1}  # e.g. two notebooks at once
    lost = sum(sum(t[1:]) for t in twice.values())
    return (
        f"training runs kept for sharing: {kept}; read by a notebook instead of trained: {read}; "
        f"trained twice: {len(twice)} ({lost:.0f} s)"
    )


def pytest_collection_modifyitems(session, config, items):
    """Run order under pytest-xdist: the notebooks over ``LONG_SECONDS`` and the slow test
    files first (longest first), then the other test files, then the other notebooks (longest
    first), which are short and so even out the workers' ends. Each file keeps its order."""
    if not (_in_worker(config) or config.getoption("numprocesses", None)):
        return  # one process: the order of collection is as good as any
    budgets = {}
    for item in items:
        nb = _notebook(item.nodeid)
        if nb is not None and nb not in budgets:
            budgets[nb] = _metadata(nb).get("budget_seconds", 0)

    def rank(item):
        nb = _notebook(item.nodeid)
        if nb is None:
            slow = SLOW_TEST_FILES.get(item.nodeid.split("::", 1)[0])
            return (1, 0) if slow is None else (0, -slow)
        return (0 if budgets[nb] > LONG_SECONDS else 2, -budgets[nb])

    if budgets:
        position = {id(item): i for i, item in enumerate(items)}
        items.sort(key=lambda it: (rank(it), position[id(it)]))


def pytest_runtest_teardown(item, nextitem):
    """After a notebook's last cell, time the reference workload in the same worker, under
    the same load; the reading travels to the controller with the teardown's report."""
    nb = _notebook(item.nodeid)
    if nb is None or not _enforced():
        return
    if nextitem is None or _notebook(nextitem.nodeid) != nb:
        start = time.perf_counter()
        item.user_properties.append(("reference_seconds", time_reference()))
        # the reference's own wall time is not the notebook's
        item.user_properties.append(("reference_wall", time.perf_counter() - start))


def pytest_runtest_logreport(report):
    nb = _notebook(report.nodeid)
    if nb is not None:
        _seconds[nb] += report.duration
        for name, value in getattr(report, "user_properties", ()):
            if name == "reference_seconds":
                _beside[nb] = max(_beside.get(nb, 0.0), value)
            elif name == "reference_wall":
                _seconds[nb] -= value


def _budget(path: str) -> float | None:
    return _metadata(path).get("budget_seconds")


def _ignored_cells(path: str) -> int:
    cells = json.loads(Path(path).read_text())["cells"]
    return sum("nbval-ignore-output" in c.get("metadata", {}).get("tags", []) for c in cells)


def _enforced() -> bool:
    return os.environ.get("NPFORMER_SKIP_BUDGETS") != "1"


def _problems(session) -> list[str]:
    problems = []
    if _enforced() and _seconds:
        for nb, seconds in sorted(_seconds.items()):
            budget, scale = _budget(nb), budget_scale(nb)
            if budget is not None and seconds > budget * scale:
                problems.append(
                    f"{nb} executed in {seconds:.1f} s, over its budget of {budget} s "
                    f"x {scale:.2f} (this machine's reference time) = {budget * scale:.0f} s"
                )
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if os.environ.get("CI", "").lower() == "true" and skipped:
        problems.append(f"{len(skipped)} test(s) skipped under CI: a green CI run must run all")
    return problems


def pytest_sessionfinish(session, exitstatus):
    if _in_worker(session.config):
        return
    if _seconds and _enforced():
        _reference.append(time_reference())  # timed once the notebooks are done: a quiet machine
    if _problems(session) and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _in_worker(config):
        return
    if _seconds:
        terminalreporter.section("notebook execution time")
        if _enforced():
            scale = budget_scale()
            terminalreporter.write_line(
                f"reference workload: {_reference[0]:.3f} s here, {REFERENCE_SECONDS:.3f} s on "
                f"{REFERENCE_MACHINE}: budgets x {scale:.2f}"
            )
        for nb, seconds in sorted(_seconds.items()):
            budget = _budget(nb)
            beside = f", x {budget_scale(nb):.2f} beside it" if nb in _beside else ""
            terminalreporter.write_line(
                f"{nb}: {seconds:6.1f} s (budget {budget} s{beside}), "
                f"{_ignored_cells(nb)} cell(s) tagged nbval-ignore-output"
            )
        shared = shared_runs_summary(getattr(config, "shared_runs", None))
        if shared is not None:
            terminalreporter.write_line(shared)
    for line in _problems(terminalreporter._session):
        terminalreporter.write_line(f"FAILED RULE: {line}", red=True, bold=True)
