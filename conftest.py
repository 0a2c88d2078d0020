"""Session-wide pytest rules for `make test` and `make test-portable`.

- Each notebook's execution time under nbval is summed and printed; a notebook over the budget
  in its metadata (``metadata.book.budget_seconds``) fails the session (``make test`` only:
  ``make test-portable`` runs two suites at once and sets NPFORMER_SKIP_BUDGETS=1).
- Under CI (``CI=true``) a skipped test fails the session: a green run means everything ran.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

_seconds: dict[str, float] = defaultdict(float)


def _notebook(nodeid: str) -> str | None:
    path = nodeid.split("::", 1)[0]
    return path if path.endswith(".ipynb") else None


def pytest_runtest_logreport(report):
    nb = _notebook(report.nodeid)
    if nb is not None:
        _seconds[nb] += report.duration


def _budget(path: str) -> float | None:
    meta = json.loads(Path(path).read_text())["metadata"]
    return meta.get("book", {}).get("budget_seconds")


def _ignored_cells(path: str) -> int:
    cells = json.loads(Path(path).read_text())["cells"]
    return sum("nbval-ignore-output" in c.get("metadata", {}).get("tags", []) for c in cells)


def _problems(session) -> list[str]:
    problems = []
    if os.environ.get("NPFORMER_SKIP_BUDGETS") != "1":
        for nb, seconds in sorted(_seconds.items()):
            budget = _budget(nb)
            if budget is not None and seconds > budget:
                problems.append(f"{nb} executed in {seconds:.1f} s, over its budget of {budget} s")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if os.environ.get("CI", "").lower() == "true" and skipped:
        problems.append(f"{len(skipped)} test(s) skipped under CI: a green CI run must run all")
    return problems


def pytest_sessionfinish(session, exitstatus):
    if _problems(session) and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _seconds:
        terminalreporter.section("notebook execution time")
        for nb, seconds in sorted(_seconds.items()):
            budget = _budget(nb)
            terminalreporter.write_line(
                f"{nb}: {seconds:6.1f} s (budget {budget} s), "
                f"{_ignored_cells(nb)} cell(s) tagged nbval-ignore-output"
            )
    for line in _problems(terminalreporter._session):
        terminalreporter.write_line(f"FAILED RULE: {line}", red=True, bold=True)
