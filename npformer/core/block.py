"""The Transformer block: layer norm, the feed-forward network, the decoder's self-attention
sub-layer, and the whole pre-LN or post-LN block, each forward and backward.

Taught in chapter 06 (``chapters/06_block.ipynb``); chapter 07 reuses layer norm and the
feed-forward network in the encoder-decoder. ``npformer.core.model`` stacks the blocks between the
embeddings and the loss; the attention itself (scores, mask, bias, softmax, weighted sum, and
its backward) is the core of ``npformer.core.attention``, which the block calls.

Conventions: a linear layer is ``x @ W + b`` with ``W`` of shape (d_in, d_out); forward
functions return ``(out, cache)`` and backward functions take ``(d_out, cache)``. Every function
keeps the dtype of its inputs (float32 stays float32).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from npformer.core.attention import AttentionCache, HeadsCache, multi_head, multi_head_backward
from npformer.core.config import ACTIVATIONS
from npformer.core.positions import alibi_bias, alibi_slopes, apply_rope
from npformer.core.reductions import sum_last, sum_rows

_GELU_C = math.sqrt(2.0 / math.pi)  # Python floats: no promotion
_GELU_A = 0.044715


# ----------------------------------------------------------------------------- layer norm


class LayerNormCache(NamedTuple):
    """What ``layer_norm_backward`` needs."""

    x_hat: np.ndarray  # (..., d) the normalized input (x - mean) / sqrt(var + eps)
    rstd: np.ndarray  # (..., 1) 1 / sqrt(var + eps)
    gamma: np.ndarray  # (d,)


def layer_norm(x, gamma, beta, eps: float = 1e-5):
    """Layer norm over the last axis: gamma * (x - mean) / sqrt(var + eps) + beta.

    ``var`` is the biased variance (divide by d), as in Ba et al. (2016) and ``torch``.
    Shapes: x (..., d), gamma (d,), beta (d,). Returns (out (..., d), LayerNormCache).
    """
    inv_d = 1.0 / x.shape[-1]
    mean = sum_last(x)  # (..., 1)
    mean *= inv_d
    centered = x - mean  # (..., d)
    var = sum_last(centered * centered)  # (..., 1) sum of squares
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
    x_hat, rstd, gamma = cache
    d = x_hat.shape[-1]
    inv_d = 1.0 / d
    tmp = d_out * x_hat  # (..., d)
    dgamma = sum_rows(tmp.reshape(-1, d))  # (d,)
    dbeta = sum_rows(d_out.reshape(-1, d))  # (d,)
    g = d_out * gamma  # (..., d) dL/dx_hat
    mean_g = sum_last(g)  # (..., 1)
    mean_g *= inv_d
    np.multiply(g, x_hat, out=tmp)
    mean_gx = sum_last(tmp)  # (..., 1)
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
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"init_feed_forward_params: activation must be one of {ACTIVATIONS}, got {activation!r}"
        )
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
    count = 2 * d_model * d_ff + d_ff + d_model
    if activation == "swiglu":
        count += d_model * d_ff + d_ff
    return count


def feed_forward(x, params: dict, activation: str = "relu"):
    """Position-wise feed-forward network: act(x @ W_1 + b_1) @ W_2 + b_2.

    ``activation`` is "relu", "gelu" (tanh form) or "swiglu", for which the hidden layer is
    silu(x @ W_1 + b_1) * (x @ W_gate + b_gate) (Shazeer 2020).
    Shapes: x (..., d), W_1 and W_gate (d, d_ff), b_1 and b_gate (d_ff,), W_2 (d_ff, d),
    b_2 (d,). Returns (out (..., d), FeedForwardCache).

    The products run on (N, d) matrices, N = every leading axis flattened: one BLAS call
    instead of a loop over the batch, which NumPy's matmul does for (B, T, d) @ (d, d_ff).
    """
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"feed_forward: activation must be one of {ACTIVATIONS}, got {activation!r}"
        )
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
        hidden = pre * sigmoid(pre)  # silu
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
    x, pre, hidden, gate, params, activation = cache
    d, d_ff = params["W_1"].shape
    x2 = x.reshape(-1, d)  # (N, d)
    g2 = d_out.reshape(-1, d)  # (N, d)
    grads = {
        "W_2": hidden.reshape(-1, d_ff).T @ g2,  # (d_ff, d)
        "b_2": sum_rows(g2),  # (d,)
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
        grads["b_gate"] = sum_rows(d_gate.reshape(-1, d_ff))
    dp2 = d_pre.reshape(-1, d_ff)  # (N, d_ff)
    grads["W_1"] = x2.T @ dp2  # (d, d_ff)
    grads["b_1"] = sum_rows(dp2)  # (d_ff,)
    dx = dp2 @ params["W_1"].T  # (N, d)
    if activation == "swiglu":
        dx += d_gate.reshape(-1, d_ff) @ params["W_gate"].T
    return dx.reshape(x.shape), grads


# ------------------------------------------------------------------------- the attention sub-layer


class AttentionLayerCache(NamedTuple):
    """What the backward pass of one self-attention layer needs."""

    x: np.ndarray  # (B, T, d) the layer's input
    core: AttentionCache  # the attention core's cache: q, k (rotated with RoPE), v (B, h, T, d_h)
    merged: np.ndarray  # (B, T, d) the heads' outputs side by side (input of W_o)
    rope: np.ndarray | None  # (T,) the positions RoPE rotated q and k by, None without RoPE

    @property
    def weights(self) -> np.ndarray:
        """(B, h, T, T) the attention weights P."""
        return self.core.weights

    @property
    def q(self) -> np.ndarray:
        return self.core.Q

    @property
    def k(self) -> np.ndarray:
        return self.core.K

    @property
    def v(self) -> np.ndarray:
        return self.core.V

    @property
    def factor(self) -> float:
        return self.core.scale


@functools.lru_cache(maxsize=32)
def _alibi_bias(num_heads: int, T: int, S: int, dtype: np.dtype) -> np.ndarray:
    """(h, T, S) ALiBi's penalty -lambda_k |i - j| for the last T of S positions, in ``dtype``
    (read-only, reused)."""
    bias = alibi_bias(num_heads, T, S).astype(dtype)
    bias.flags.writeable = False
    return bias


def _alibi_bias_at(num_heads: int, position_ids, key_ids, dtype: np.dtype) -> np.ndarray:
    """(h, T, S) ALiBi's penalty -lambda_k |p_i - k_j| for queries at ``position_ids`` (T,)
    and keys at ``key_ids`` (S,) (a sliding window's slots hold them out of order)."""
    dist = np.abs(key_ids[None, :] - position_ids[:, None])  # (T, S)
    return (-alibi_slopes(num_heads)[:, None, None] * dist).astype(dtype)  # (h, T, S)


def _self_attention(
    x,
    W_qkv,
    b_qkv,
    W_o,
    b_o,
    num_heads,
    scale,
    mask,
    positions="learned",
    rope_scale=1.0,
    head_edit=None,
    kv_cache=None,
    layer=0,
    position_ids=None,
):
    """Causal multi-head self-attention of the decoder, on x (B, T, d); no input checks.

    One fused product gives Q | K | V (B T, 3d), cut into three (B, T, d) views; the heads of
    ``npformer.core.attention.multi_head`` split them, rotate the queries and keys with RoPE
    (position m by the angle of m * rope_scale), add ALiBi's bias, run the attention core (its
    causal fast path when ``mask`` is None, else ``mask``, True = may attend) and merge the
    heads; W_o projects them. Returns (out (B, T, d), cache).

    With a ``kv_cache`` (``npformer.core.kv_cache.KVCache``) the T rows are new positions after the
    ``kv_cache.length`` cached ones: their keys and values are written into the cache's slice
    of ``layer`` and the T queries attend to all S = length + T keys, the last T of them
    causally (the core's causal mask with an offset), so that a prefill and one token at a time
    give the logits of one pass over the whole sequence. ``position_ids`` (T,) are the
    positions RoPE and ALiBi give the queries and the new keys (default: length ...
    length + T - 1); the cached keys keep theirs under RoPE, and under ALiBi sit at their
    slots shifted by the same offset as the new rows, ``position_ids[0] - length``.

    ``head_edit(weights (B, h, T, S), v (B, h, T, d_h), heads (B, h, T, d_h))``, when given,
    returns the heads' outputs to merge instead of ``heads`` = weights @ v: the hook through
    which ``npformer.analysis.interventions`` ablates, replaces and patches heads. Forward only:
    under an edit the cache holds the heads' own weights but the edited outputs, a mixture no
    backward pass may use.
    """
    B, T, d = x.shape
    d_h = d // num_heads
    qkv = x.reshape(B * T, d) @ W_qkv  # (B T, 3d): one BLAS call, not one per sequence
    qkv += b_qkv
    q, k, v = qkv.reshape(B, T, 3, d).transpose(2, 0, 1, 3)  # 3 x (B, T, d) views
    start = 0 if kv_cache is None else kv_cache.length  # positions already cached
    S = start + T  # every key after this step
    rope = None
    if positions == "rope":  # the positions of the queries and the new keys
        rope = np.arange(start, start + T) if position_ids is None else position_ids  # (T,)
        if rope_scale != 1.0:
            rope = rope * rope_scale
    bias = None
    if positions == "alibi":
        if kv_cache is None:  # the T rows are the keys too
            keys = np.arange(S) if position_ids is None else position_ids  # (S,)
        else:  # cached keys in slot order, shifted as the new rows are
            keys = kv_cache.key_positions(T)  # (S,)
            if position_ids is not None:
                keys = keys + (position_ids[0] - start)
        if position_ids is None and len(keys) == S:  # keys in order, queries the last T
            bias = _alibi_bias(num_heads, T, S, x.dtype)  # (h, T, S)
        else:
            queries = np.arange(start, S) if position_ids is None else position_ids  # (T,)
            bias = _alibi_bias_at(num_heads, queries, keys, x.dtype)  # (h, T, len(keys))
    factor = 1.0 / math.sqrt(d_h) if scale else 1.0
    causal = mask is None  # the default mask: the core's causal fast path
    merged, heads = multi_head(
        q,
        k,
        v,
        num_heads,
        factor=factor,
        mask=mask,
        bias=bias,
        causal=causal,
        rope=rope,
        rotate=apply_rope,
        kv_cache=kv_cache,
        layer=layer,
        head_edit=head_edit,
    )  # (B, T, d)
    out = merged.reshape(B * T, d) @ W_o  # (B T, d)
    out += b_o
    return out.reshape(B, T, d), AttentionLayerCache(x, heads.core, merged, rope)


def _self_attention_backward(d_out, cache, W_qkv, W_o, grads, prefix):
    """Backward of ``_self_attention``: writes the four gradients into ``grads[prefix + ...]``.

    W_o's product rule, then ``multi_head_backward`` writing dQ, dK, dV straight into one
    (B, T, 3, d) buffer, so the fused projection's gradient is one product more.
    Returns dL/dx (B, T, d).
    """
    x, core, merged, rope = cache
    B, h, T, d_h = core.Q.shape
    d = h * d_h
    N = B * T
    g2 = d_out.reshape(N, d)  # (N, d)
    np.matmul(merged.reshape(N, d).T, g2, out=grads[prefix + "W_o"])  # (d, d)
    sum_rows(g2, out=grads[prefix + "b_o"])
    d_merged = g2 @ W_o.T  # (B T, d)
    d_qkv = np.empty((B, T, 3, d), dtype=x.dtype)
    dq, dk, dv = d_qkv.transpose(2, 0, 1, 3)  # 3 x (B, T, d) views
    heads = HeadsCache(core, h, rope, apply_rope)
    multi_head_backward(d_merged.reshape(B, T, d), heads, out=(dq, dk, dv))  # into d_qkv
    d_qkv = d_qkv.reshape(N, 3 * d)  # (N, 3d)
    np.matmul(x.reshape(N, d).T, d_qkv, out=grads[prefix + "W_qkv"])  # (d, 3d)
    sum_rows(d_qkv, out=grads[prefix + "b_qkv"])
    return (d_qkv @ W_qkv.T).reshape(B, T, d)  # (B, T, d)


# ----------------------------------------------------------------------------- the block


def param_name(layer: int, part: str = "") -> str:
    """The name of a parameter of block ``layer`` in the decoder's flat dict, made here only.

    ``param_name(1, "attn.W_o")`` is ``"block1.attn.W_o"``; without ``part`` it is the prefix
    ``"block1."`` that all the names of block 1 start with.
    """
    return f"block{layer}.{part}"


def block_parameter_shapes(config, layer: int) -> dict[str, tuple[int, ...]]:
    """Names and shapes of the parameters of block ``layer`` (12 d^2 + 13 d of them for ReLU).

    ``config`` is a ``npformer.core.config.DecoderConfig`` (its d_model, d_ff and activation).
    """
    d, d_ff, q = config.d_model, config.d_ff, param_name(layer)
    shapes = {
        q + "ln1.gamma": (d,),
        q + "ln1.beta": (d,),
        q + "attn.W_qkv": (d, 3 * d),
        q + "attn.b_qkv": (3 * d,),
        q + "attn.W_o": (d, d),
        q + "attn.b_o": (d,),
        q + "ln2.gamma": (d,),
        q + "ln2.beta": (d,),
        q + "ffn.W_1": (d, d_ff),
        q + "ffn.b_1": (d_ff,),
        q + "ffn.W_2": (d_ff, d),
        q + "ffn.b_2": (d,),
    }
    if config.activation == "swiglu":
        shapes[q + "ffn.W_gate"] = (d, d_ff)
        shapes[q + "ffn.b_gate"] = (d_ff,)
    return shapes


def block_num_params(config) -> int:
    """Closed form for one block: attention 4 d^2 + 4 d, two layer norms 4 d, the FFN.

    With ReLU or GELU and d_ff = 4 d this is 12 d^2 + 13 d.
    """
    d = config.d_model
    return 4 * d * d + 4 * d + 4 * d + feed_forward_num_params(d, config.d_ff, config.activation)


class BlockCache(NamedTuple):
    ln1: tuple
    attn: AttentionLayerCache
    ln2: tuple
    ffn: tuple


@functools.lru_cache(maxsize=64)
def _names(config, layer: int) -> tuple:
    q = param_name(layer)
    ffn = ["W_1", "b_1", "W_2", "b_2"] + (
        ["W_gate", "b_gate"] if config.activation == "swiglu" else []
    )
    return q, q + "attn.", tuple((n, q + "ffn." + n) for n in ffn)


def block_forward(x, params, config, layer, mask, head_edit=None, kv_cache=None, position_ids=None):
    """Block ``layer`` of the decoder on x (B, T, d): pre-LN x + f(LN(x)) or post-LN LN(x + f(x)),
    for f the self-attention then the FFN. ``params`` holds the decoder's flat names
    ("block0.attn.W_qkv", ...), ``config`` is its DecoderConfig; ``head_edit``, ``kv_cache``
    and ``position_ids`` as in ``_self_attention``. Returns (x2 (B, T, d), cache); x2 is a new
    array. No input checks: ``npformer.core.model``'s entry points check once per call.
    """
    q, a, ffn_names = _names(config, layer)
    ffn = {short: params[full] for short, full in ffn_names}
    attn_args = (params[a + "W_qkv"], params[a + "b_qkv"], params[a + "W_o"], params[a + "b_o"])
    eps, heads = config.ln_eps, (config.num_heads, config.scale)
    positions = (config.positions, config.rope_scale)
    hooks = dict(head_edit=head_edit, kv_cache=kv_cache, layer=layer, position_ids=position_ids)
    if config.ln == "pre":  # x + f(LN(x))
        h1, c_ln1 = layer_norm(x, params[q + "ln1.gamma"], params[q + "ln1.beta"], eps)
        x1, c_attn = _self_attention(h1, *attn_args, *heads, mask, *positions, **hooks)
        x1 += x
        h2, c_ln2 = layer_norm(x1, params[q + "ln2.gamma"], params[q + "ln2.beta"], eps)
        x2, c_ffn = feed_forward(h2, ffn, config.activation)
        x2 += x1
    else:  # LN(x + f(x))
        s1, c_attn = _self_attention(x, *attn_args, *heads, mask, *positions, **hooks)
        s1 += x
        x1, c_ln1 = layer_norm(s1, params[q + "ln1.gamma"], params[q + "ln1.beta"], eps)
        s2, c_ffn = feed_forward(x1, ffn, config.activation)
        s2 += x1
        x2, c_ln2 = layer_norm(s2, params[q + "ln2.gamma"], params[q + "ln2.beta"], eps)
    return x2, BlockCache(c_ln1, c_attn, c_ln2, c_ffn)


def _store_ln(grads, name, dgamma, dbeta):
    grads[name + ".gamma"][...] = dgamma
    grads[name + ".beta"][...] = dbeta


def block_backward(dx2, cache, params, config, layer, grads):
    """Backward of ``block_forward``: fills the block's entries of ``grads``, returns dL/dx."""
    q, a, ffn_names = _names(config, layer)
    c_ln1, c_attn, c_ln2, c_ffn = cache
    W_qkv, W_o = params[a + "W_qkv"], params[a + "W_o"]
    if config.ln == "pre":
        dh2, g_ffn = feed_forward_backward(dx2, c_ffn)  # x2 = x1 + f(LN2(x1))
        dx1, dgamma, dbeta = layer_norm_backward(dh2, c_ln2)
        _store_ln(grads, q + "ln2", dgamma, dbeta)
        dx1 += dx2
        dh1 = _self_attention_backward(dx1, c_attn, W_qkv, W_o, grads, a)  # x1 = x + att(LN1(x))
        dx, dgamma, dbeta = layer_norm_backward(dh1, c_ln1)
        _store_ln(grads, q + "ln1", dgamma, dbeta)
        dx += dx1
    else:
        ds2, dgamma, dbeta = layer_norm_backward(dx2, c_ln2)  # x2 = LN2(x1 + f(x1))
        _store_ln(grads, q + "ln2", dgamma, dbeta)
        dx1, g_ffn = feed_forward_backward(ds2, c_ffn)
        dx1 += ds2
        ds1, dgamma, dbeta = layer_norm_backward(dx1, c_ln1)  # x1 = LN1(x + att(x))
        _store_ln(grads, q + "ln1", dgamma, dbeta)
        dx = _self_attention_backward(ds1, c_attn, W_qkv, W_o, grads, a)
        dx += ds1
    for short, full in ffn_names:
        grads[full][...] = g_ffn[short]
    return dx


def final_norm(x, params, config):
    """The decoder's final layer norm LN_f on x (..., d), with params "ln_f.gamma", "ln_f.beta".

    No input checks: the decoder's entry points check once. Returns (out (..., d), cache).
    """
    return layer_norm(x, params["ln_f.gamma"], params["ln_f.beta"], config.ln_eps)


def final_norm_backward(d_out, cache, grads):
    """Backward of ``final_norm``: writes grads["ln_f.gamma"] and grads["ln_f.beta"], returns
    dL/dx (..., d)."""
    dx, dgamma, dbeta = layer_norm_backward(d_out, cache)
    _store_ln(grads, "ln_f", dgamma, dbeta)
    return dx
