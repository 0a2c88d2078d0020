"""The interactive figures, driven in headless Chromium: each control shows its precomputed state.

A page with the three figures of the book is written to a temporary folder and opened; the test
moves the slider, clicks the check boxes and buttons, points at cells, and compares what the page
shows with the captions and values computed in Python.
"""

from __future__ import annotations

import numpy as np
import pytest

from npformer.book.interactive import (
    Choice,
    Slider,
    State,
    Toggle,
    attention_map_states,
    interactive_figure,
    mask_states,
    softmax_states,
)
from tests.test_browser import FIGURES_JS
from tests.webdriver import browser, needs_browser  # noqa: F401  (fixture)


def figures():
    c, s, cols = softmax_states()
    soft = (c, s, interactive_figure("fig-softmax", c, s, cols, kind="bars", value_range=(0, 1)))
    c, s, cols, rows = mask_states()
    masks = (c, s, interactive_figure("fig-masks", c, s, cols, rows, value_range=(0, 1)))
    rng = np.random.default_rng(0)
    w = rng.random((2, 3, 4, 4))
    w /= w.sum(-1, keepdims=True)
    c, s, cols, rows = attention_map_states(w, list("abcd"))
    maps = (c, s, interactive_figure("fig-maps", c, s, cols, rows, value_range=(0, 1)))
    return soft, masks, maps


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):  # noqa: F811
    soft, masks, maps = figures()
    path = tmp_path_factory.mktemp("page") / "figures.html"
    path.write_text(f"<!doctype html><html><body>{soft[2]}{masks[2]}{maps[2]}</body></html>")
    browser.get(path.as_uri())
    return browser, soft[1], masks[1], maps[1]


def text(driver, element_id):
    return driver.find_element("id", element_id).text


@needs_browser
def test_slider_shows_each_precomputed_state(page):
    driver, states, _, _ = page
    assert text(driver, "fig-softmax-caption") == states["1|on"].caption
    slider = driver.find_element("id", "fig-softmax-control-0")
    toggle = driver.find_element("id", "fig-softmax-control-1")
    seen = set()
    for index, d in enumerate(["1", "4", "16", "64", "256", "1024"]):
        driver.execute_script(
            "arguments[0].value = arguments[1];arguments[0].dispatchEvent(new Event('input'));",
            slider,
            index,
        )
        assert text(driver, "fig-softmax-control-0-value") == d
        assert text(driver, "fig-softmax-caption") == states[f"{d}|on"].caption
        toggle.click()
        assert text(driver, "fig-softmax-caption") == states[f"{d}|off"].caption
        toggle.click()
        seen.add(text(driver, "fig-softmax-caption"))
    assert len(seen) == 6, "every slider position shows a different state"


@needs_browser
def test_bars_follow_the_weights(page):
    driver, states, _, _ = page
    driver.execute_script(
        "const s = document.getElementById('fig-softmax-control-0');"
        "s.value = 5; s.dispatchEvent(new Event('input'));"
    )
    heights = [
        float(driver.find_element("id", f"fig-softmax-cell-0-{j}").get_attribute("height"))
        for j in range(8)
    ]
    p = states["1024|on"].values
    assert int(np.argmax(heights)) == int(np.argmax(p))
    np.testing.assert_allclose(np.array(heights) / 160, np.round(p, 3), atol=2e-3)


@needs_browser
def test_mask_toggles_and_hover(page):
    driver, _, states, _ = page
    causal = driver.find_element("id", "fig-masks-control-0")
    padding = driver.find_element("id", "fig-masks-control-1")
    buttons = driver.find_elements("css selector", "#fig-masks-control-2 button")
    buttons[1].click()
    assert text(driver, "fig-masks-caption") == states["on|on|1 (length 3)"].caption
    padding.click()
    assert text(driver, "fig-masks-caption") == states["on|off|1 (length 3)"].caption
    assert "weight on padding keys 0.000" not in text(driver, "fig-masks-caption")
    causal.click()
    assert text(driver, "fig-masks-caption") == states["off|off|1 (length 3)"].caption
    from selenium.webdriver.common.action_chains import ActionChains

    cell = driver.find_element("id", "fig-masks-cell-2-1")
    ActionChains(driver).move_to_element(cell).perform()
    expected = states["off|off|1 (length 3)"].values[2, 1]
    assert text(driver, "fig-masks-readout") == f"query 2 -> key 1: {expected:.3f}"


@needs_browser
def test_layer_and_head_buttons(page):
    driver, _, _, states = page
    layers = driver.find_elements("css selector", "#fig-maps-control-0 button")
    heads = driver.find_elements("css selector", "#fig-maps-control-1 button")
    for layer in (1, 0):
        layers[layer].click()
        for head in (2, 0, 1):
            heads[head].click()
            assert text(driver, "fig-maps-caption") == states[f"{layer}|{head}"].caption
            root = driver.find_element("id", "fig-maps")
            assert root.get_attribute("data-state") == f"{layer}|{head}"


@needs_browser
@pytest.mark.parametrize("labels", [list("abcd"), [f"token {i}" for i in range(64)]])
def test_axes_are_titled_and_tick_labels_never_collide(browser, tmp_path, labels):  # noqa: F811
    """Few short labels stand side by side; 64 long ones are turned upright and thinned out."""
    T = len(labels)
    w = np.full((1, 1, T, T), 1 / T)
    c, s, cols, rows = attention_map_states(w, labels)
    fig = interactive_figure("fig-dense", c, s, cols, rows, x_title="key", y_title="query")
    path = tmp_path / "dense.html"
    path.write_text(f"<!doctype html><body><div style='width: 700px'>{fig}</div></body>")
    browser.get(path.as_uri())
    (found,) = browser.execute_async_script(FIGURES_JS)
    assert found["width"] == 700, "the figure takes its container's width"
    assert found["titles"] == ["x", "y"]
    assert found["overlapping"] == [] and found["outside"] == [], found
    assert (found["ticks"] == 2 * T) == (T == 4), "all labels shown only where they fit"


def test_states_must_cover_every_control_value():
    controls = [Slider("x", ["1", "2"]), Toggle("t")]
    states = {"1|on": State(np.zeros(2), "a"), "1|off": State(np.zeros(2), "b")}
    with pytest.raises(ValueError, match="no state for control value"):
        interactive_figure("fig-x", controls, states, ["a", "b"], kind="bars")
    states.update({"2|on": State(np.zeros(3), "c"), "2|off": State(np.zeros(2), "d")})
    with pytest.raises(ValueError, match="has shape"):
        interactive_figure("fig-x", controls, states, ["a", "b"], kind="bars")


@pytest.mark.parametrize("bad", ["Fig", "fig x", "", 3])
def test_figure_id_is_checked(bad):
    c = [Choice("c", ["a"])]
    with pytest.raises(ValueError, match="fig_id"):
        interactive_figure(bad, c, {"a": State(np.zeros(1), "")}, ["k"], kind="bars")


def test_output_is_deterministic():
    a = [f[2] for f in figures()]
    b = [f[2] for f in figures()]
    assert a == b
    assert "0x" not in "".join(a)
