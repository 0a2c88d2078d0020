"""Every diagram in assets/ that a script draws is what that script draws today, byte for byte
(the SVGs are deterministic: fixed hash salts, no dates), so a changed script or a stale asset
fails here instead of on a reader's page."""

import importlib.util
from pathlib import Path

import matplotlib
import pytest

ROOT = Path(__file__).resolve().parent.parent
# scripts/draw_<name>.py -> the asset it draws
ASSETS = {
    "attention_shapes": "attention_shapes.svg",
    "attention_words": "attention_words.svg",
    "block_backward": "block_forward_backward.svg",
    "block_diagram": "block_diagram.svg",
    "book_map": "book_map.svg",
    "cache_life": "kv_cache_life.svg",
    "encoder_decoder": "encoder_decoder.svg",
    "filing_cabinet": "filing_cabinet.svg",
    "head_split": "head_split.svg",
    "headline_map": "headline_pointer_map.svg",
    "heads_example": "heads_example.svg",
    "kv_cache": "kv_cache_filling.svg",
    "mask_diagram": "mask_before_after.svg",
    "share_line": "share_line.svg",
    "tile_grid": "tile_grid.svg",
    "trap_map": "trap_map.svg",
    "two_by_two": "two_by_two.svg",
}


def _script(name):
    path = ROOT / "scripts" / f"draw_{name}.py"
    spec = importlib.util.spec_from_file_location(f"draw_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_drawing_script_is_checked():
    assert sorted(ASSETS) == sorted(p.stem[len("draw_") :] for p in ROOT.glob("scripts/draw_*.py"))


@pytest.mark.parametrize("name", sorted(ASSETS))
def test_asset_is_what_the_script_draws(name, tmp_path):
    module = _script(name)
    draw = getattr(module, "draw", None) or module.main
    out = tmp_path / ASSETS[name]
    with matplotlib.rc_context():  # matplotlib's defaults, whatever ran before in this process
        matplotlib.rcdefaults()
        draw(out)
    assert out.read_bytes() == (ROOT / "assets" / ASSETS[name]).read_bytes()


def test_trap_map_marks_the_seven_forward_traps_once_each():
    marked = [n for _, traps in _script("trap_map").STEPS for n in traps]
    assert sorted(marked) == [1, 2, 3, 4, 5, 6, 7]
