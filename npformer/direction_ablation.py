"""Removing directions from the residual stream: the causal test of what a probe reads.

Taught in chapter 11 (``chapters/11_ablations.ipynb``). A linear probe that reads a label off
the hidden states shows that the label is *there*; it does not show that the model *uses* it.
The causal test: project the directions the probe reads out of the residual stream after one
block, let the rest of the model run, and measure what the model can still do, against
removing random directions of the same number.

With an orthonormal basis Q (k, d) of the removed subspace and a centre c (d,) (the mean state,
so that only the variation along Q is removed, not the average offset),

    x' = x - ((x - c) Q^T) Q ,

after which every removed direction reads the same value c Q^T for every token.

:func:`forward_removing` runs the decoder's own forward pass (``npformer.model.forward``) with
the projection applied to the residual stream after one block; without directions it is
``npformer.model.forward``, bit for bit (tested).
"""

from __future__ import annotations

import numpy as np

from npformer.model import DecoderConfig, check_tokens, forward, parameter_shapes
from npformer.train import generate
from npformer.validation import bool_mask, float_array, generator, int_at_least


def orthonormal_basis(directions) -> np.ndarray:
    """An orthonormal basis (k, d) of the span of the rows of ``directions`` (k, d), rank k."""
    fn = "orthonormal_basis"
    D = float_array(fn, "directions", directions, min_rank=2).astype(np.float64)
    if D.ndim != 2 or D.shape[0] < 1 or D.shape[0] > D.shape[1]:
        raise ValueError(f"{fn}: directions must have shape (k, d) with 1 <= k <= d, got {D.shape}")
    Q, R = np.linalg.qr(D.T)  # (d, k), (k, k)
    diag = np.abs(np.diag(R))
    if diag.min() <= 1e-10 * max(diag.max(), 1e-300):
        raise ValueError(
            f"{fn}: the {D.shape[0]} directions of shape {D.shape} are not independent"
        )
    return Q.T  # (k, d)


def remove_directions(x, directions, center=None) -> np.ndarray:
    """x - ((x - c) Q^T) Q: remove from ``x`` (..., d) its variation along ``directions`` (k, d).

    ``directions`` need not be orthonormal (an orthonormal basis of their span is used);
    ``center`` (d,) defaults to zero. Keeps the dtype of ``x``.
    """
    fn = "remove_directions"
    x = float_array(fn, "x", x)
    D = float_array(fn, "directions", directions, min_rank=2)
    if D.ndim != 2 or D.shape[1] != x.shape[-1]:
        raise ValueError(
            f"{fn}: directions must have shape (k, {x.shape[-1]}) to match x {x.shape}, "
            f"got {D.shape}"
        )
    c = np.zeros(x.shape[-1]) if center is None else float_array(fn, "center", center)
    if c.shape != (x.shape[-1],):
        raise ValueError(f"{fn}: center must have shape ({x.shape[-1]},), got {c.shape}")
    Q = orthonormal_basis(D)  # (k, d)
    coords = (x.astype(np.float64) - c) @ Q.T  # (..., k)
    return (x - coords @ Q).astype(x.dtype)  # (..., d)


def random_directions(rng: np.random.Generator, k: int, d: int) -> np.ndarray:
    """``k`` orthonormal directions of R^d drawn uniformly (QR of a Gaussian matrix): (k, d)."""
    generator("random_directions", rng)
    d = int_at_least("random_directions", "d", d)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= d:
        raise ValueError(f"random_directions: k must be an integer in [1, d={d}], got {k!r}")
    return orthonormal_basis(rng.normal(size=(k, d)))


def _check(fn, params, config, after_block, directions, center):
    if not isinstance(config, DecoderConfig):
        raise ValueError(f"{fn}: config must be a DecoderConfig, got {type(config).__name__}")
    shapes = parameter_shapes(config)
    if not isinstance(params, dict) or any(name not in params for name in shapes):
        raise ValueError(f"{fn}: params must hold the {len(shapes)} parameters of the config")
    ok = not isinstance(after_block, bool) and isinstance(after_block, (int, np.integer))
    if not ok or not 0 <= after_block < config.num_layers:
        raise ValueError(
            f"{fn}: after_block must be a block index in [0, {config.num_layers}), "
            f"got {after_block!r}"
        )
    if directions is None:
        return None, None
    D = orthonormal_basis(directions)
    if D.shape[1] != config.d_model:
        raise ValueError(
            f"{fn}: directions have shape {D.shape}; the model's width is {config.d_model}"
        )
    c = np.zeros(config.d_model) if center is None else float_array(fn, "center", center)
    if c.shape != (config.d_model,):
        raise ValueError(f"{fn}: center must have shape ({config.d_model},), got {c.shape}")
    return D, c


def forward_removing(
    params: dict,
    config: DecoderConfig,
    tokens,
    after_block: int,
    directions=None,
    center=None,
    attn_mask=None,
) -> np.ndarray:
    """Logits of the decoder with ``directions`` (k, d) removed after block ``after_block``.

    The residual stream x_l after block l = ``after_block`` (0-based) becomes
    x_l - ((x_l - c) Q^T) Q at every position (see :func:`remove_directions`); the other blocks
    run unchanged. ``attn_mask`` as in ``npformer.model.forward``.
    Shapes: tokens (B, T). Returns logits (B, T, vocab_size) in the parameters' dtype.
    """
    fn = "forward_removing"
    D, c = _check(fn, params, config, after_block, directions, center)
    tokens = check_tokens(fn, "tokens", tokens, config)
    B, T = tokens.shape
    if attn_mask is not None:
        attn_mask = bool_mask(
            fn, attn_mask, (B, config.num_heads, T, T), "scores of shape", "attn_mask"
        )

    def remove_after_one_block(layer, x):  # x (B, T, d), the stream after block ``layer``
        if layer == after_block and D is not None:
            return remove_directions(x, D, c)
        return x

    # the decoder's own forward pass, with the stream edited between two blocks
    logits, _ = forward(params, config, tokens, attn_mask, residual_edit=remove_after_one_block)
    return logits  # (B, T, vocab_size)


def generate_removing(
    params,
    config: DecoderConfig,
    start,
    num_new: int,
    after_block: int,
    directions=None,
    center=None,
) -> np.ndarray:
    """Greedy generation (``npformer.train.generate``) with the directions removed at every step.

    Shapes: start (B, t0) integer. Returns the generated tokens, (B, num_new) int64.
    """  # fmt: skip
    _check("generate_removing", params, config, after_block, directions, center)
    check_tokens("generate_removing", "start", start, config)
    return generate(
        lambda tokens: forward_removing(params, config, tokens, after_block, directions, center),
        start,
        num_new,
    )
