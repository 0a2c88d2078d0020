"""The QK and OV circuits of a first-layer head: where its scores come from, what it writes.

Taught in chapter 12 (``chapters/12_attention_maps.ipynb``), which uses them to explain the
pointer heads of the trained copy model (Elhage et al. 2021, *A Mathematical Framework for
Transformer Circuits*).

In layer 0 of a pre-LN decoder with learned positions, the input of every head is
a = LN(e + p), with e the token's embedding and p its position's. Centering is linear and the
division by the standard deviation is one positive number s per position, so

    a = gamma * (c(e) + c(p)) / s + beta,        c(x) = x - mean(x),

and a query q = a W_q + b_q splits exactly into a token part, a position part and a constant
part (the same for a key). The score q . k / sqrt(d_h) then splits exactly into
token-token, position-position, cross (token-position and position-token) and constant terms
(every product that involves a bias or beta): :func:`qk_terms`.

The OV circuit says what the head writes when it reads a token: for each symbol v, the value
vector of LN(e_v + p) through W_v and the head's block of W_o, read out along the direct path
to the logits (final layer norm's centering and gamma, W_out). :func:`ov_circuit` returns that
(vocab x vocab) matrix, and :func:`copying_score` the share of it that copies:
sum of eigenvalues over sum of their absolute values (1 for a pure copier, about 0 for a head
whose output says nothing about the token it read).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from npformer.model import DecoderConfig, check_tokens, parameter_shapes


class QKTerms(NamedTuple):
    """The exact split of one layer-0 head's scores, each (B, T, T); they sum to the scores."""

    token_token: np.ndarray
    position_position: np.ndarray
    cross: np.ndarray  # token-position + position-token
    constant: np.ndarray  # every product with a bias (b_q, b_k) or beta

    def total(self) -> np.ndarray:
        return self.token_token + self.position_position + self.cross + self.constant


def _check(fn: str, params: Mapping, config: DecoderConfig, head: int):
    if not isinstance(config, DecoderConfig):
        raise ValueError(f"{fn}: config must be a DecoderConfig, got {type(config).__name__}")
    if config.ln != "pre" or not config.positions:
        raise ValueError(
            f"{fn}: the split needs a pre-LN model with a learned position table, got "
            f"ln={config.ln!r}, positions={config.positions}"
        )
    missing = sorted(set(parameter_shapes(config)) - set(params))
    if missing:
        raise ValueError(f"{fn}: params lack {missing} needed by the config")
    if isinstance(head, bool) or not isinstance(head, (int, np.integer)):
        raise ValueError(f"{fn}: head must be an integer, got {head!r}")
    if not 0 <= head < config.num_heads:
        raise ValueError(
            f"{fn}: head {head} is outside 0..{config.num_heads - 1} (num_heads={config.num_heads})"
        )


def _centered(x):
    return x - x.mean(axis=-1, keepdims=True)


