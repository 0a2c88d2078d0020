"""Figures a reader can play with in the built book, with no kernel and no network.

Every state a figure can show is computed in Python when the notebook runs and embedded in the
page as JSON, together with a small script of our own (no library, nothing fetched): a control
(a slider, check boxes, a choice of buttons) picks one of the precomputed states, and the script
draws it as an SVG heatmap or bar chart with the exact value under the pointer. Because the
output is HTML that nbval compares, it is deterministic: element ids are fixed by the figure's
name and numbers are rounded to ``digits`` decimals.

Used by chapters 02 (the softmax as d_k grows, on a slider), 03 (masks toggled) and 12 (the
trained copy model's attention maps by layer and head). ``tests/test_interactive.py`` drives
them in headless Chromium.
"""

from __future__ import annotations

import html
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from npformer.validation import int_at_least, number_array, sequence


class Slider(NamedTuple):
    """A slider over ``values`` (shown as labels); the state key part is the value's label."""

    name: str
    values: Sequence[str]


class Toggle(NamedTuple):
    """A check box; the state key part is "on" or "off"."""

    name: str
    checked: bool = True


class Choice(NamedTuple):
    """A row of buttons, one of ``options`` selected; the key part is the option's label."""

    name: str
    options: Sequence[str]


class State(NamedTuple):
    """What the figure shows in one state: a matrix (heatmap) or a vector (bars), and a line."""

    values: np.ndarray  # (rows, cols) for a heatmap, (n,) for bars
    caption: str


_ID = re.compile(r"^[a-z][a-z0-9-]*$")
_SCRIPT = """
(function () {
  const root = document.getElementById(%(id)s);
  const spec = JSON.parse(document.getElementById(%(data_id)s).textContent);
  const svgNS = "http://www.w3.org/2000/svg";
  const readout = document.getElementById(spec.id + "-readout");
  const caption = document.getElementById(spec.id + "-caption");
  const plot = document.getElementById(spec.id + "-plot");
  function key() {
    return spec.controls.map(function (c, i) {
      const el = document.getElementById(spec.id + "-control-" + i);
      if (c.kind === "slider") return c.values[Number(el.value)];
      if (c.kind === "toggle") return el.checked ? "on" : "off";
      return el.dataset.selected;
    }).join("|");
  }
  function colour(v, lo, hi) {
    const t = hi > lo ? (v - lo) / (hi - lo) : 0;
    const r = Math.round(255 - 200 * t), g = Math.round(255 - 150 * t);
    return "rgb(" + r + "," + g + "," + Math.round(255 - 60 * t) + ")";
  }
  function draw() {
    const k = key();
    const state = spec.states[k];
    root.dataset.state = k;
    caption.textContent = state.caption;
    readout.textContent = "point at a cell to read its value";
    while (plot.firstChild) plot.removeChild(plot.firstChild);
    const cell = spec.cell, labels = spec.col_labels, rows = spec.row_labels;
    const left = 40, top = 10;
    const matrix = spec.kind === "bars" ? [state.values] : state.values;
    const width = left + cell * matrix[0].length + 10;
    const height = spec.kind === "bars" ? top + 160 + 30 : top + cell * matrix.length + 30;
    plot.setAttribute("viewBox", "0 0 " + width + " " + height);
    plot.setAttribute("width", width);
    plot.setAttribute("height", height);
    matrix.forEach(function (row, i) {
      row.forEach(function (v, j) {
        const r = document.createElementNS(svgNS, "rect");
        if (spec.kind === "bars") {
          const h = 160 * (v - spec.lo) / (spec.hi - spec.lo || 1);
          r.setAttribute("x", left + j * cell + 2); r.setAttribute("width", cell - 4);
          r.setAttribute("y", top + 160 - h); r.setAttribute("height", h);
          r.setAttribute("fill", "#4c72b0");
        } else {
          r.setAttribute("x", left + j * cell); r.setAttribute("y", top + i * cell);
          r.setAttribute("width", cell - 1); r.setAttribute("height", cell - 1);
          r.setAttribute("fill", v === null ? "#dddddd" : colour(v, spec.lo, spec.hi));
        }
        r.setAttribute("id", spec.id + "-cell-" + i + "-" + j);
        const text = (spec.kind === "bars" ? "" : rows[i] + " -> ") + labels[j] + ": " +
          (v === null ? "masked" : v.toFixed(spec.digits));
        const t = document.createElementNS(svgNS, "title"); t.textContent = text; r.appendChild(t);
        r.addEventListener("mouseenter", function () { readout.textContent = text; });
        plot.appendChild(r);
      });
      if (spec.kind !== "bars") {
        const y = document.createElementNS(svgNS, "text");
        y.setAttribute("x", left - 4); y.setAttribute("y", top + i * cell + cell * 0.65);
        y.setAttribute("text-anchor", "end"); y.setAttribute("font-size", "10");
        y.textContent = rows[i]; plot.appendChild(y);
      }
    });
    labels.forEach(function (lab, j) {
      const x = document.createElementNS(svgNS, "text");
      x.setAttribute("x", left + j * cell + cell / 2);
      x.setAttribute("y", height - 12); x.setAttribute("text-anchor", "middle");
      x.setAttribute("font-size", "10"); x.textContent = lab; plot.appendChild(x);
    });
  }
  spec.controls.forEach(function (c, i) {
    const el = document.getElementById(spec.id + "-control-" + i);
    if (c.kind === "slider") {
      const shown = document.getElementById(spec.id + "-control-" + i + "-value");
      el.addEventListener("input", function () {
        shown.textContent = c.values[Number(el.value)];
        draw();
      });
    } else if (c.kind === "toggle") {
      el.addEventListener("change", draw);
    } else {
      el.querySelectorAll("button").forEach(function (b) {
        b.addEventListener("click", function () {
          el.dataset.selected = b.dataset.option;
          el.querySelectorAll("button").forEach(function (o) {
            o.setAttribute("aria-pressed", o === b);
          });
          draw();
        });
      });
    }
  });
  draw();
})();
"""


