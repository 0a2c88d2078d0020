"""Interventions on the decoder: read every head's attention, then change what the heads do.

Taught in chapter 12 (``chapters/12_attention_maps.ipynb``), which uses them to test whether
the attention maps of the trained copy model explain its outputs.

:func:`forward_with_interventions` runs the decoder's own forward pass
(``npformer.model.forward``: its blocks, its attention core, every position scheme) with a hook
inside each block's attention, between the heads' weighted sums and the output projection W_o,
and accepts these interventions:

- ablate a head: its output (its weighted sum of values, before W_o) is set to zero;
- replace a head's attention weights: by a given (B, T, S) distribution, or by a rule applied
  to the weights the head computed itself (:func:`uniform_weights`, :func:`permuted_weights`);
- patch a head's output: its weighted sum of values is replaced by given values (``patch``),
  for mean-ablation (the head's mean output over a batch), resample-ablation (its output on
  other prompts) and activation patching (its output on a prompt that differs in one symbol);
- edit input tokens before the embedding (``token_edits``).

With no intervention its logits are ``npformer.model.forward``'s, bit for bit (checked in
``tests/test_interventions.py``; chapter 12 writes the hook by hand and checks it against a
patch).
Around it: the distances that measure an intervention (:func:`total_variation`,
:func:`js_divergence`), greedy generation under an intervention, and
:func:`adversarial_weights`, the search for attention weights far from a head's own that leave
every prediction unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

import numpy as np

from npformer.attention import masked_softmax, softmax
from npformer.masks import causal_mask
from npformer.model import DecoderConfig, check_tokens, forward, parameter_shapes
from npformer.train import generate
from npformer.validation import bool_mask, float_array, int_at_least, positive_number

#: What ``replace`` maps a (layer, head) to: fixed weights, or a rule
#: ``rule(own_weights (B, T, S), visible (B, T, S)) -> weights (B, T, S)``.
Replacement = np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray]


class InterventionResult(NamedTuple):
    """The output of :func:`forward_with_interventions`."""

    logits: np.ndarray  # (B, T, vocab_size)
    weights: list  # per layer (B, h, T, T): the weights each head applied to its values
    own_weights: list  # per layer (B, h, T, T): the weights each head computed itself
    outputs: (
        list  # per layer (B, h, T, d_h): what each head wrote, before W_o (after interventions)
    )


# ----------------------------------------------------------------------------- validation


def _check_params(fn: str, params: Mapping, config: DecoderConfig) -> np.dtype:
    if not isinstance(config, DecoderConfig):
        raise ValueError(f"{fn}: config must be a DecoderConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        raise ValueError(f"{fn}: params must be a dict name -> array, got {type(params).__name__}")
    shapes = parameter_shapes(config)
    missing = sorted(set(shapes) - set(params))
    if missing:
        raise ValueError(f"{fn}: params lack {missing} needed by the config")
    dtype = np.asarray(params["tok_emb"]).dtype
    for name, shape in shapes.items():
        p = np.asarray(params[name])
        if p.shape != shape or p.dtype != dtype or not np.issubdtype(dtype, np.floating):
            raise ValueError(
                f"{fn}: parameter {name} has shape {p.shape} and dtype {p.dtype}; the config "
                f"needs shape {shape} and one floating dtype ({dtype} for tok_emb)"
            )
    return dtype


def _check_head(fn: str, key, config: DecoderConfig) -> tuple[int, int]:
    """A (layer, head) pair inside the model, or ValueError naming the valid ranges."""
    try:
        if any(isinstance(k, (bool, np.bool_, float, np.floating)) for k in key):
            raise TypeError
        layer, head = (int(k) for k in key)
    except (TypeError, ValueError):
        raise ValueError(f"{fn}: a head is named by a (layer, head) pair, got {key!r}") from None
    if not (0 <= layer < config.num_layers and 0 <= head < config.num_heads):
        raise ValueError(
            f"{fn}: head (layer={layer}, head={head}) is outside the model: layers "
            f"0..{config.num_layers - 1}, heads 0..{config.num_heads - 1} "
            f"(num_layers={config.num_layers}, num_heads={config.num_heads})"
        )
    return layer, head


def _apply_token_edits(fn: str, tokens: np.ndarray, edits, config: DecoderConfig) -> np.ndarray:
    """A copy of ``tokens`` with column ``position`` set to ``new`` for each edit."""
    if not edits:
        return tokens
    B, T = tokens.shape
    tokens = tokens.copy()
    for position, new in dict(edits).items():
        if not isinstance(position, (int, np.integer)) or not 0 <= position < T:
            raise ValueError(
                f"{fn}: token_edits position {position!r} is outside the tokens' shape {(B, T)}"
            )
        new = np.asarray(new)
        if not np.issubdtype(new.dtype, np.integer) or new.shape not in ((), (B,)):
            raise ValueError(
                f"{fn}: token_edits[{position}] must be one token id or {B} of them (shape "
                f"({B},)), got dtype {new.dtype} with shape {new.shape}"
            )
        if new.size and (new.min() < 0 or new.max() >= config.vocab_size):
            raise ValueError(
                f"{fn}: token_edits[{position}] holds ids outside the vocabulary "
                f"[0, {config.vocab_size})"
            )
        tokens[:, position] = new
    return tokens


def check_attention_weights(fn: str, weights, visible: np.ndarray, dtype) -> np.ndarray:
    """Return ``weights`` as a (B, T, S) array of ``dtype`` that is a distribution per query.

    Checks: the shape is (B, T, S) or (T, S) (then shared by the batch) for ``visible`` of shape
    (B, T, S); entries are finite and >= 0, exactly 0 on invisible keys, and each row sums to 1
    over the visible keys (within sqrt of the machine epsilon of ``dtype``; a query that sees no
    key at all must have weights 0, as ``masked_softmax`` gives it).
    Raises ValueError naming the shapes otherwise.
    """
    B, T, S = visible.shape
    w = float_array(fn, "replacement weights", weights)
    if w.shape not in ((B, T, S), (T, S)):
        raise ValueError(
            f"{fn}: replacement weights of shape {w.shape} do not fit the head's weights: "
            f"expected (B, T, S) = {(B, T, S)} or (T, S) = {(T, S)}"
        )
    shape = w.shape
    w = np.broadcast_to(w, (B, T, S)).astype(dtype)  # (B, T, S) a copy
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"{fn}: replacement weights of shape {shape} must be finite and >= 0")
    if (w[~visible] != 0).any():
        raise ValueError(
            f"{fn}: replacement weights of shape {shape} put weight on keys the mask hides"
        )
    sums = w.sum(axis=-1)  # (B, T)
    expected = visible.any(axis=-1)  # (B, T) a query with no visible key reads nothing: sum 0
    tol = math.sqrt(np.finfo(dtype).eps)
    if np.abs(sums - expected).max() > tol:
        worst = np.unravel_index(np.abs(sums - expected).argmax(), sums.shape)
        raise ValueError(
            f"{fn}: replacement weights of shape {shape} must sum to one over the visible keys "
            f"of each query; row {tuple(int(i) for i in worst)} sums to {sums[worst]:.6g}"
        )
    return w


def _check_patch(fn, config, patch, B, T, dtype):
    """{(layer, head): values broadcast to (B, T, d_h)}, or ValueError naming the shapes."""
    d_h = config.d_model // config.num_heads
    patched = {}
    for key, value in dict(patch or {}).items():
        layer, head = _check_head(fn, key, config)
        v = float_array(fn, f"patch[{key!r}]", value)
        if v.shape not in ((B, T, d_h), (T, d_h), (d_h,)):
            raise ValueError(
                f"{fn}: patch[{key!r}] of shape {v.shape} does not fit the head's output: "
                f"expected (B, T, d_h) = {(B, T, d_h)}, (T, d_h) = {(T, d_h)} or (d_h,) = {(d_h,)}"
            )
        if not np.isfinite(v).all():
            raise ValueError(f"{fn}: patch[{key!r}] of shape {v.shape} must be finite")
        patched[layer, head] = np.broadcast_to(v, (B, T, d_h)).astype(dtype)
    return patched


def _check_interventions(fn, config, ablate, replace):
    if isinstance(ablate, (str, bytes)) or not isinstance(ablate, Iterable):
        raise ValueError(f"{fn}: ablate must be an iterable of (layer, head) pairs, got {ablate!r}")
    ablated = {_check_head(fn, key, config) for key in ablate}
    replaced = {}
    for key, value in dict(replace or {}).items():
        if not (callable(value) or isinstance(value, (np.ndarray, list, tuple))):
            raise ValueError(
                f"{fn}: replace{key!r} must be an array of weights or a rule, got "
                f"{type(value).__name__}"
            )
        replaced[_check_head(fn, key, config)] = value
    both = sorted(ablated & set(replaced))
    if both:
        raise ValueError(f"{fn}: heads {both} are both ablated and replaced; choose one")
    return ablated, replaced


# ----------------------------------------------------------------------------- replacement rules


def uniform_weights(weights, visible) -> np.ndarray:
    """The same weight 1 / (number of visible keys) on every visible key of each query.

    A replacement rule for ``replace``. Shapes: weights and visible (B, T, S).
    Returns (B, T, S) in the dtype of ``weights``.
    """
    weights = float_array("uniform_weights", "weights", weights)
    visible = bool_mask("uniform_weights", visible, weights.shape, "weights of shape", "visible")
    visible = np.broadcast_to(visible, weights.shape)  # (B, T, S)
    counts = visible.sum(axis=-1, keepdims=True)  # (B, T, 1)
    return np.where(visible, 1.0 / np.maximum(counts, 1), 0.0).astype(weights.dtype)


def permuted_weights(rng: np.random.Generator) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A replacement rule that shuffles each query's weights among its visible keys.

    Each row keeps exactly its own set of weights (so its entropy and its largest weight), but
    the keys they land on are a uniformly random permutation of the visible keys, drawn from
    ``rng``; invisible keys keep weight 0. Returns ``rule(weights, visible) -> (B, T, S)``.
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"permuted_weights: rng must be a numpy Generator, got {type(rng)}")

    def rule(weights, visible):
        weights = float_array("permuted_weights", "weights", weights)
        visible = bool_mask(
            "permuted_weights", visible, weights.shape, "weights of shape", "visible"
        )
        visible = np.broadcast_to(visible, weights.shape)  # (B, T, S)
        S = weights.shape[-1]
        # visible keys first, in index order / in a random order; the hidden keys follow in index
        # order in both, so they map onto themselves (and keep weight 0)
        in_order = np.argsort(np.where(visible, np.arange(S), S), axis=-1, kind="stable")
        shuffled = np.argsort(
            np.where(visible, rng.random(weights.shape), 2.0), axis=-1, kind="stable"
        )
        out = np.empty_like(weights)
        np.put_along_axis(out, in_order, np.take_along_axis(weights, shuffled, axis=-1), axis=-1)
        return out

    return rule


# ----------------------------------------------------------------------------- the forward pass


class _HeadEdit:
    """The ``head_edit`` hook of ``npformer.model.forward``: applies the interventions of each
    layer to the heads' outputs and records every head's weights and outputs."""

    def __init__(self, fn, visible, ablated, replaced, patched):
        self.fn, self.visible = fn, visible  # visible (B, h, T, T): True = may attend
        self.ablated, self.replaced, self.patched = ablated, replaced, patched
        self.applied, self.own, self.outputs = [], [], []

    def __call__(self, layer, own, V, heads):
        # own (B, h, T, T) the weights the core computed; V and heads (B, h, T, d_h)
        applied = own.copy()
        for (lay, head), value in self.replaced.items():
            if lay == layer:
                visible = self.visible[:, head]  # (B, T, T)
                new = value(own[:, head].copy(), visible) if callable(value) else value
                applied[:, head] = check_attention_weights(self.fn, new, visible, own.dtype)
                heads[:, head] = applied[:, head] @ V[:, head]  # the head averages with A'
        for lay, head in self.ablated:
            if lay == layer:
                heads[:, head] = 0.0  # the head's output is gone; W_o and b_o stay
        for (lay, head), values in self.patched.items():
            if lay == layer:
                heads[:, head] = values  # the head writes given values instead of its own
        self.applied.append(applied)
        self.own.append(own)
        self.outputs.append(heads)
        return heads


def forward_with_interventions(
    params: Mapping,
    config: DecoderConfig,
    tokens,
    *,
    ablate: Iterable = (),
    replace: Mapping | None = None,
    patch: Mapping | None = None,
    token_edits: Mapping | None = None,
    attn_mask=None,
) -> InterventionResult:
    """The decoder's forward pass, with every head's weights returned and interventions applied.

    The decoder of ``npformer.model.forward`` (any configuration: pre- or post-LN, every
    position scheme), where head k of layer l computes its weights A over the visible keys (the
    softmax of its scores, with RoPE's rotated queries and keys or ALiBi's bias if the model has
    them) and outputs A V, except that
      - ``ablate``: iterable of (layer, head): the head outputs 0 instead of A V;
      - ``replace``: {(layer, head): weights or rule}: the head outputs A' V, with A' a (B, T, S)
        or (T, S) array, or ``rule(A (B, T, S), visible (B, T, S))``; A' must be a distribution
        over each query's visible keys (see :func:`check_attention_weights`);
      - ``patch``: {(layer, head): values of shape (B, T, d_h), (T, d_h) or (d_h,)}: the head
        outputs these values instead of A V (its weights are still computed and returned);
      - ``token_edits``: {position: token id or (B,) ids}: the input tokens are changed there.
    ``attn_mask`` (bool, broadcasting to (B, h, T, T)) replaces the causal mask, as in
    ``npformer.model.forward``. Keeps the parameters' dtype.

    Shapes: tokens (B, T) integer ids. Returns InterventionResult(logits (B, T, vocab_size),
    weights, own_weights, outputs): lists with one (B, h, T, T) array per layer for the two
    weights, one (B, h, T, d_h) array per layer for the heads' outputs.
    """
    fn = "forward_with_interventions"
    for name, value in (("replace", replace), ("patch", patch), ("token_edits", token_edits)):
        if value is not None and not isinstance(value, Mapping):
            raise ValueError(f"{fn}: {name} must be a dict or None, got {type(value).__name__}")
    _check_params(fn, params, config)
    tokens = check_tokens(fn, "tokens", tokens, config)
    ablated, replaced = _check_interventions(fn, config, ablate, replace)
    tokens = _apply_token_edits(fn, tokens, token_edits, config)
    B, T = tokens.shape
    h = config.num_heads
    patched = _check_patch(fn, config, patch, B, T, np.asarray(params["tok_emb"]).dtype)
    clash = sorted((ablated | set(replaced)) & set(patched))
    if clash:
        raise ValueError(f"{fn}: heads {clash} are patched and also ablated or replaced")
    if attn_mask is not None:
        attn_mask = bool_mask(fn, attn_mask, (B, h, T, T), "scores of shape", "attn_mask")
    visible = causal_mask(T) if attn_mask is None else attn_mask  # True = may attend
    visible = np.broadcast_to(visible, (B, h, T, T))
    # the decoder's own forward pass, with the heads edited inside each block's attention
    edit = _HeadEdit(fn, visible, ablated, replaced, patched)
    logits, _ = forward(params, config, tokens, attn_mask, head_edit=edit)
    applied, own, outputs = edit.applied, edit.own, edit.outputs
    return InterventionResult(logits, applied, own, outputs)


def generate_with_interventions(params, config: DecoderConfig, start, num_new: int, **kwargs):
    """Greedy generation (``npformer.train.generate``) with the model under an intervention.

    ``kwargs`` are those of :func:`forward_with_interventions`, applied at every step (the
    sequence grows, so ``replace`` should hold rules, not fixed arrays).
    Shapes: start (B, t0) integer. Returns the generated tokens, (B, num_new) int64.
    """
    _check_params("generate_with_interventions", params, config)
    check_tokens("generate_with_interventions", "start", start, config)
    return generate(
        lambda tokens: forward_with_interventions(params, config, tokens, **kwargs).logits,
        start,
        num_new,
    )


# ----------------------------------------------------------------------------- distances


def _check_pair(fn: str, p, q):
    p = float_array(fn, "p", p)
    q = float_array(fn, "q", q)
    if p.shape != q.shape:
        raise ValueError(f"{fn}: p has shape {p.shape} and q has shape {q.shape}; they must match")
    return p, q


def total_variation(p, q) -> np.ndarray:
    """Total variation distance between distributions along the last axis: 1/2 sum |p - q|.

    In [0, 1]: 0 for equal distributions, 1 for disjoint supports.
    Shapes: p, q (..., n). Returns (...).
    """
    p, q = _check_pair("total_variation", p, q)
    return 0.5 * np.abs(p - q).sum(axis=-1)


def js_divergence(p, q) -> np.ndarray:
    """Jensen-Shannon divergence along the last axis, in bits: 1/2 KL(p||m) + 1/2 KL(q||m).

    m = (p + q) / 2, KL(p||m) = sum p log2(p / m) with 0 log 0 = 0. Symmetric, in [0, 1]:
    0 for equal distributions, 1 for disjoint supports.
    Shapes: p, q (..., n). Returns (...).
    """
    p, q = _check_pair("js_divergence", p, q)
    m = 0.5 * (p + q)  # (..., n)
    safe_m = np.where(m > 0, m, 1.0)
    kl_p = np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0) / safe_m), 0.0).sum(axis=-1)
    kl_q = np.where(q > 0, q * np.log2(np.where(q > 0, q, 1.0) / safe_m), 0.0).sum(axis=-1)
    return np.maximum(0.5 * (kl_p + kl_q), 0.0)  # rounding can dip a hair below 0


def js_divergence_grad_logits(p, z, visible) -> np.ndarray:
    """d JS(p, softmax(z)) / dz over the visible keys, JS in bits.

    With q = softmax(z) over the visible keys and m = (p + q) / 2:
    dJS/dq_i = 1/2 log2(q_i / m_i), and through the softmax dJS/dz = q * (g - sum_j q_j g_j).
    Zero at q = p: the ascent must start away from the original. Shapes: p, z, visible (..., n).
    Returns (..., n), zero on invisible keys.
    """
    fn = "js_divergence_grad_logits"
    p, z = float_array(fn, "p", p), float_array(fn, "z", z)
    if p.shape != z.shape:
        raise ValueError(f"{fn}: p has shape {p.shape} and z has shape {z.shape}; they must match")
    visible = bool_mask(fn, visible, z.shape, "z of shape", "visible")
    q = masked_softmax(z, visible)  # (..., n)
    m = 0.5 * (p + q)
    g = np.where(
        visible & (q > 0), 0.5 * np.log2(np.where(q > 0, q, 1.0) / np.where(m > 0, m, 1)), 0
    )
    return q * (g - (q * g).sum(axis=-1, keepdims=True))  # (..., n)


# ----------------------------------------------------------------------------- adversarial search


class AdversarialResult(NamedTuple):
    """What :func:`adversarial_weights` found for one head."""

    weights: np.ndarray  # (B, T, T) adversarial weights (the head's own outside ``rows``)
    own: np.ndarray  # (B, T, T) the head's own weights
    distance: (
        np.ndarray
    )  # (B, R) JS (bits) from the own weights per searched row: the largest reached
    history: np.ndarray  # (steps taken + 1,) the mean of ``distance`` after each step
    accepted: np.ndarray  # (B, R) how many steps each row kept
    output_tv: np.ndarray  # (B, R) TV of the output distribution from the model's, at the end


def adversarial_weights(
    params: Mapping,
    config: DecoderConfig,
    tokens,
    layer: int,
    head: int,
    rows,
    *,
    steps: int = 200,
    step_size: float = 4.0,
    init_scale: float = 0.5,
    seed: int = 0,
    min_step: float = 1e-6,
    max_tv: float | None = None,
) -> AdversarialResult:
    """Gradient ascent on the distance of one head's weights from its own, predictions fixed.

    The head's weights at the query positions ``rows`` are parametrized by logits z,
    A'(z) = softmax(z) over the visible keys, started at log A + ``init_scale`` N(0, 1) noise
    (seeded; JS has zero gradient at A' = A). Every query row r of every sequence b has its own
    step size eta[b, r]. One step:

    1. z' = z + eta * dJS(A, A'(z)) / dz for every row at once (JS in bits);
    2. run the model with A'(z'): a row is a candidate if the prediction at its own position is
       unchanged (and, with ``max_tv``, the total variation between the model's output
       distribution there and the unmodified model's is at most ``max_tv``) and its distance
       grew;
    3. run the model with the candidates' rows moved and the other rows kept: if any prediction
       at a position in ``rows`` changed (or left the ``max_tv`` bound), the whole sequence
       keeps its previous z (backtrack).

    A kept row's step size grows by 1.5, any other row's halves. Every kept state therefore
    predicts exactly what the model predicts, and a row's distance never decreases, so the
    distances returned are the largest reached. A start whose noise already changes a
    prediction falls back to A itself (distance 0). The search stops after ``steps`` steps, or
    earlier once every step size is below ``min_step`` (every row is stuck: at a saturated
    softmax, or against a prediction it may not change).

    Shapes: tokens (B, T); rows (R,) query positions. Returns AdversarialResult.
    """
    fn = "adversarial_weights"
    _check_params(fn, params, config)
    tokens = check_tokens(fn, "tokens", tokens, config)
    layer, head = _check_head(fn, (layer, head), config)
    B, T = tokens.shape
    rows = np.asarray(rows)
    if (
        rows.ndim != 1
        or rows.size == 0
        or not np.issubdtype(rows.dtype, np.integer)
        or rows.min() < 0
        or rows.max() >= T
        or np.unique(rows).size != rows.size
    ):
        raise ValueError(
            f"{fn}: rows must be distinct query positions in [0, {T}), a non-empty 1-D array, "
            f"for tokens of shape {tokens.shape}; got {rows.tolist()}"
        )
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"{fn}: steps must be a non-negative integer, got {steps!r}")
    seed = int_at_least(fn, "seed", seed, minimum=0)
    min_step = positive_number(fn, "min_step", min_step)
    for name, value in (("step_size", step_size), ("init_scale", init_scale)):
        if isinstance(value, bool) or not (
            isinstance(value, (int, float)) and math.isfinite(value) and value > 0
        ):
            raise ValueError(f"{fn}: {name} must be a positive number, got {value!r}")
    if max_tv is not None and not (
        isinstance(max_tv, (int, float))
        and not isinstance(max_tv, bool)
        and math.isfinite(max_tv)
        and 0 < max_tv <= 1
    ):
        raise ValueError(f"{fn}: max_tv must be None or a number in (0, 1], got {max_tv!r}")

    clean = forward_with_interventions(params, config, tokens)
    target = clean.logits[:, rows].argmax(axis=-1)  # (B, R) the predictions to keep
    base = output_distributions(clean.logits[:, rows])  # (B, R, vocab_size)
    own = clean.own_weights[layer][:, head]  # (B, T, T)
    visible = np.broadcast_to(causal_mask(T), (B, T, T))[:, rows]  # (B, R, T)
    p = own[:, rows]  # (B, R, T)
    last_tv = {}

    def run(z):
        """Weights A'(z) in place of the head's rows; which predictions stay; row distances."""
        q = masked_softmax(z, visible)  # (B, R, T)
        full = own.copy()
        full[:, rows] = q  # (B, T, T)
        out = forward_with_interventions(params, config, tokens, replace={(layer, head): full})
        same = out.logits[:, rows].argmax(axis=-1) == target  # (B, R)
        tv = total_variation(output_distributions(out.logits[:, rows]), base)  # (B, R)
        if max_tv is not None:
            same &= tv <= max_tv
        last_tv["tv"] = tv
        return full, same, js_divergence(p, q)  # (B, T, T), (B, R), (B, R)

    rng = np.random.default_rng(seed)
    z0 = np.where(visible, np.log(np.maximum(p, np.finfo(p.dtype).tiny)), -np.inf)  # (B, R, T)
    z = np.where(visible, z0 + init_scale * rng.standard_normal(p.shape), -np.inf)
    weights, same, dist = run(z)
    output_tv = last_tv["tv"]
    ok = same.all(axis=1)  # (B,)
    z = np.where(ok[:, None, None], z, z0)  # a noisy start that changes a prediction: back to A
    weights = np.where(ok[:, None, None], weights, own)
    dist = np.where(ok[:, None], dist, 0.0)  # (B, R)
    output_tv = np.where(ok[:, None], output_tv, 0.0)
    eta = np.full(dist.shape, float(step_size))  # (B, R)
    accepted = np.zeros(dist.shape, dtype=np.int64)
    history = [dist.mean()]
    for _ in range(steps):
        grad = js_divergence_grad_logits(p, z, visible)  # (B, R, T)
        z_new = np.where(visible, z + eta[..., None] * grad, -np.inf)
        _, same, dist_new = run(z_new)
        keep = same & (dist_new > dist)  # (B, R) candidates
        z_try = np.where(keep[..., None], z_new, z)
        weights_try, same, dist_try = run(z_try)  # verify the combination
        keep &= same.all(axis=1, keepdims=True)  # a sequence that changed anything: backtrack
        seq = keep.any(axis=1)  # (B,) sequences that moved
        output_tv = np.where(seq[:, None], last_tv["tv"], output_tv)
        z = np.where(keep[..., None], z_new, z)
        weights = np.where(seq[:, None, None], weights_try, weights)
        dist = np.where(keep, dist_try, dist)
        eta = np.where(keep, eta * 1.5, eta * 0.5)
        accepted += keep
        history.append(dist.mean())
        if eta.max() < min_step:
            break
    return AdversarialResult(weights, own, dist, np.array(history), accepted, output_tv)


def output_distributions(logits) -> np.ndarray:
    """softmax over the vocabulary: the model's next-token distributions, (..., vocab_size)."""
    return softmax(float_array("output_distributions", "logits", logits))


def logit_difference(logits, target) -> np.ndarray:
    """The target's logit minus the largest other logit, along the last axis.

    Positive when the model predicts the target (by how much it leads), negative when it
    predicts another token (by how much the target trails); the rival is found by its index,
    so another token tied with the target gives 0. Unlike an accuracy it keeps moving when a
    prediction is already certain, which is why patching is measured with it.
    Shapes: logits (..., V) float with V >= 2, target (...) integer ids in [0, V).
    Returns (...).
    """
    fn = "logit_difference"
    logits = float_array(fn, "logits", logits)
    target = np.asarray(target)
    if not np.issubdtype(target.dtype, np.integer):
        raise ValueError(
            f"{fn}: target must hold integer ids, got dtype {target.dtype} shape {target.shape}"
        )
    if logits.shape[-1] < 2 or target.shape != logits.shape[:-1]:
        raise ValueError(
            f"{fn}: logits (..., V) with V >= 2 and target (...) must match, got logits "
            f"{logits.shape} and target {target.shape}"
        )
    if target.size and (target.min() < 0 or target.max() >= logits.shape[-1]):
        raise ValueError(
            f"{fn}: target ids must lie in [0, {logits.shape[-1]}), got "
            f"{target.min()}..{target.max()}"
        )
    correct = np.take_along_axis(logits, target[..., None], axis=-1)[..., 0]  # (...)
    rivals = logits.copy()
    np.put_along_axis(rivals, target[..., None], -np.inf, axis=-1)  # not its own rival
    return correct - rivals.max(axis=-1)  # (...)
