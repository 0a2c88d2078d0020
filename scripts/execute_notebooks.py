"""Re-execute notebooks in place so that their stored outputs are the code's outputs today.

Usage: python scripts/execute_notebooks.py chapters/01_attention.ipynb [more.ipynb ...]

Executes top to bottom in a fresh kernel of the current Python (the venv), through nbclient,
without per-cell timestamps, so that a re-run with no code change leaves ``git diff`` empty.
Prints each notebook's execution time and fails if any cell raises or if a notebook exceeds
its budget (``metadata.book.budget_seconds``) by the rule of `make test`, defined once in the
root conftest.py: the budget times this machine's reference time over the reference machine's,
never below 1.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
RULES = importlib.util.spec_from_file_location("book_rules", ROOT / "conftest.py")


def budget_rules():
    """The root conftest.py as a module: the budget rule of `make test`."""
    module = importlib.util.module_from_spec(RULES)
    RULES.loader.exec_module(module)
    return module


KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def merge_streams(outputs: list) -> list:
    """Join adjacent stream outputs of the same name.

    The kernel may split one ``print`` into several stream messages depending on timing; nbval
    compares the joined text anyway, but the stored JSON would change from run to run.
    """
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (
            out.get("output_type") == "stream"
            and prev is not None
            and prev.get("output_type") == "stream"
            and prev.get("name") == out.get("name")
        ):
            prev["text"] = "".join(prev["text"]) + "".join(out["text"])
        else:
            merged.append(out)
    return merged


def normalise(nb: nbformat.NotebookNode) -> None:
    """Drop volatile metadata so that stored notebooks only change when outputs change."""
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("widgets", None)
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        cell.metadata.pop("collapsed", None)
        cell.metadata.pop("scrolled", None)
        cell.pop("id", None)
        if cell.cell_type == "code":
            cell.outputs = merge_streams(cell.outputs)
            for out in cell.outputs:
                out.get("metadata", {}).pop("execution", None)
    nb.nbformat, nb.nbformat_minor = 4, 4


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=900,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    normalise(nb)
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted((ROOT / "chapters").glob("*.ipynb"))
    took = {}
    for path in paths:
        took[path] = execute(path)
        print(f"{path.name}: executed in {took[path]:.1f} s", flush=True)
    rules = budget_rules()
    scale = rules.budget_scale()  # timed now that the notebooks are done, as `make test` does
    print(
        f"reference workload: {rules._reference[0]:.3f} s here, {rules.REFERENCE_SECONDS:.3f} s "
        f"on {rules.REFERENCE_MACHINE}: budgets x {scale:.2f}"
    )
    over = []
    for path, seconds in took.items():
        budget = nbformat.read(path, as_version=4).metadata.get("book", {}).get("budget_seconds")
        if budget is not None and seconds > budget * scale:
            over.append(f"{path.name} took {seconds:.1f} s > budget {budget} s x {scale:.2f}")
    for line in over:
        print("OVER BUDGET:", line)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