def _rounded(values: np.ndarray, digits: int) -> list:
    def one(v):
        return None if not np.isfinite(v) else round(float(v), digits)

    arr = np.asarray(values, dtype=float)
    if arr.ndim == 1:
        return [one(v) for v in arr]
    return [[one(v) for v in row] for row in arr]


def _control_html(fig_id: str, i: int, control) -> str:
    cid = f"{fig_id}-control-{i}"
    name = html.escape(control.name)
    if isinstance(control, Slider):
        last = len(control.values) - 1
        first = html.escape(control.values[0])
        return (
            f'<label>{name} <input type="range" id="{cid}" min="0" max="{last}" step="1" '
            f'value="0"> <span id="{cid}-value">{first}</span></label>'
        )
    if isinstance(control, Toggle):
        checked = " checked" if control.checked else ""
        return f'<label><input type="checkbox" id="{cid}"{checked}> {name}</label>'
    buttons = "".join(
        f'<button type="button" data-option="{html.escape(o)}" '
        f'aria-pressed="{"true" if k == 0 else "false"}">{html.escape(o)}</button>'
        for k, o in enumerate(control.options)
    )
    first = html.escape(control.options[0])
    return f'<span>{name}: <span id="{cid}" data-selected="{first}">{buttons}</span></span>'


def _is_real(v) -> bool:
    ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
    return ok and bool(np.isfinite(v))


def _keys(controls) -> list[str]:
    parts = []
    for c in controls:
        if isinstance(c, Slider):
            parts.append(list(c.values))
        elif isinstance(c, Toggle):
            parts.append(["on", "off"])
        elif isinstance(c, Choice):
            parts.append(list(c.options))
        else:
            raise ValueError(f"interactive_figure: unknown control {c!r}")
    return ["|".join(p) for p in itertools.product(*parts)]


