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

:func:`forward_removing` runs the decoder's own forward pass (``npformer.core.model.forward``) with
the projection applied to the residual stream after one block; without directions it is
``npformer.core.model.forward``, bit for bit (tested).
"""

from __future__ import annotations

import numpy as np

from npformer.core.model import DecoderConfig, forward
from npformer.training.train import generate


def orthonormal_basis(directions) -> np.ndarray:
    """An orthonormal basis (k, d) of the span of the rows of ``directions`` (k, d), rank k."""
    D = np.asarray(directions, dtype=np.float64)
    Q, R = np.linalg.qr(D.T)  # (d, k), (k, k)
    diag = np.abs(np.diag(R))
    if diag.min() <= 1e-10 * max(diag.max(), 1e-300):  # else Q holds a spurious direction
        raise ValueError(f"orthonormal_basis: the directions of shape {D.shape} are dependent")
    return Q.T  # (k, d)


def remove_directions(x, directions, center=None) -> np.ndarray:
    """x - ((x - c) Q^T) Q: remove from ``x`` (..., d) its variation along ``directions`` (k, d).

    ``directions`` need not be orthonormal (an orthonormal basis of their span is used);
    ``center`` (d,) defaults to zero. Keeps the dtype of ``x``.
    """
    x = np.asarray(x)
    c = 0.0 if center is None else np.asarray(center)
    Q = orthonormal_basis(directions)  # (k, d)
    coords = (x.astype(np.float64) - c) @ Q.T  # (..., k)
    return (x - coords @ Q).astype(x.dtype)  # (..., d)


def random_directions(rng: np.random.Generator, k: int, d: int) -> np.ndarray:
    """``k`` orthonormal directions of R^d drawn uniformly (QR of a Gaussian matrix): (k, d)."""
    return orthonormal_basis(rng.normal(size=(k, d)))


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
    run unchanged. ``attn_mask`` as in ``npformer.core.model.forward``.
    Shapes: tokens (B, T). Returns logits (B, T, vocab_size) in the parameters' dtype.
    """
    D = None if directions is None else orthonormal_basis(directions)  # (k, d)

    def remove_after_one_block(layer, x):  # x (B, T, d), the stream after block ``layer``
        if layer == after_block and D is not None:
            return remove_directions(x, D, center)
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
    """Greedy generation (``npformer.training.train.generate``) with the directions removed at every
    step.

    Shapes: start (B, t0) integer. Returns the generated tokens, (B, num_new) int64.
    """  # fmt: skip
    return generate(
        lambda tokens: forward_removing(params, config, tokens, after_block, directions, center),
        start,
        num_new,
    )
