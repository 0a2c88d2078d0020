"""Layer norm and the position-wise feed-forward network, forward and backward.

Taught in chapter 06 (``chapters/06_block.ipynb``), which assembles them with attention into
the pre-LN and post-LN Transformer blocks of ``npformer.model``; chapter 07 reuses the forward
functions in the encoder-decoder.

Conventions: a linear layer is ``x @ W + b`` with ``W`` of shape (d_in, d_out); forward
functions return ``(out, cache)`` and backward functions take ``(d_out, cache)``. Every function
keeps the dtype of its inputs (float32 stays float32) and refuses mixed dtypes.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from npformer.reductions import _max_last, _ones, _sum_last, _sum_rows  # noqa: F401
from npformer.validation import float_array, same_dtype

ACTIVATIONS = ("relu", "gelu", "swiglu")

_GELU_C = math.sqrt(2.0 / math.pi)  # Python floats: no promotion
_GELU_A = 0.044715


# ----------------------------------------------------------------------------- layer norm


class LayerNormCache(NamedTuple):
    """What ``layer_norm_backward`` needs."""

    x_hat: np.ndarray  # (..., d) the normalized input (x - mean) / sqrt(var + eps)
    rstd: np.ndarray  # (..., 1) 1 / sqrt(var + eps)
    gamma: np.ndarray  # (d,)


def _check_layer_norm(fn: str, x, gamma, beta):
    x = float_array(fn, "x", x)
    gamma = float_array(fn, "gamma", gamma)
    beta = float_array(fn, "beta", beta)
    same_dtype(fn, x=x, gamma=gamma, beta=beta)
    d = x.shape[-1]
    if gamma.shape != (d,) or beta.shape != (d,):
        raise ValueError(
            f"{fn}: gamma {gamma.shape} and beta {beta.shape} must both have shape ({d},) "
            f"to match x of shape {x.shape}"
        )
    return x, gamma, beta


def layer_norm(x, gamma, beta, eps: float = 1e-5):
    """Layer norm over the last axis: gamma * (x - mean) / sqrt(var + eps) + beta.

    ``var`` is the biased variance (divide by d), as in Ba et al. (2016) and ``torch``.
    Shapes: x (..., d), gamma (d,), beta (d,). Returns (out (..., d), LayerNormCache).
    """
    x, gamma, beta = _check_layer_norm("layer_norm", x, gamma, beta)
    return _layer_norm(x, gamma, beta, eps)


def _layer_norm(x, gamma, beta, eps=1e-5):
    """``layer_norm`` without input checks (the model's hot path)."""
    inv_d = 1.0 / x.shape[-1]
    mean = _sum_last(x)  # (..., 1)
    mean *= inv_d
    centered = x - mean  # (..., d)
    var = _sum_last(centered * centered)  # (..., 1) sum of squares
    var *= inv_d
    var += eps
    rstd = np.sqrt(var, out=var)  # (..., 1) in place: sqrt then 1/
    np.reciprocal(rstd, out=rstd)
    x_hat = centered
    x_hat *= rstd  # (..., d) in place
    out = x_hat * gamma  # (..., d)
    out += beta
    return out, LayerNormCache(x_hat, rstd, gamma)


def layer_norm_backward(d_out, cache: LayerNormCache):
    """Closed-form backward of ``layer_norm``.

    With g = d_out * gamma (the gradient with respect to x_hat), over the last axis of length d:
        dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
        dgamma = sum over leading axes of d_out * x_hat,  dbeta = sum over leading axes of d_out.
    Shapes: d_out (..., d). Returns (dx (..., d), dgamma (d,), dbeta (d,)).
    """
    fn = "layer_norm_backward"
    d_out = float_array(fn, "d_out", d_out)
    if d_out.shape != cache.x_hat.shape:
        raise ValueError(
            f"{fn}: d_out has shape {d_out.shape} but the forward output had shape "
            f"{cache.x_hat.shape}"
        )
    same_dtype(fn, d_out=d_out, x_hat=cache.x_hat)
    return _layer_norm_backward(d_out, cache)


def _layer_norm_backward(d_out, cache):
    """``layer_norm_backward`` without input checks."""
    x_hat, rstd, gamma = cache
    d = x_hat.shape[-1]
    inv_d = 1.0 / d
    tmp = d_out * x_hat  # (..., d)
    dgamma = _sum_rows(tmp.reshape(-1, d))  # (d,)
    dbeta = _sum_rows(d_out.reshape(-1, d))  # (d,)
    g = d_out * gamma  # (..., d) dL/dx_hat
    mean_g = _sum_last(g)  # (..., 1)
    mean_g *= inv_d
    np.multiply(g, x_hat, out=tmp)
    mean_gx = _sum_last(tmp)  # (..., 1)
    mean_gx *= inv_d
    g -= mean_g
    np.multiply(x_hat, mean_gx, out=tmp)
    g -= tmp
    g *= rstd
    return g, dgamma, dbeta


# ----------------------------------------------------------------------------- activations


def relu(x):
    """max(x, 0), keeping the dtype."""
    return np.maximum(x, 0)


def gelu(x):
    """GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel).

    The tanh form is the one GPT-2 and BERT use; ``torch.nn.functional.gelu(x,
    approximate="tanh")`` computes the same function. Keeps the dtype.
    """
    u = x * x  # x^2
    u *= _GELU_A
    u += 1.0
    u *= x
    u *= _GELU_C  # sqrt(2/pi) (x + a x^3)
    t = np.tanh(u, out=u)
    t += 1.0
    t *= 0.5
    return t * x


def gelu_backward(d_out, x):
    """d/dx of the tanh GELU times ``d_out``.

    With u = c (x + a x^3) and t = tanh(u):
        gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2).
    """
    x2 = x * x
    u = x2 * _GELU_A
    u += 1.0
    u *= x
    u *= _GELU_C
    t = np.tanh(u, out=u)  # tanh(c (x + a x^3))
    du = x2
    du *= 3.0 * _GELU_A
    du += 1.0
    du *= _GELU_C  # c (1 + 3 a x^2)
    sech2 = t * t
    np.subtract(1.0, sech2, out=sech2)  # 1 - t^2
    sech2 *= du
    sech2 *= x
    t += 1.0
    t += sech2
    t *= 0.5
    t *= d_out
    return t


def sigmoid(x):
    """1 / (1 + exp(-x)) without overflow: exp only ever sees -|x|; keeps the dtype."""
    e = np.exp(-np.abs(x))  # in (0, 1], never overflows
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def silu(x):
    """x * sigmoid(x) (the "swish" of SwiGLU), keeping the dtype."""
    return x * sigmoid(x)


# ----------------------------------------------------------------------------- feed-forward


class FeedForwardCache(NamedTuple):
    """What ``feed_forward_backward`` needs."""

    x: np.ndarray  # (..., d) the input
    pre: np.ndarray  # (..., d_ff) x @ W_1 + b_1, the activation's input
    hidden: np.ndarray  # (..., d_ff) the activation's output (the input of W_2)
    gate: np.ndarray | None  # (..., d_ff) x @ W_gate + b_gate (SwiGLU only)
    params: dict
    activation: str


def init_feed_forward_params(
    d_model: int, d_ff: int, rng: np.random.Generator, activation: str = "relu", dtype=np.float64
) -> dict:
    """Weights N(0, 1/d_in) and zero biases for ``feed_forward``.

    Returns "W_1" (d, d_ff), "b_1" (d_ff,), "W_2" (d_ff, d), "b_2" (d,); SwiGLU adds the gate
    "W_gate" (d, d_ff) and "b_gate" (d_ff,).
    """
    fn = "init_feed_forward_params"
    if d_model <= 0 or d_ff <= 0:
        raise ValueError(f"{fn}: d_model={d_model} and d_ff={d_ff} must be positive")
    _check_activation(fn, activation)
    params = {
        "W_1": rng.normal(0.0, 1.0 / math.sqrt(d_model), (d_model, d_ff)),
        "b_1": np.zeros(d_ff),
        "W_2": rng.normal(0.0, 1.0 / math.sqrt(d_ff), (d_ff, d_model)),
        "b_2": np.zeros(d_model),
    }
    if activation == "swiglu":
        params["W_gate"] = rng.normal(0.0, 1.0 / math.sqrt(d_model), (d_model, d_ff))
        params["b_gate"] = np.zeros(d_ff)
    return {name: p.astype(dtype) for name, p in params.items()}


def feed_forward_num_params(d_model: int, d_ff: int, activation: str = "relu") -> int:
    """Parameter count of ``feed_forward``: 2 d d_ff + d_ff + d, plus d d_ff + d_ff for SwiGLU."""
    _check_activation("feed_forward_num_params", activation)
    count = 2 * d_model * d_ff + d_ff + d_model
    if activation == "swiglu":
        count += d_model * d_ff + d_ff
    return count


def _check_activation(fn, activation):
    if activation not in ACTIVATIONS:
        raise ValueError(f"{fn}: activation must be one of {ACTIVATIONS}, got {activation!r}")


def feed_forward(x, params: dict, activation: str = "relu"):
    """Position-wise feed-forward network: act(x @ W_1 + b_1) @ W_2 + b_2.

    ``activation`` is "relu", "gelu" (tanh form) or "swiglu", for which the hidden layer is
    silu(x @ W_1 + b_1) * (x @ W_gate + b_gate) (Shazeer 2020).
    Shapes: x (..., d), W_1 and W_gate (d, d_ff), b_1 and b_gate (d_ff,), W_2 (d_ff, d),
    b_2 (d,). Returns (out (..., d), FeedForwardCache).
    """
    fn = "feed_forward"
    _check_activation(fn, activation)
    x = float_array(fn, "x", x)
    names = ["W_1", "b_1", "W_2", "b_2"] + (["W_gate", "b_gate"] if activation == "swiglu" else [])
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"{fn}: params lacks {missing} (activation {activation!r})")
    p = {n: float_array(fn, n, params[n]) for n in names}
    same_dtype(fn, x=x, **p)
    d = x.shape[-1]
    d_ff = p["W_1"].shape[-1]
    expected = {"W_1": (d, d_ff), "b_1": (d_ff,), "W_2": (d_ff, d), "b_2": (d,)}
    if activation == "swiglu":
        expected.update(W_gate=(d, d_ff), b_gate=(d_ff,))
    for n, shape in expected.items():
        if p[n].shape != shape:
            got = ", ".join(f"{k} {p[k].shape}" for k in names)
            raise ValueError(
                f"{fn}: x has shape {x.shape}, so {n} must have shape {shape}; got {got}"
            )
    return _feed_forward(x, p, activation)


