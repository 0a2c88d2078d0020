"""The hidden first cell of every notebook really installs the package where it is missing.

Colab and Binder cannot be reached from CI, so this exercises the same code path locally: a
fresh virtual environment that sees the locked dependencies but NOT the package, a local clone of
this repository standing in for the public URL, the install cell executed as written, then an
import of the package from that environment.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

from tests.notebooks import CHAPTERS, ROOT, URL_LINE, read


def run(cmd, **kwargs):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)


def test_install_cell_installs_the_package_into_a_fresh_environment(tmp_path):
    clone = tmp_path / "clone"
    run(["git", "clone", "-q", str(ROOT), str(clone)])
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    # The fresh environment sees our locked third-party packages (numpy, matplotlib, ...) through
    # a .pth line, as Colab has its own; .pth files inside that folder are not processed, so the
    # editable install of npformer stays invisible.
    site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )
    (site / "locked-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    probe = "import importlib.util; print(importlib.util.find_spec('npformer') is None)"
    assert run([str(python), "-c", probe], cwd=tmp_path).stdout.strip() == "True"

    cell = read(CHAPTERS[0]).cells[0].source
    assert URL_LINE.search(cell)
    # a URL requirement needs a host: file://localhost/... stands for the public URL
    local = URL_LINE.sub(f'REPOSITORY_URL = "file://localhost{clone}"', cell)
    installed = run([str(python), "-c", local], cwd=tmp_path)
    # an extra the package lacks is only a warning of pip's
    assert "does not provide the extra" not in installed.stderr, installed.stderr

    check = textwrap.dedent(
        """
        import npformer, numpy as np
        from npformer.core.attention import scaled_dot_product_attention
        out, cache = scaled_dot_product_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 5)))
        assert out.shape == (2, 5)
        print(npformer.__file__)
        """
    )
    location = run([str(python), "-c", check], cwd=tmp_path).stdout.strip()
    assert location.startswith(str(venv)), location


def test_every_install_cell_is_the_same_code():
    cells = {read(p).cells[0].source for p in CHAPTERS}
    assert len(cells) == 1, "install cells differ between notebooks; regenerate them"


def test_the_install_cell_brings_every_library_the_chapters_import():
    """Colab has numpy and matplotlib but not myst-nb: the cell installs the package with its
    ``book`` extra, and the package's requirements and extras cover every third-party module
    a chapter imports (torch stays optional: the chapters that use it say so)."""
    import ast
    import importlib.metadata
    import re

    import tomllib

    cell = read(CHAPTERS[0]).cells[0].source
    assert '"npformer[book] @ git+{REPOSITORY_URL}"' in cell, cell
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + sum(project["optional-dependencies"].values(), [])
    provided = {re.split(r"[<>=!~;\[ ]", req)[0].lower().replace("_", "-") for req in wanted}
    by_module = importlib.metadata.packages_distributions()
    missing = {}
    for path in CHAPTERS:
        for cell in read(path).cells:
            if cell.cell_type != "code":
                continue
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top == "npformer":
                        continue
                    dists = {d.lower().replace("_", "-") for d in by_module.get(top, [top])}
                    # IPython comes with myst-nb (through ipykernel)
                    if not dists & provided and top != "IPython":
                        missing.setdefault(top, path.name)
    assert not missing, f"imported by a chapter, installed by no requirement: {missing}"