def qk_terms(params: Mapping, config: DecoderConfig, tokens, head: int) -> QKTerms:
    """Split the layer-0 scores of ``head`` on ``tokens`` into four exact terms.

    Shapes: tokens (B, T) integer ids. Returns QKTerms of (B, T, T) arrays (unmasked scores,
    divided by sqrt(d_h) when the config scales) whose sum equals the head's scores.
    """
    fn = "qk_terms"
    _check(fn, params, config, head)
    tokens = check_tokens(fn, "tokens", tokens, config)
    T = tokens.shape[1]
    d, h = config.d_model, config.num_heads
    d_h = d // h
    e = params["tok_emb"][tokens]  # (B, T, d)
    p = np.broadcast_to(params["pos_emb"][:T], e.shape)  # (B, T, d)
    x = e + p
    s = np.sqrt(_centered(x).var(axis=-1, keepdims=True) + config.ln_eps)  # (B, T, 1)
    gamma, beta = params["block0.ln1.gamma"], params["block0.ln1.beta"]
    W, b = params["block0.attn.W_qkv"], params["block0.attn.b_qkv"]
    cols = {
        "q": slice(head * d_h, (head + 1) * d_h),
        "k": slice(d + head * d_h, d + (head + 1) * d_h),
    }
    parts = {}
    for name, c in cols.items():
        parts[name] = (
            (gamma * _centered(e) / s) @ W[:, c],  # token part (B, T, d_h)
            (gamma * _centered(p) / s) @ W[:, c],  # position part
            np.broadcast_to(beta @ W[:, c] + b[c], e.shape[:-1] + (d_h,)),  # constant part
        )
    scale = 1.0 / math.sqrt(d_h) if config.scale else 1.0

    def dot(u, v):
        return scale * (u @ v.swapaxes(-1, -2))  # (B, T, T)

    (qe, qp, qc), (ke, kp, kc) = parts["q"], parts["k"]
    return QKTerms(
        token_token=dot(qe, ke),
        position_position=dot(qp, kp),
        cross=dot(qe, kp) + dot(qp, ke),
        constant=dot(qc, ke) + dot(qc, kp) + dot(qc, kc) + dot(qe, kc) + dot(qp, kc),
    )


def ov_circuit(params: Mapping, config: DecoderConfig, head: int, positions, symbols) -> np.ndarray:
    """What layer-0 ``head`` adds to the logits, along the direct path, when it reads a symbol.

    Row v: the head's output for a value read from symbol v at one of ``positions`` (averaged
    over them), through W_o, the final layer norm's centering and gamma, and W_out; column u:
    the logit of symbol u. The final layer norm's division by the standard deviation is one
    positive number per position and is left out. Shapes: positions (P,), symbols (n,)
    integer. Returns (n, n), rows and columns in the order of ``symbols``.
    """
    fn = "ov_circuit"
    _check(fn, params, config, head)
    positions = np.asarray(positions)
    symbols = np.asarray(symbols)
    for name, arr, high in (
        ("positions", positions, config.max_len),
        ("symbols", symbols, config.vocab_size),
    ):
        if (
            arr.ndim != 1
            or arr.size == 0
            or not np.issubdtype(arr.dtype, np.integer)
            or arr.min() < 0
            or arr.max() >= high
        ):
            raise ValueError(f"{fn}: {name} must be a non-empty 1-D array of ids in [0, {high})")
    d, h = config.d_model, config.num_heads
    d_h = d // h
    x = params["tok_emb"][symbols][:, None, :] + params["pos_emb"][positions][None]  # (n, P, d)
    xc = _centered(x)
    a = params["block0.ln1.gamma"] * xc / np.sqrt(xc.var(axis=-1, keepdims=True) + config.ln_eps)
    a = a + params["block0.ln1.beta"]
    c = slice(2 * d + head * d_h, 2 * d + (head + 1) * d_h)
    v = a @ params["block0.attn.W_qkv"][:, c] + params["block0.attn.b_qkv"][c]  # (n, P, d_h)
    written = v.mean(axis=1) @ params["block0.attn.W_o"][head * d_h : (head + 1) * d_h]  # (n, d)
    if config.final_ln:
        written = _centered(written) * params["ln_f.gamma"]
    return written @ params["W_out"][:, symbols]  # (n, n)


def copying_score(circuit) -> float:
    """sum(eigenvalues) / sum(|eigenvalues|) of a square circuit matrix (Elhage et al. 2021).

    Near 1 when the matrix maps each symbol mostly onto itself, near 0 (or negative) otherwise.
    The matrix is centered along its rows first, so a logit added to every symbol alike (which
    changes no probability) does not count as copying.
    """
    m = np.asarray(circuit, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2 or not np.isfinite(m).all():
        raise ValueError(f"copying_score: circuit must be a finite square matrix, got {m.shape}")
    eig = np.linalg.eigvals(_centered(m))
    size = np.abs(eig).sum()
    return float(eig.real.sum() / size) if size > 0 else 0.0  # a constant matrix copies nothing