def interactive_figure(
    fig_id: str,
    controls: Sequence,
    states: Mapping[str, State],
    col_labels: Sequence[str],
    row_labels: Sequence[str] | None = None,
    kind: str = "heatmap",
    digits: int = 3,
    cell: int = 26,
    value_range: tuple[float, float] | None = None,
) -> str:
    """The HTML of one interactive figure (display it with ``IPython.display.HTML``).

    ``states`` maps every combination of the controls' values, joined with "|" in the order of
    ``controls`` (a toggle contributes "on"/"off"), to a :class:`State`. ``kind`` is "heatmap"
    (states hold (rows, cols) matrices; NaN or inf shows as a grey "masked" cell) or "bars"
    (states hold vectors). ``fig_id`` (lowercase letters, digits, dashes) fixes every element
    id. Raises ValueError when a state is missing or has the wrong shape.
    """
    fn = "interactive_figure"
    if not isinstance(fig_id, str) or not _ID.match(fig_id):
        raise ValueError(
            f"{fn}: fig_id must be lowercase letters, digits and dashes, got {fig_id!r}"
        )
    if kind not in ("heatmap", "bars"):
        raise ValueError(f"{fn}: kind must be 'heatmap' or 'bars', got {kind!r}")
    controls = sequence(fn, "controls", controls)
    if not controls:
        raise ValueError(f"{fn}: at least one control is needed")
    if not isinstance(states, Mapping):
        raise ValueError(f"{fn}: states must map state keys to State, got {type(states).__name__}")
    col_labels = sequence(fn, "col_labels", col_labels, min_len=1)
    if row_labels is not None:
        row_labels = sequence(fn, "row_labels", row_labels)
    digits, cell = int_at_least(fn, "digits", digits, 0), int_at_least(fn, "cell", cell)
    if value_range is not None and not (
        isinstance(value_range, (tuple, list))
        and len(value_range) == 2
        and all(_is_real(v) for v in value_range)
        and value_range[0] < value_range[1]
    ):
        raise ValueError(f"{fn}: value_range must be (lo, hi) with lo < hi, got {value_range!r}")
    keys = _keys(controls)
    missing = [k for k in keys if k not in states]
    if missing:
        raise ValueError(f"{fn}: states has no state for control value(s) {missing[:3]}")
    n_cols = len(col_labels)
    shape = (n_cols,) if kind == "bars" else (len(row_labels or ()), n_cols)
    for k in keys:
        got = np.shape(states[k].values)
        if got != shape:
            raise ValueError(f"{fn}: state {k!r} has shape {got}, expected {shape}")
    finite = np.concatenate([np.asarray(states[k].values, float).ravel() for k in keys])
    finite = finite[np.isfinite(finite)]
    lo, hi = value_range if value_range else (float(finite.min()), float(finite.max()))
    spec = {
        "id": fig_id,
        "kind": kind,
        "digits": digits,
        "cell": cell,
        "lo": round(lo, digits),
        "hi": round(hi, digits),
        "col_labels": list(col_labels),
        "row_labels": list(row_labels or []),
        "controls": [
            {"kind": "slider", "values": list(c.values)}
            if isinstance(c, Slider)
            else {"kind": "toggle"}
            if isinstance(c, Toggle)
            else {"kind": "choice", "options": list(c.options)}
            for c in controls
        ],
        "states": {
            k: {"values": _rounded(states[k].values, digits), "caption": states[k].caption}
            for k in keys
        },
    }
    data = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")
    controls_html = " &nbsp; ".join(_control_html(fig_id, i, c) for i, c in enumerate(controls))
    script = _SCRIPT % {"id": json.dumps(fig_id), "data_id": json.dumps(f"{fig_id}-data")}
    return (
        f'<div class="npformer-interactive" id="{fig_id}">'
        f'<div class="npformer-controls">{controls_html}</div>'
        f'<svg id="{fig_id}-plot" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="{html.escape(fig_id)}"></svg>'
        f'<div id="{fig_id}-caption"></div>'
        f'<div id="{fig_id}-readout" style="font-family: monospace"></div>'
        f'<script type="application/json" id="{fig_id}-data">{data}</script>'
        f"<script>{script}</script></div>"
    )


# --- the book's three figures: their states, computed from the package ----------------------


def softmax_states(d_values=(1, 4, 16, 64, 256, 1024), num_keys: int = 8, seed: int = 0):
    """Chapter 02's figure: the weights of one query over ``num_keys`` keys as d_k grows.

    Components are standard normal, drawn once per d_k from ``seed``; the toggle divides the
    scores by sqrt(d_k). Returns (controls, states, col_labels) for :func:`interactive_figure`.
    """
    from npformer.attention import softmax

    fn = "softmax_states"
    d_values = [int_at_least(fn, "d_values[...]", d) for d in sequence(fn, "d_values", d_values, 1)]
    num_keys, seed = int_at_least(fn, "num_keys", num_keys), int_at_least(fn, "seed", seed, 0)
    controls = [Slider("d_k", [str(d) for d in d_values]), Toggle("divide by sqrt(d_k)")]
    states = {}
    for d in d_values:
        rng = np.random.default_rng([seed, d])
        q = rng.standard_normal(d)  # (d_k,)
        K = rng.standard_normal((num_keys, d))  # (S, d_k)
        z = K @ q  # (S,)
        for on in ("on", "off"):
            p = softmax(z / np.sqrt(d) if on == "on" else z)
            caption = (
                f"d_k = {d}, scores {'divided by' if on == 'on' else 'not divided by'} "
                f"sqrt(d_k): max weight {p.max():.3f}, entropy "
                f"{float(-(p * np.log(np.maximum(p, 1e-300))).sum()):.3f} nats, "
                f"sensitivity {float((p * (1 - p)).sum()):.3f}"
            )
            states[f"{d}|{on}"] = State(p, caption)
    return controls, states, [f"k{j}" for j in range(num_keys)]


