"""Interventions on the decoder: read every head's attention, then change what the heads do.

Taught in chapter 12 (``chapters/12_attention_maps.ipynb``), which uses them to test whether
the attention maps of the trained copy model explain its outputs.

:func:`forward_with_interventions` runs the decoder's own forward pass
(``npformer.core.model.forward``: its blocks, its attention core, every position scheme) with a hook
inside each block's attention, between the heads' weighted sums and the output projection W_o,
and accepts these interventions:

- ablate a head: its output (its weighted sum of values, before W_o) is set to zero;
- replace a head's attention weights: by a given (B, T, S) distribution, or by a rule applied
  to the weights the head computed itself (:func:`uniform_weights`, :func:`permuted_weights`);
- patch a head's output: its weighted sum of values is replaced by given values (``patch``),
  for mean-ablation (the head's mean output over a batch), resample-ablation (its output on
  other prompts) and activation patching (its output on a prompt that differs in one symbol);
- edit input tokens before the embedding (``token_edits``).

With no intervention its logits are ``npformer.core.model.forward``'s, bit for bit (checked in
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

from npformer.core.attention import masked_softmax
from npformer.core.masks import causal_mask
from npformer.core.model import DecoderConfig, forward
from npformer.training.train import generate

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


def _head(fn: str, key, config: DecoderConfig) -> tuple[int, int]:
    """A (layer, head) pair inside the model: a head outside it would silently edit nothing."""
    layer, head = (int(k) for k in key)
    if not (0 <= layer < config.num_layers and 0 <= head < config.num_heads):
        raise ValueError(
            f"{fn}: head {tuple(key)} is outside the model: layers 0..{config.num_layers - 1}, "
            f"heads 0..{config.num_heads - 1}"
        )
    return layer, head


def check_attention_weights(fn: str, weights, visible: np.ndarray, dtype) -> np.ndarray:
    """Return ``weights`` as a (B, T, S) array of ``dtype`` that is a distribution per query.

    ``weights`` has shape (B, T, S) or (T, S) (then shared by the batch) for ``visible`` of
    shape (B, T, S); its entries must be >= 0, exactly 0 on invisible keys, and each row must
    sum to 1 over the visible keys (within sqrt of the machine epsilon of ``dtype``; a query
    that sees no key at all must have weights 0, as ``masked_softmax`` gives it).
    Raises ValueError naming the shapes otherwise.
    """
    B, T, S = visible.shape
    w = np.asarray(weights)
    if w.shape not in ((B, T, S), (T, S)):
        raise ValueError(
            f"{fn}: replacement weights of shape {w.shape} do not fit the head's weights: "
            f"expected (B, T, S) = {(B, T, S)} or (T, S) = {(T, S)}"
        )
    shape = w.shape
    w = np.broadcast_to(w, (B, T, S)).astype(dtype)  # (B, T, S) a copy
    sums = w.sum(axis=-1)  # (B, T); a query with no visible key reads nothing: sum 0
    if (
        (w < 0).any()
        or (w[~visible] != 0).any()
        or not np.allclose(sums, visible.any(axis=-1), rtol=0, atol=math.sqrt(np.finfo(dtype).eps))
    ):
        raise ValueError(
            f"{fn}: replacement weights of shape {shape} must be >= 0, zero on the keys "
            f"the mask hides, and sum to one over each query's visible keys"
        )
    return w


# ----------------------------------------------------------------------------- replacement rules


def uniform_weights(weights, visible) -> np.ndarray:
    """The same weight 1 / (number of visible keys) on every visible key of each query.

    A replacement rule for ``replace``. Shapes: weights and visible (B, T, S).
    Returns (B, T, S) in the dtype of ``weights``.
    """
    weights = np.asarray(weights)
    visible = np.broadcast_to(visible, weights.shape)  # (B, T, S)
    counts = visible.sum(axis=-1, keepdims=True)  # (B, T, 1)
    return np.where(visible, 1.0 / np.maximum(counts, 1), 0.0).astype(weights.dtype)


def permuted_weights(rng: np.random.Generator) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A replacement rule that shuffles each query's weights among its visible keys.

    Each row keeps exactly its own set of weights (so its entropy and its largest weight), but
    the keys they land on are a uniformly random permutation of the visible keys, drawn from
    ``rng``; invisible keys keep weight 0. Returns ``rule(weights, visible) -> (B, T, S)``.
    """

    def rule(weights, visible):
        weights = np.asarray(weights)
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
    """The ``head_edit`` hook of ``npformer.core.model.forward``: applies the interventions of each
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

    The decoder of ``npformer.core.model.forward`` (any configuration: pre- or post-LN, every
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
    ``npformer.core.model.forward``. Keeps the parameters' dtype.

    Shapes: tokens (B, T) integer ids. Returns InterventionResult(logits (B, T, vocab_size),
    weights, own_weights, outputs): lists with one (B, h, T, T) array per layer for the two
    weights, one (B, h, T, d_h) array per layer for the heads' outputs.
    """
    fn = "forward_with_interventions"
    tokens = np.array(tokens)  # a copy: token_edits write into it; forward checks the ids
    for position, new in dict(token_edits or {}).items():
        tokens[:, position] = new
    B, T = tokens.shape
    h, d_h = config.num_heads, config.d_model // config.num_heads
    ablated = {_head(fn, key, config) for key in ablate}
    replaced = {_head(fn, key, config): value for key, value in dict(replace or {}).items()}
    dtype = np.asarray(params["tok_emb"]).dtype
    patched = {}
    for key, value in dict(patch or {}).items():
        v = np.asarray(value, dtype=dtype)
        if v.shape not in ((B, T, d_h), (T, d_h), (d_h,)):
            raise ValueError(
                f"{fn}: patch[{key!r}] of shape {v.shape} does not fit the head's output: "
                f"expected (B, T, d_h) = {(B, T, d_h)}, (T, d_h) = {(T, d_h)} or (d_h,) = {(d_h,)}"
            )
        patched[_head(fn, key, config)] = np.broadcast_to(v, (B, T, d_h))
    visible = causal_mask(T) if attn_mask is None else attn_mask  # True = may attend
    visible = np.broadcast_to(visible, (B, h, T, T))
    # the decoder's own forward pass, with the heads edited inside each block's attention
    edit = _HeadEdit(fn, visible, ablated, replaced, patched)
    logits, _ = forward(params, config, tokens, attn_mask, head_edit=edit)
    applied, own, outputs = edit.applied, edit.own, edit.outputs
    return InterventionResult(logits, applied, own, outputs)


