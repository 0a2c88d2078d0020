"""The trap map of chapter 13 (assets/trap_map.svg) is the one its script draws."""

import importlib.util
from pathlib import Path

import matplotlib

ROOT = Path(__file__).resolve().parent.parent


def _script():
    path = ROOT / "scripts" / "draw_trap_map.py"
    spec = importlib.util.spec_from_file_location("draw_trap_map", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trap_map_marks_the_seven_forward_traps_once_each():
    marked = [n for _, traps in _script().STEPS for n in traps]
    assert sorted(marked) == [1, 2, 3, 4, 5, 6, 7]


def test_trap_map_asset_is_what_the_script_draws(tmp_path):
    out = tmp_path / "trap_map.svg"
    with matplotlib.rc_context():  # matplotlib's defaults, whatever ran before in this process
        matplotlib.rcdefaults()
        _script().main(out)
    assert out.read_bytes() == (ROOT / "assets" / "trap_map.svg").read_bytes()
