"""The budget rule of `make test` (the root conftest.py): budgets scale with the machine's speed,
measured on a reference workload that does not run the book's code."""

import importlib.util
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def rules():
    spec = importlib.util.spec_from_file_location("book_rules", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_workload_runs_none_of_the_books_code(rules):
    # a slower package must not make its own budget longer
    assert "npformer" not in inspect.getsource(rules.reference_workload)
    assert 0.05 < rules.REFERENCE_SECONDS < 5


def test_budgets_scale_with_a_slower_machine_and_never_shrink(rules, monkeypatch):
    monkeypatch.setattr(rules, "_reference", [2.5 * rules.REFERENCE_SECONDS])
    assert rules.budget_scale() == pytest.approx(2.5)
    monkeypatch.setattr(rules, "_reference", [0.5 * rules.REFERENCE_SECONDS])
    assert rules.budget_scale() == 1.0


def test_a_notebook_over_its_scaled_budget_fails_the_session(rules, monkeypatch, tmp_path):
    nb = tmp_path / "ch.ipynb"
    nb.write_text('{"cells": [], "metadata": {"book": {"budget_seconds": 10}}}')
    monkeypatch.delenv("NPFORMER_SKIP_BUDGETS", raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(rules, "_reference", [2 * rules.REFERENCE_SECONDS])

    class Session:
        class config:
            class pluginmanager:
                @staticmethod
                def get_plugin(name):
                    return None

    monkeypatch.setattr(rules, "_seconds", {str(nb): 19.0})
    assert rules._problems(Session) == []  # 19 s within 10 s x 2
    monkeypatch.setattr(rules, "_seconds", {str(nb): 21.0})
    [problem] = rules._problems(Session)
    assert "over its budget of 10 s x 2.00" in problem


def test_a_budget_scales_by_the_reference_timed_beside_its_notebook(rules, monkeypatch):
    # a machine busy while the notebook ran, quiet at the end: the slower reading counts
    monkeypatch.setattr(rules, "_reference", [rules.REFERENCE_SECONDS])
    monkeypatch.setattr(rules, "_beside", {"ch.ipynb": 1.5 * rules.REFERENCE_SECONDS})
    assert rules.budget_scale("ch.ipynb") == pytest.approx(1.5)
    assert rules.budget_scale("other.ipynb") == 1.0

    class Report:
        nodeid = "chapters/ch.ipynb::Cell 9"
        duration = 2.0
        user_properties = [
            ("reference_seconds", 3 * rules.REFERENCE_SECONDS),
            ("reference_wall", 0.5),
        ]

    monkeypatch.setattr(rules, "_seconds", rules.defaultdict(float))
    rules.pytest_runtest_logreport(Report)
    assert rules._beside["chapters/ch.ipynb"] == 3 * rules.REFERENCE_SECONDS
    # the reference's own wall time is not counted as the notebook's
    assert rules._seconds["chapters/ch.ipynb"] == pytest.approx(1.5)
    assert rules.budget_scale("chapters/ch.ipynb") == pytest.approx(3.0)


def test_under_xdist_the_long_notebooks_and_slow_test_files_start_first(rules):
    class Item:
        def __init__(self, nodeid):
            self.nodeid = nodeid

    class Config:
        def getoption(self, name, default=None):
            return 2 if name == "numprocesses" else default

    ids = [
        "chapters/01_attention.ipynb::Cell 0",
        "tests/test_attention.py::test_a",
        "tests/test_pdf.py::test_b",
        "chapters/11_ablations.ipynb::Cell 0",
        "chapters/11_ablations.ipynb::Cell 1",
        "tests/test_browser.py::test_c",
        "chapters/10_experiment.ipynb::Cell 0",
    ]
    items = [Item(i) for i in ids]
    rules.pytest_collection_modifyitems(None, Config(), items)
    assert [it.nodeid for it in items] == [
        "chapters/10_experiment.ipynb::Cell 0",
        "chapters/11_ablations.ipynb::Cell 0",
        "chapters/11_ablations.ipynb::Cell 1",
        "tests/test_pdf.py::test_b",
        "tests/test_browser.py::test_c",
        "tests/test_attention.py::test_a",
        "chapters/01_attention.ipynb::Cell 0",
    ]
