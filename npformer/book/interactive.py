"""Figures a reader can play with in the built book, with no kernel and no network.

Every state a figure can show is computed in Python when the notebook runs and embedded in the
page as JSON, together with a small script of our own (no library, nothing fetched): a control
(a slider, check boxes, a choice of buttons) picks one of the precomputed states, and the script
draws it as an SVG heatmap or bar chart with the exact value under the pointer. The SVG takes
the column's width and scales with it; the script measures its tick labels and lays the axes out
around them, turning the column labels by 45 degrees (and keeping every n-th) when they would
overlap. Because the output is HTML that nbval compares, it is deterministic: element ids are
fixed by the figure's name and numbers are rounded to ``digits`` decimals.

Used by chapters 02 (the softmax as d_k grows, on a slider), 03 (masks toggled) and 10 (the
trained copy model's attention maps by layer and head). ``tests/test_interactive.py`` drives
them in headless Chromium; ``tests/test_browser.py`` measures them in the built book.
"""

from __future__ import annotations

import html
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np


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
  // Drawn in a viewBox W units wide that the SVG stretches to the column's width.
  const W = 640, FONT = 11, BAR_HEIGHT = 160, MAX_MAP_HEIGHT = 330, top = 12;
  const bars = spec.kind === "bars";
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
  function add(tag, attrs, content, parent) {
    const el = document.createElementNS(svgNS, tag);
    for (const name in attrs) el.setAttribute(name, attrs[name]);
    if (content !== undefined) el.textContent = content;
    (parent || plot).appendChild(el);
    return el;
  }
  function label(x, y, content, cls, attrs) {
    return add("text", Object.assign({x: x, y: y, "font-size": FONT, fill: "currentColor",
                                      class: cls}, attrs || {}), content);
  }
  function widest(texts) {
    return Math.max(0, ...texts.map(function (t) { return t.getBBox().width; }));
  }
  function draw() {
    const k = key();
    const state = spec.states[k];
    root.dataset.state = k;
    caption.textContent = state.caption;
    readout.textContent = "point at a " + (bars ? "bar" : "cell") + " to read its value";
    while (plot.firstChild) plot.removeChild(plot.firstChild);
    const matrix = bars ? [state.values] : state.values;
    const cols = spec.col_labels, span = spec.hi - spec.lo || 1;
    const yTicks = bars ? [0, 0.25, 0.5, 0.75, 1].map(function (f) {
      return (spec.lo + f * span).toFixed(2);
    }) : spec.row_labels;
    // Measure the tick labels first, then lay the plot out around them.
    const yTexts = yTicks.map(function (s) { return label(0, 0, s, "npformer-tick"); });
    const xTexts = cols.map(function (s) { return label(0, 0, s, "npformer-tick"); });
    const left = (spec.y_title ? FONT + 10 : 0) + widest(yTexts) + 8;
    const right = bars ? 12 : 74;
    const cw = (W - left - right) / cols.length;
    const xWidest = widest(xTexts);
    const turn = xWidest + 6 > cw;  // column labels stand upright when they do not fit side by side
    const everyX = Math.ceil((FONT + 3) / cw);  // and only every n-th when even that is too tight
    const ch = bars ? BAR_HEIGHT : Math.min(cw, MAX_MAP_HEIGHT / matrix.length);
    const everyY = bars ? 1 : Math.ceil((FONT + 3) / ch);
    const plotH = bars ? BAR_HEIGHT : ch * matrix.length;
    const tickH = turn ? xWidest + 10 : FONT + 6;
    const height = top + plotH + tickH + (spec.x_title ? FONT + 12 : 4);
    plot.setAttribute("viewBox", "0 0 " + W + " " + height);
    yTexts.forEach(function (t, i) {
      const y = bars ? top + BAR_HEIGHT * (1 - i / 4) : top + (i + 0.5) * ch;
      if (i %% everyY !== 0) { plot.removeChild(t); return; }
      t.setAttribute("x", left - 6); t.setAttribute("y", y + FONT * 0.35);
      t.setAttribute("text-anchor", "end");
      if (bars) {
        add("line", {x1: left, x2: W - right, y1: y, y2: y, stroke: "currentColor",
                     "stroke-opacity": i === 0 ? 0.6 : 0.15});
      }
    });
    xTexts.forEach(function (t, j) {
      const x = left + (j + 0.5) * cw;
      if (j %% everyX !== 0) { plot.removeChild(t); return; }
      if (turn) {
        const y = top + plotH + 6;
        t.setAttribute("x", x + FONT * 0.35); t.setAttribute("y", y);
        t.setAttribute("text-anchor", "end");
        t.setAttribute("transform", "rotate(-90 " + (x + FONT * 0.35) + " " + y + ")");
      } else {
        t.setAttribute("x", x); t.setAttribute("y", top + plotH + FONT + 4);
        t.setAttribute("text-anchor", "middle");
      }
    });
    if (spec.x_title) {
      label(left + (W - left - right) / 2, height - 5, spec.x_title, "npformer-axis-title",
            {"text-anchor": "middle", "data-axis": "x"});
    }
    if (spec.y_title) {
      const y = top + plotH / 2;
      label(FONT, y, spec.y_title, "npformer-axis-title",
            {"text-anchor": "middle", "data-axis": "y",
             transform: "rotate(-90 " + FONT + " " + y + ")"});
    }
    matrix.forEach(function (row, i) {
      row.forEach(function (v, j) {
        const shown = v === null ? "masked" : v.toFixed(spec.digits);
        const text = (bars ? "" : spec.row_labels[i] + " -> ") + cols[j] + ": " + shown;
        let r;
        if (bars) {
          const h = BAR_HEIGHT * (v - spec.lo) / span;
          r = add("rect", {x: left + (j + 0.15) * cw, width: cw * 0.7, y: top + BAR_HEIGHT - h,
                           height: h, fill: "#4c72b0"});
          label(left + (j + 0.5) * cw, top + BAR_HEIGHT - h - 3, shown, "npformer-value",
                {"text-anchor": "middle", "pointer-events": "none"});
        } else {
          r = add("rect", {x: left + j * cw, y: top + i * ch, width: cw - 1, height: ch - 1,
                           fill: v === null ? "#dddddd" : colour(v, spec.lo, spec.hi)});
          if (v !== null && cw >= 48 && ch >= 20) {
            const dark = (v - spec.lo) / span > 0.55;
            label(left + (j + 0.5) * cw, top + (i + 0.5) * ch + FONT * 0.35,
                  v.toFixed(2), "npformer-value",
                  {"text-anchor": "middle", "pointer-events": "none",
                   fill: dark ? "#ffffff" : "#222222"});
          }
        }
        r.setAttribute("id", spec.id + "-cell-" + i + "-" + j);
        add("title", {}, text, r);
        r.addEventListener("mouseenter", function () { readout.textContent = text; });
      });
    });
    if (!bars) {  // the colour scale, and the grey of a masked cell
      const x = W - right + 14, steps = 10, h = Math.min(plotH, 160) / steps;
      for (let s = 0; s < steps; s++) {
        add("rect", {x: x, y: top + s * h, width: 12, height: h + 0.5,
                     fill: colour(spec.hi - (s + 0.5) * span / steps, spec.lo, spec.hi)});
      }
      label(x + 16, top + FONT * 0.8, spec.hi.toFixed(2), "npformer-legend");
      label(x + 16, top + steps * h, spec.lo.toFixed(2), "npformer-legend");
      if (spec.masked) {
        add("rect", {x: x, y: top + steps * h + 10, width: 12, height: 12, fill: "#dddddd"});
        label(x + 16, top + steps * h + 20, "masked", "npformer-legend");
      }
    }
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
  // Tick labels are measured: draw again once the page's fonts have loaded.
  if (document.fonts) document.fonts.ready.then(draw);
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
    value_range: tuple[float, float] | None = None,
    x_title: str = "",
    y_title: str = "",
) -> str:
    """The HTML of one interactive figure (display it with ``IPython.display.HTML``).

    ``states`` maps every combination of the controls' values, joined with "|" in the order of
    ``controls`` (a toggle contributes "on"/"off"), to a :class:`State`. ``kind`` is "heatmap"
    (states hold (rows, cols) matrices; NaN or inf shows as a grey "masked" cell) or "bars"
    (states hold vectors). ``x_title`` and ``y_title`` name the axes. The figure takes the
    width of the column it stands in; tick labels that would overlap are turned, and thinned
    out if they still would. ``fig_id`` (lowercase letters, digits, dashes) fixes every element
    id. Raises ValueError when a state is missing or has the wrong shape.
    """
    fn = "interactive_figure"
    if not isinstance(fig_id, str) or not _ID.match(fig_id):
        raise ValueError(
            f"{fn}: fig_id must be lowercase letters, digits and dashes, got {fig_id!r}"
        )
    if kind not in ("heatmap", "bars"):
        raise ValueError(f"{fn}: kind must be 'heatmap' or 'bars', got {kind!r}")
    controls, col_labels = list(controls), list(col_labels)
    row_labels = None if row_labels is None else list(row_labels)
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
    every_value = np.concatenate([np.asarray(states[k].values, float).ravel() for k in keys])
    finite = every_value[np.isfinite(every_value)]
    lo, hi = value_range if value_range else (float(finite.min()), float(finite.max()))
    spec = {
        "id": fig_id,
        "kind": kind,
        "digits": digits,
        "masked": bool(finite.size < every_value.size),
        "x_title": x_title,
        "y_title": y_title,
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
        f'aria-label="{html.escape(fig_id)}" style="display: block; width: 100%; height: auto">'
        "</svg>"
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
    from npformer.core.attention import softmax

    d_values = list(d_values)
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
    from npformer.core.attention import scaled_dot_product_attention
    from npformer.core.masks import causal_mask, padding_mask

    fn = "mask_states"
    lengths = list(lengths)
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

    Rows and columns are labelled by position and token, "6 (SEP)".

    The caption gives each map's mean largest weight per query and the key it most often
    points to, relative to the query. Returns (controls, states, col_labels, row_labels).
    """
    tokens = list(tokens)
    w = np.asarray(weights, dtype=float)
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
    labels = [f"{i} ({t})" for i, t in enumerate(tokens)]  # the position and its token
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