def _feed_forward(x, params, activation):
    """``feed_forward`` without input checks.

    The products run on (N, d) matrices, N = every leading axis flattened: one BLAS call
    instead of a loop over the batch, which NumPy's matmul does for (B, T, d) @ (d, d_ff).
    """
    lead, d_ff = x.shape[:-1], params["W_1"].shape[-1]
    x2 = x.reshape(-1, x.shape[-1])  # (N, d)
    pre = x2 @ params["W_1"]  # (N, d_ff)
    pre += params["b_1"]
    gate = None
    if activation == "relu":
        hidden = np.maximum(pre, 0)  # (N, d_ff)
    elif activation == "gelu":
        hidden = gelu(pre)
    else:
        gate = x2 @ params["W_gate"]  # (N, d_ff)
        gate += params["b_gate"]
        hidden = silu(pre)
        hidden *= gate
        gate = gate.reshape(lead + (d_ff,))
    out = hidden @ params["W_2"]  # (N, d)
    out += params["b_2"]
    pre, hidden = pre.reshape(lead + (d_ff,)), hidden.reshape(lead + (d_ff,))  # (..., d_ff)
    return out.reshape(x.shape), FeedForwardCache(x, pre, hidden, gate, params, activation)


def feed_forward_backward(d_out, cache: FeedForwardCache):
    """Backward of ``feed_forward``.

    dW_2 = hidden^T d_out, db_2 = sum d_out, d_hidden = d_out W_2^T, then through the
    activation (ReLU: d_pre = d_hidden * [pre > 0]), dW_1 = x^T d_pre, db_1 = sum d_pre,
    dx = d_pre W_1^T (+ d_gate W_gate^T for SwiGLU). Leading axes are summed for the weights.
    Returns (dx (..., d), grads: dict with the same keys and shapes as the params).
    """
    fn = "feed_forward_backward"
    d_out = float_array(fn, "d_out", d_out)
    expected = cache.x.shape[:-1] + (cache.params["W_2"].shape[-1],)
    if d_out.shape != expected:
        raise ValueError(f"{fn}: d_out has shape {d_out.shape}, the forward output {expected}")
    same_dtype(fn, d_out=d_out, x=cache.x)
    return _feed_forward_backward(d_out, cache)


