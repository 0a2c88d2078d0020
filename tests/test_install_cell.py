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
    local = URL_LINE.sub(f'REPOSITORY_URL = "file://{clone}"', cell)
    run([str(python), "-c", local], cwd=tmp_path)

    check = textwrap.dedent(
        """
        import npformer, numpy as np
        from npformer.attention import scaled_dot_product_attention
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
