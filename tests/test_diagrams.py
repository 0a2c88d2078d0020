"""The diagrams of chapters 11 and 12 are the ones their scripts draw."""

import importlib.util
from pathlib import Path

import matplotlib
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["two_by_two", "share_line"])
def test_asset_is_what_the_script_draws(name, tmp_path):
    path = ROOT / "scripts" / f"draw_{name}.py"
    spec = importlib.util.spec_from_file_location(f"draw_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / f"{name}.svg"
    with matplotlib.rc_context():  # matplotlib's defaults, whatever ran before in this process
        matplotlib.rcdefaults()
        module.draw(out)
    assert out.read_bytes() == (ROOT / "assets" / f"{name}.svg").read_bytes()