def mask_states(lengths=(5, 3), seed: int = 0, d_h: int = 4):
    """Chapter 03's figure: one batch of two sequences, causal and padding masks toggled.

    Shows the attention weights of the chosen sequence (masked keys grey). Returns
    (controls, states, col_labels, row_labels) for :func:`interactive_figure`.
    """
    from npformer.attention import scaled_dot_product_attention
    from npformer.masks import causal_mask, padding_mask

    fn = "mask_states"
    lengths = [int_at_least(fn, "lengths[...]", n, 0) for n in sequence(fn, "lengths", lengths, 1)]
    seed, d_h = int_at_least(fn, "seed", seed, 0), int_at_least(fn, "d_h", d_h)
    if max(lengths) < 1:
        raise ValueError(f"{fn}: lengths must hold at least one length >= 1, got {lengths}")
    T = max(lengths)
    rng = np.random.default_rng(seed)
    Q, K, V = (rng.standard_normal((len(lengths), T, d_h)) for _ in range(3))  # (B, T, d_h)
    controls = [
        Toggle("causal mask"),
        Toggle("padding mask"),
        Choice("sequence", [f"{b} (length {n})" for b, n in enumerate(lengths)]),
    ]
    states = {}
    for causal, pad in itertools.product(("on", "off"), repeat=2):
        mask = np.ones((len(lengths), 1, T), dtype=bool)  # (B, 1, S)
        if pad == "on":
            mask = mask & padding_mask(lengths, T)[:, None, :]
        if causal == "on":
            mask = mask & causal_mask(T)[None]
        _, cache = scaled_dot_product_attention(Q, K, V, mask=mask)
        for b, n in enumerate(lengths):
            shown = np.where(np.broadcast_to(mask[b], (T, T)), cache.weights[b], np.nan)
            sums = " ".join(f"{s:.2f}" for s in np.nansum(shown, axis=1))
            leak = float(cache.weights[b][:, n:].sum()) if n < T else 0.0
            caption = f"sequence {b}: row sums {sums}; weight on padding keys {leak:.3f}" + (
                "; no query sees a later key" if causal == "on" else ""
            )
            states[f"{causal}|{pad}|{b} (length {n})"] = State(shown, caption)
    return controls, states, [f"key {j}" for j in range(T)], [f"query {i}" for i in range(T)]


def attention_map_states(weights, tokens: Sequence[str]):
    """Attention maps by layer and head: ``weights`` (n_layers, h, T, T), ``tokens`` T labels.

    The caption gives each map's mean largest weight per query and the key it most often
    points to, relative to the query. Returns (controls, states, col_labels, row_labels).
    """
    tokens = sequence("attention_map_states", "tokens", tokens)
    w = number_array("attention_map_states", "weights", weights).astype(float)
    if w.ndim != 4 or w.shape[-1] != w.shape[-2] or w.shape[-1] != len(tokens):
        raise ValueError(
            f"attention_map_states: weights must be (n_layers, h, T, T) with T = len(tokens) "
            f"= {len(tokens)}, got shape {w.shape}"
        )
    n_layers, h, T, _ = w.shape
    controls = [
        Choice("layer", [str(i) for i in range(n_layers)]),
        Choice("head", [str(k) for k in range(h)]),
    ]
    labels = [f"{t}@{i}" for i, t in enumerate(tokens)]
    states = {}
    for layer in range(n_layers):
        for head in range(h):
            m = w[layer, head]
            offsets = np.argmax(m, axis=1) - np.arange(T)
            common = int(np.bincount(offsets - offsets.min()).argmax() + offsets.min())
            caption = (
                f"layer {layer}, head {head}: mean largest weight {m.max(axis=1).mean():.3f}; "
                f"most queries point {-common} position(s) back"
            )
            states[f"{layer}|{head}"] = State(m, caption)
    return controls, states, labels, labels