def generate_with_interventions(params, config: DecoderConfig, start, num_new: int, **kwargs):
    """Greedy generation (``npformer.training.train.generate``) with the model under an
    intervention.

    ``kwargs`` are those of :func:`forward_with_interventions`, applied at every step (the
    sequence grows, so ``replace`` should hold rules, not fixed arrays).
    Shapes: start (B, t0) integer. Returns the generated tokens, (B, num_new) int64.
    """
    return generate(
        lambda tokens: forward_with_interventions(params, config, tokens, **kwargs).logits,
        start,
        num_new,
    )


# ----------------------------------------------------------------------------- distances


def total_variation(p, q) -> np.ndarray:
    """Total variation distance between distributions along the last axis: 1/2 sum |p - q|.

    In [0, 1]: 0 for equal distributions, 1 for disjoint supports.
    Shapes: p, q (..., n). Returns (...).
    """
    return 0.5 * np.abs(p - q).sum(axis=-1)


def js_divergence(p, q) -> np.ndarray:
    """Jensen-Shannon divergence along the last axis, in bits: 1/2 KL(p||m) + 1/2 KL(q||m).

    m = (p + q) / 2, KL(p||m) = sum p log2(p / m) with 0 log 0 = 0. Symmetric, in [0, 1]:
    0 for equal distributions, 1 for disjoint supports.
    Shapes: p, q (..., n). Returns (...).
    """
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
    kept: np.ndarray  # (B, R) each row's logit difference at the end over the model's own


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
    max_drop: float | None = None,
) -> AdversarialResult:
    """Gradient ascent on the distance of one head's weights from its own, predictions fixed.

    The head's weights at the query positions ``rows`` are parametrized by logits z,
    A'(z) = softmax(z) over the visible keys, started at log A + ``init_scale`` N(0, 1) noise
    (seeded; JS has zero gradient at A' = A). Every query row r of every sequence b has its own
    step size eta[b, r]. One step:

    1. z' = z + eta * dJS(A, A'(z)) / dz for every row at once (JS in bits);
    2. run the model with A'(z'): a row is a candidate if the prediction at its own position is
       unchanged (and, with ``max_drop``, its logit difference, the predicted token's logit
       minus the largest other, has fallen by at most that fraction of the unmodified model's)
       and its distance grew;
    3. run the model with the candidates' rows moved and the other rows kept: if any prediction
       at a position in ``rows`` changed (or fell further than ``max_drop``), the whole sequence
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
    tokens = np.asarray(tokens)
    layer, head = _head(fn, (layer, head), config)
    B, T = tokens.shape
    rows = np.asarray(rows)
    if rows.ndim != 1 or rows.size == 0 or np.unique(rows).size != rows.size:
        raise ValueError(
            f"{fn}: rows must be distinct query positions, a non-empty 1-D array, for tokens "
            f"of shape {tokens.shape}; got {rows.tolist()}"
        )
    clean = forward_with_interventions(params, config, tokens)
    target = clean.logits[:, rows].argmax(axis=-1)  # (B, R) the predictions to keep
    base = logit_difference(clean.logits[:, rows], target)  # (B, R)
    own = clean.own_weights[layer][:, head]  # (B, T, T)
    visible = np.broadcast_to(causal_mask(T), (B, T, T))[:, rows]  # (B, R, T)
    p = own[:, rows]  # (B, R, T)
    last_kept = {}

    def run(z):
        """Weights A'(z) in place of the head's rows; which predictions stay; row distances."""
        q = masked_softmax(z, visible)  # (B, R, T)
        full = own.copy()
        full[:, rows] = q  # (B, T, T)
        out = forward_with_interventions(params, config, tokens, replace={(layer, head): full})
        same = out.logits[:, rows].argmax(axis=-1) == target  # (B, R)
        kept = logit_difference(out.logits[:, rows], target) / base  # (B, R)
        if max_drop is not None:
            same &= kept >= 1 - max_drop
        last_kept["kept"] = kept
        return full, same, js_divergence(p, q)  # (B, T, T), (B, R), (B, R)

    rng = np.random.default_rng(seed)
    z0 = np.where(visible, np.log(np.maximum(p, np.finfo(p.dtype).tiny)), -np.inf)  # (B, R, T)
    z = np.where(visible, z0 + init_scale * rng.standard_normal(p.shape), -np.inf)
    weights, same, dist = run(z)
    kept = last_kept["kept"]
    ok = same.all(axis=1)  # (B,)
    z = np.where(ok[:, None, None], z, z0)  # a noisy start that changes a prediction: back to A
    weights = np.where(ok[:, None, None], weights, own)
    dist = np.where(ok[:, None], dist, 0.0)  # (B, R)
    kept = np.where(ok[:, None], kept, 1.0)
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
        kept = np.where(seq[:, None], last_kept["kept"], kept)
        z = np.where(keep[..., None], z_new, z)
        weights = np.where(seq[:, None, None], weights_try, weights)
        dist = np.where(keep, dist_try, dist)
        eta = np.where(keep, eta * 1.5, eta * 0.5)
        accepted += keep
        history.append(dist.mean())
        if eta.max() < min_step:
            break
    return AdversarialResult(weights, own, dist, np.array(history), accepted, kept)


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
    logits, target = np.asarray(logits), np.asarray(target)
    if logits.shape[-1] < 2 or target.shape != logits.shape[:-1]:
        raise ValueError(
            f"{fn}: logits (..., V) with V >= 2 and target (...) must match, got logits "
            f"{logits.shape} and target {target.shape}"
        )
    correct = np.take_along_axis(logits, target[..., None], axis=-1)[..., 0]  # (...)
    rivals = logits.copy()
    np.put_along_axis(rivals, target[..., None], -np.inf, axis=-1)  # not its own rival
    return correct - rivals.max(axis=-1)  # (...)