def _feed_forward_backward(d_out, cache):
    """``feed_forward_backward`` without input checks."""
    x, pre, hidden, gate, params, activation = cache
    d, d_ff = params["W_1"].shape
    x2 = x.reshape(-1, d)  # (N, d)
    g2 = d_out.reshape(-1, d)  # (N, d)
    grads = {
        "W_2": hidden.reshape(-1, d_ff).T @ g2,  # (d_ff, d)
        "b_2": _sum_rows(g2),  # (d,)
    }
    d_hidden = (g2 @ params["W_2"].T).reshape(pre.shape)  # (..., d_ff)
    if activation == "relu":
        d_pre = d_hidden
        d_pre *= pre > 0  # the kink at 0 gets derivative 0
    elif activation == "gelu":
        d_pre = gelu_backward(d_hidden, pre)
    else:
        sig = sigmoid(pre)  # (..., d_ff)
        act = pre * sig  # silu(pre)
        d_gate = d_hidden * act
        # silu'(p) = sig (1 + p (1 - sig))
        d_pre = d_hidden * gate * sig * (1.0 + pre * (1.0 - sig))
        grads["W_gate"] = x2.T @ d_gate.reshape(-1, d_ff)  # (d, d_ff)
        grads["b_gate"] = _sum_rows(d_gate.reshape(-1, d_ff))
    dp2 = d_pre.reshape(-1, d_ff)  # (N, d_ff)
    grads["W_1"] = x2.T @ dp2  # (d, d_ff)
    grads["b_1"] = _sum_rows(dp2)  # (d_ff,)
    dx = dp2 @ params["W_1"].T  # (N, d)
    if activation == "swiglu":
        dx += d_gate.reshape(-1, d_ff) @ params["W_gate"].T
    return dx.reshape(x.shape), grads
