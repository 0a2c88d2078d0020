"""The encoder-decoder Transformer of 2017: forward pass, parameter count, greedy generation.

Taught in chapter 07 (``chapters/07_encoder_decoder.ipynb``), which also trains it with the
backward pass of this module (``encoder_decoder_backward``). It reuses the pieces earlier
chapters teach: the masks (chapter 03, :mod:`npformer.core.masks`), multi-head attention (chapter
04, :mod:`npformer.core.multi_head`, whose heads all run through the attention core of
:mod:`npformer.core.attention`, forward and backward), sinusoidal positions (chapter 05,
:mod:`npformer.core.positions`), layer norm and the feed-forward network, forward and backward
(chapter 06, :mod:`npformer.core.block`). No attention is written in this module, forward or
backward: every multi-head layer goes back through
``npformer.core.multi_head.multi_head_attention_backward``.

The layers are post-LN as in the paper, ``LN(x + sublayer(x))``, with a ReLU feed-forward
network. Like ``torch.nn.Transformer``, each stack ends with one more layer norm
(``final_ln=True``); the paper's text does not mention it. One embedding matrix ``E``
(``tok_emb``, (vocab_size, d)) is shared by the source, the target and the output projection:
inputs are ``sqrt(d) E[token] + PE[position]``, logits are ``h @ E^T``.

Weight convention of the book: a linear layer is ``x @ W + b`` with ``W`` of shape (d_in, d_out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from npformer.core.block import (
    feed_forward,
    feed_forward_backward,
    layer_norm,
    layer_norm_backward,
)
from npformer.core.masks import causal_mask, key_padding_to_scores
from npformer.core.multi_head import (
    MultiHeadCache,
    init_multi_head_params,
    multi_head_attention,
    multi_head_attention_backward,
)
from npformer.core.positions import add_positions, sinusoidal_positions


@dataclass(frozen=True)
class EncoderDecoderConfig:
    """The sizes of an encoder-decoder Transformer.

    vocab_size: shared source/target vocabulary; d_model: width d; num_heads: h (d % h == 0);
    d_ff: hidden width of the feed-forward network; num_encoder_layers, num_decoder_layers:
    depth of each stack; final_ln: one extra layer norm at the end of each stack (as in
    torch.nn.Transformer); ln_eps: the layer norms' epsilon. Raises ValueError on a non-positive
    size, on d_model % num_heads != 0 and on an odd d_model (positions come in sin/cos pairs).
    """

    vocab_size: int
    d_model: int
    num_heads: int
    d_ff: int
    num_encoder_layers: int
    num_decoder_layers: int
    final_ln: bool = True
    ln_eps: float = 1e-5
    ln: str = "post"  # "post": LN(x + f(x)), as in 2017; "pre": x + f(LN(x))

    def __post_init__(self):
        sizes = (self.vocab_size, self.d_model, self.num_heads, self.d_ff)
        if (
            min(sizes + (self.num_encoder_layers, self.num_decoder_layers)) < 1
            or self.d_model % self.num_heads
            or self.d_model % 2
        ):
            raise ValueError(
                f"EncoderDecoderConfig: every size must be >= 1 and d_model an even multiple of "
                f"num_heads (sinusoidal positions fill (sin, cos) pairs), got {self}"
            )
        if self.ln not in ("pre", "post") or not self.ln_eps > 0:
            raise ValueError(
                f"EncoderDecoderConfig: ln must be 'pre' or 'post' and ln_eps > 0, got "
                f"ln={self.ln!r}, ln_eps={self.ln_eps!r}"
            )


#: The 2017 base model (Vaswani et al., Table 3): 6 + 6 layers, d = 512, 8 heads, d_ff = 2048,
#: a shared vocabulary of about 37,000 tokens, tied embeddings.
BASE_2017 = EncoderDecoderConfig(
    vocab_size=37_000,
    d_model=512,
    num_heads=8,
    d_ff=2048,
    num_encoder_layers=6,
    num_decoder_layers=6,
)


# ---------------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------------


def _norm_params(d: int, dtype) -> dict:
    return {"gamma": np.ones(d, dtype=dtype), "beta": np.zeros(d, dtype=dtype)}


def _ffn_params(d: int, d_ff: int, rng: np.random.Generator, dtype) -> dict:
    return {
        "W_1": (rng.standard_normal((d, d_ff)) / math.sqrt(d)).astype(dtype),
        "b_1": np.zeros(d_ff, dtype=dtype),
        "W_2": (rng.standard_normal((d_ff, d)) / math.sqrt(d_ff)).astype(dtype),
        "b_2": np.zeros(d, dtype=dtype),
    }


def init_encoder_decoder_params(
    config: EncoderDecoderConfig, rng: np.random.Generator, dtype=np.float64
) -> dict:
    """Random parameters of an encoder-decoder Transformer, as a nested dict of arrays.

    ``tok_emb`` (vocab_size, d) with entries N(0, 1/d), so that sqrt(d) E[token] has unit
    variance; ``encoder``: a list of layers {"self_attn", "ln1", "ffn", "ln2"}; ``decoder``: a
    list of layers {"self_attn", "ln1", "cross_attn", "ln2", "ffn", "ln3"}; ``encoder_ln_f``
    and ``decoder_ln_f``, each stack's final norm (the decoder-only model's ``ln_f``), when
    ``config.final_ln``. Attention blocks hold W_q, W_k, W_v, W_o (d, d) and b_q .. b_o (d,);
    feed-forward blocks W_1 (d, d_ff), b_1, W_2 (d_ff, d), b_2; norms gamma, beta (d,). Biases
    start at 0, gammas at 1.

    Returns the dict.
    """
    d, d_ff = config.d_model, config.d_ff
    params = {
        "tok_emb": (rng.standard_normal((config.vocab_size, d)) / math.sqrt(d)).astype(dtype),
        "encoder": [
            {
                "self_attn": init_multi_head_params(d, rng, dtype),
                "ln1": _norm_params(d, dtype),
                "ffn": _ffn_params(d, d_ff, rng, dtype),
                "ln2": _norm_params(d, dtype),
            }
            for _ in range(config.num_encoder_layers)
        ],
        "decoder": [
            {
                "self_attn": init_multi_head_params(d, rng, dtype),
                "ln1": _norm_params(d, dtype),
                "cross_attn": init_multi_head_params(d, rng, dtype),
                "ln2": _norm_params(d, dtype),
                "ffn": _ffn_params(d, d_ff, rng, dtype),
                "ln3": _norm_params(d, dtype),
            }
            for _ in range(config.num_decoder_layers)
        ],
    }
    if config.final_ln:
        params["encoder_ln_f"] = _norm_params(d, dtype)
        params["decoder_ln_f"] = _norm_params(d, dtype)
    return params


def named_parameters(params) -> list[tuple[str, np.ndarray]]:
    """Every array of a nested parameter dict, with a dotted name: ``decoder.0.cross_attn.W_q``.

    Walks dicts in insertion order and lists by index. Returns a list of (name, array); the
    arrays are the dict's own (not copies), so updating them in place updates the model.
    """
    out = []

    def walk(prefix: str, node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(f"{prefix}.{key}" if prefix else str(key), value)
        elif isinstance(node, (list, tuple)):
            for i, value in enumerate(node):
                walk(f"{prefix}.{i}" if prefix else str(i), value)
        else:
            out.append((prefix, node))

    walk("", params)
    return out


def count_parameters(params) -> int:
    """The number of scalars in a nested parameter dict: sum of ``p.size`` over its arrays."""
    return sum(int(np.asarray(p).size) for _, p in named_parameters(params))


def parameter_count(config: EncoderDecoderConfig) -> dict[str, int]:
    """The parameter count of ``config`` in closed form, by part, without building the model.

    With d = d_model: one attention layer 4 d^2 + 4 d, one feed-forward network
    2 d d_ff + d_ff + d, one layer norm 2 d; an encoder layer = attention + FFN + 2 norms
    (12 d^2 + 13 d when d_ff = 4 d), a decoder layer = 2 attentions + FFN + 3 norms
    (16 d^2 + 19 d); the tied embedding vocab_size d is counted once; 2 x 2 d for the final
    norms when ``config.final_ln``.

    Returns a dict with "tok_emb", "encoder_layer", "decoder_layer", "encoder", "decoder",
    "final_ln" (encoder_ln_f and decoder_ln_f together) and "total" (every entry an int).
    """
    d, d_ff = config.d_model, config.d_ff
    attention = 4 * d * d + 4 * d
    ffn = 2 * d * d_ff + d_ff + d
    norm = 2 * d
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    counts = {
        "tok_emb": config.vocab_size * d,
        "encoder_layer": encoder_layer,
        "decoder_layer": decoder_layer,
        "encoder": config.num_encoder_layers * encoder_layer,
        "decoder": config.num_decoder_layers * decoder_layer,
        "final_ln": 2 * norm if config.final_ln else 0,
    }
    counts["total"] = counts["tok_emb"] + counts["encoder"] + counts["decoder"] + counts["final_ln"]
    return counts


# ---------------------------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------------------------


def _check_tokens(fn: str, name: str, tokens, vocab_size: int) -> np.ndarray:
    """Ids outside [0, vocab_size) would index the embedding silently (negative ones wrap)."""
    tokens = np.asarray(tokens)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(
            f"{fn}: {name} of shape {tokens.shape} holds ids in [{tokens.min()}, "
            f"{tokens.max()}], outside the vocabulary [0, {vocab_size - 1}]"
        )
    return tokens


def _check_src_pad(fn: str, src_pad, src_shape: tuple[int, int]):
    """A (B, S) bool mask of real tokens, each row with at least one (else nothing to read)."""
    if src_pad is None:
        return None
    src_pad = np.asarray(src_pad)
    if src_pad.dtype != np.bool_ or src_pad.shape != src_shape or not src_pad.any(axis=1).all():
        raise ValueError(
            f"{fn}: src_pad must be a bool (B, S) mask of real source tokens of the source's "
            f"shape {src_shape}, at least one True per row, got {src_pad.dtype} {src_pad.shape}"
        )
    return src_pad


# ---------------------------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------------------------


def embed(tokens, embedding) -> np.ndarray:
    """Token embeddings scaled by sqrt(d), plus sinusoidal positions: sqrt(d) E[x_t] + PE[t].

    Shapes: tokens (B, T) integer ids in [0, vocab_size), embedding (vocab_size, d).
    Returns (B, T, d) in the embedding's dtype. The sum itself is
    :func:`npformer.core.positions.add_positions` (chapter 05) with ``scale_embeddings=True``.
    """
    embedding = np.asarray(embedding)
    vocab_size, d = embedding.shape
    tokens = _check_tokens("embed", "tokens", tokens, vocab_size)
    positions = sinusoidal_positions(tokens.shape[1], d)  # (T, d)
    return add_positions(embedding[tokens], positions, scale_embeddings=True)  # (B, T, d)


class EncoderLayerCache(NamedTuple):
    """What one encoder layer computed, for inspection and for ``encoder_layer_backward``."""

    self_attn: MultiHeadCache  # .attention.weights is (B, h, S, S)
    after_attn: np.ndarray  # (B, S, d) LN(x + SelfAttn(x))
    ln1: object  # LayerNormCache of LN(x + SelfAttn(x))
    ffn: object  # FeedForwardCache
    ln2: object  # LayerNormCache of LN(h + FFN(h))
    ln: str = "post"  # "pre": the norms read x and h, and h = x + SelfAttn(LN(x))


class DecoderLayerCache(NamedTuple):
    """What one decoder layer computed, for inspection and for ``decoder_layer_backward``."""

    self_attn: MultiHeadCache  # .attention.weights is (B, h, T, T)
    cross_attn: MultiHeadCache  # .attention.weights is (B, h, T, S)
    after_self_attn: np.ndarray  # (B, T, d)
    after_cross_attn: np.ndarray  # (B, T, d)
    ln1: object  # LayerNormCache
    ln2: object  # LayerNormCache
    ffn: object  # FeedForwardCache
    ln3: object  # LayerNormCache
    ln: str = "post"  # "pre": each norm reads the stream before its sublayer


def encoder_layer(x, layer, num_heads: int, mask=None, eps: float = 1e-5, ln: str = "post"):
    """One post-LN encoder layer: h = LN(x + SelfAttn(x)), out = LN(h + FFN(h)).

    Shapes: x (B, S, d); ``layer`` as in :func:`init_encoder_decoder_params`; ``mask`` is
    boolean (True = may attend) and broadcasts to (B, h, S, S): the source key padding
    (B, 1, 1, S). Returns (out (B, S, d), EncoderLayerCache).
    """
    n1, n2 = layer["ln1"], layer["ln2"]
    if ln == "pre":  # h = x + SelfAttn(LN_1(x)), out = h + FFN(LN_2(h))
        u, n1_cache = layer_norm(x, n1["gamma"], n1["beta"], eps)  # (B, S, d)
        a, attn_cache = multi_head_attention(u, u, layer["self_attn"], num_heads, mask=mask)
        h = x + a  # (B, S, d)
        u, n2_cache = layer_norm(h, n2["gamma"], n2["beta"], eps)  # (B, S, d)
        f, ffn_cache = feed_forward(u, layer["ffn"], activation="relu")  # (B, S, d)
        return h + f, EncoderLayerCache(attn_cache, h, n1_cache, ffn_cache, n2_cache, "pre")
    a, attn_cache = multi_head_attention(x, x, layer["self_attn"], num_heads, mask=mask)
    h, n1_cache = layer_norm(x + a, n1["gamma"], n1["beta"], eps)  # (B, S, d)
    f, ffn_cache = feed_forward(h, layer["ffn"], activation="relu")  # (B, S, d)
    out, n2_cache = layer_norm(h + f, n2["gamma"], n2["beta"], eps)  # (B, S, d)
    return out, EncoderLayerCache(attn_cache, h, n1_cache, ffn_cache, n2_cache)


def decoder_layer(
    y,
    memory,
    layer,
    num_heads: int,
    self_mask=None,
    memory_mask=None,
    eps: float = 1e-5,
    ln: str = "post",
):
    """One post-LN decoder layer: masked self-attention, cross-attention, FFN.

    h1 = LN(y + SelfAttn(y; causal)), h2 = LN(h1 + CrossAttn(queries h1; keys and values
    memory)), out = LN(h2 + FFN(h2)).

    Shapes: y (B, T, d), memory (B, S, d) the encoder's output; ``self_mask`` broadcasts to
    (B, h, T, T) (the causal (T, T) mask), ``memory_mask`` to (B, h, T, S) (the source key
    padding (B, 1, 1, S)). Returns (out (B, T, d), DecoderLayerCache).
    """
    n1, n2, n3 = layer["ln1"], layer["ln2"], layer["ln3"]
    if ln == "pre":  # each sublayer reads LN(stream) and adds to the stream
        u, n1_cache = layer_norm(y, n1["gamma"], n1["beta"], eps)  # (B, T, d)
        a, self_cache = multi_head_attention(u, u, layer["self_attn"], num_heads, mask=self_mask)
        h1 = y + a  # (B, T, d)
        u, n2_cache = layer_norm(h1, n2["gamma"], n2["beta"], eps)  # (B, T, d)
        c, cross_cache = multi_head_attention(  # (B, T, d)
            u, memory, layer["cross_attn"], num_heads, mask=memory_mask
        )
        h2 = h1 + c  # (B, T, d)
        u, n3_cache = layer_norm(h2, n3["gamma"], n3["beta"], eps)  # (B, T, d)
        f, ffn_cache = feed_forward(u, layer["ffn"], activation="relu")  # (B, T, d)
        return h2 + f, DecoderLayerCache(
            self_cache, cross_cache, h1, h2, n1_cache, n2_cache, ffn_cache, n3_cache, "pre"
        )
    a, self_cache = multi_head_attention(y, y, layer["self_attn"], num_heads, mask=self_mask)
    h1, n1_cache = layer_norm(y + a, n1["gamma"], n1["beta"], eps)  # (B, T, d)
    c, cross_cache = multi_head_attention(  # (B, T, d)
        h1, memory, layer["cross_attn"], num_heads, mask=memory_mask
    )
    h2, n2_cache = layer_norm(h1 + c, n2["gamma"], n2["beta"], eps)  # (B, T, d)
    f, ffn_cache = feed_forward(h2, layer["ffn"], activation="relu")  # (B, T, d)
    out, n3_cache = layer_norm(h2 + f, n3["gamma"], n3["beta"], eps)  # (B, T, d)
    return out, DecoderLayerCache(
        self_cache, cross_cache, h1, h2, n1_cache, n2_cache, ffn_cache, n3_cache
    )


def encode(src_tokens, params, config: EncoderDecoderConfig, src_pad=None):
    """The encoder stack: memory = [LN_final](layer_N(... layer_1(embed(src)))).

    Shapes: src_tokens (B, S) ids; src_pad (B, S) bool, True = real token (None: no padding).
    Rows of ``memory`` at padded positions are computed but never read by the decoder.
    Returns (memory (B, S, d), caches): one EncoderLayerCache per layer, then, with
    ``config.final_ln``, the final norm's LayerNormCache.
    """
    src_tokens = np.asarray(src_tokens)  # embed checks the ids
    src_pad = _check_src_pad("encode", src_pad, src_tokens.shape)
    mask = None if src_pad is None else key_padding_to_scores(src_pad)  # (B, 1, 1, S)
    x = embed(src_tokens, params["tok_emb"])  # (B, S, d)
    caches = []
    for layer in params["encoder"]:
        x, cache = encoder_layer(x, layer, config.num_heads, mask, config.ln_eps, config.ln)
        caches.append(cache)
    if config.final_ln:
        norm = params["encoder_ln_f"]
        x, norm_cache = layer_norm(x, norm["gamma"], norm["beta"], config.ln_eps)
        caches.append(norm_cache)
    return x, caches


def decode(tgt_tokens, memory, params, config: EncoderDecoderConfig, src_pad=None):
    """The decoder stack on target tokens, reading the encoder's ``memory``.

    Shapes: tgt_tokens (B, T) ids (the target shifted right: it starts with the start token);
    memory (B, S, d); src_pad (B, S) bool, True = real source token. Self-attention is causal;
    cross-attention ignores padded source positions. Right-padded targets need no mask of their
    own: the causal mask already hides every later position from each query.
    Returns (hidden (B, T, d), caches): one DecoderLayerCache per layer, then, with
    ``config.final_ln``, the final norm's LayerNormCache.
    """
    tgt_tokens, memory = np.asarray(tgt_tokens), np.asarray(memory)  # embed checks the ids
    T = tgt_tokens.shape[1]
    src_pad = _check_src_pad("decode", src_pad, memory.shape[:2])
    self_mask = causal_mask(T)  # (T, T)
    memory_mask = None if src_pad is None else key_padding_to_scores(src_pad)  # (B, 1, 1, S)
    y = embed(tgt_tokens, params["tok_emb"])  # (B, T, d)
    caches = []
    for layer in params["decoder"]:
        y, cache = decoder_layer(
            y, memory, layer, config.num_heads, self_mask, memory_mask, config.ln_eps, config.ln
        )
        caches.append(cache)
    if config.final_ln:
        norm = params["decoder_ln_f"]
        y, norm_cache = layer_norm(y, norm["gamma"], norm["beta"], config.ln_eps)
        caches.append(norm_cache)
    return y, caches


class EncoderDecoderCache(NamedTuple):
    """Intermediate results of :func:`encoder_decoder_forward`, for inspection and backward."""

    memory: np.ndarray  # (B, S, d) the encoder's output
    hidden: np.ndarray  # (B, T, d) the decoder's output, before the projection
    encoder: list  # one EncoderLayerCache per encoder layer
    decoder: list  # one DecoderLayerCache per decoder layer
    src_tokens: np.ndarray | None = None  # (B, S)
    tgt_tokens: np.ndarray | None = None  # (B, T)
    encoder_ln_f: object = None  # LayerNormCache of the encoder's final norm (or None)
    decoder_ln_f: object = None  # LayerNormCache of the decoder's final norm (or None)


def encoder_decoder_forward(
    src_tokens, tgt_tokens, params, config: EncoderDecoderConfig, src_pad=None
):
    """Logits of the next target token at every target position (teacher forcing).

    logits = decode(tgt, encode(src)) @ E^T with the tied embedding E (no bias): position t
    scores the token that follows tgt[:, :t + 1].

    Shapes: src_tokens (B, S), tgt_tokens (B, T) integer ids; src_pad (B, S) bool, True = real
    source token. Returns (logits (B, T, vocab_size), EncoderDecoderCache); the cache is what
    :func:`encoder_decoder_backward` needs.
    """
    memory, enc_caches = encode(src_tokens, params, config, src_pad)  # (B, S, d)
    hidden, dec_caches = decode(tgt_tokens, memory, params, config, src_pad)  # (B, T, d)
    # the final norms' caches, if any, come last: kept apart from the layers' for the backward
    enc_norm = enc_caches.pop() if config.final_ln else None
    dec_norm = dec_caches.pop() if config.final_ln else None
    logits = hidden @ params["tok_emb"].T  # (B, T, vocab_size)
    cache = EncoderDecoderCache(
        memory,
        hidden,
        enc_caches,
        dec_caches,
        np.asarray(src_tokens),
        np.asarray(tgt_tokens),
        enc_norm,
        dec_norm,
    )
    return logits, cache


# ---------------------------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------------------------


def _ffn_backward(d_out, cache):
    """``feed_forward_backward``, its gradients in the order of the parameters."""
    dx, grads = feed_forward_backward(d_out, cache)
    return dx, {n: grads[n] for n in ("W_1", "b_1", "W_2", "b_2")}


def _norm_grads(dgamma, dbeta) -> dict:
    return {"gamma": dgamma, "beta": dbeta}


def encoder_layer_backward(d_out, cache: EncoderLayerCache, layer: dict):
    """Backward of :func:`encoder_layer`.

    Through out = LN_2(h + FFN(h)) and h = LN_1(x + SelfAttn(x)), in reverse: each layer norm
    and the FFN with the backward functions of :mod:`npformer.core.block`, the attention with the
    attention core's backward; each residual adds its two paths.
    Shapes: d_out (B, S, d). Returns (dx (B, S, d), grads: a dict shaped like ``layer``).
    """
    if cache.ln == "pre":  # out = h + FFN(LN_2(h)), h = x + SelfAttn(LN_1(x))
        d_u, ffn_grads = _ffn_backward(d_out, cache.ffn)
        d_h, dg2, db2 = layer_norm_backward(d_u, cache.ln2)
        d_h = d_h + d_out  # the residual path
        du_q, du_kv, attn_grads = multi_head_attention_backward(
            d_h, cache.self_attn, layer["self_attn"]
        )
        dx, dg1, db1 = layer_norm_backward(du_q + du_kv, cache.ln1)
        dx = dx + d_h
    else:
        dx, dg1, db1, dg2, db2, attn_grads, ffn_grads = _post_encoder_backward(d_out, cache, layer)
    grads = {
        "self_attn": attn_grads,
        "ln1": _norm_grads(dg1, db1),
        "ffn": ffn_grads,
        "ln2": _norm_grads(dg2, db2),
    }
    return dx, grads


def _post_encoder_backward(d_out, cache: EncoderLayerCache, layer: dict):
    d_sum2, dg2, db2 = layer_norm_backward(d_out, cache.ln2)  # d(h + f)
    d_h, ffn_grads = _ffn_backward(d_sum2, cache.ffn)
    d_h = d_h + d_sum2  # the residual path
    d_sum1, dg1, db1 = layer_norm_backward(d_h, cache.ln1)  # d(x + a)
    dx_q, dx_kv, attn_grads = multi_head_attention_backward(
        d_sum1, cache.self_attn, layer["self_attn"]
    )
    dx = d_sum1 + dx_q + dx_kv  # residual, queries, keys and values all read x
    return dx, dg1, db1, dg2, db2, attn_grads, ffn_grads


def decoder_layer_backward(d_out, cache: DecoderLayerCache, layer: dict):
    """Backward of :func:`decoder_layer`.

    Through the FFN, the cross-attention and the masked self-attention in reverse order. The
    cross-attention's queries come from the decoder stream, its keys and values from the
    memory, so it returns a gradient for each: ``d_memory`` is this layer's share of the
    gradient of the encoder's output (every decoder layer adds its own).
    Shapes: d_out (B, T, d). Returns (dy (B, T, d), d_memory (B, S, d), grads shaped like
    ``layer``).
    """
    if cache.ln == "pre":
        d_u, ffn_grads = _ffn_backward(d_out, cache.ffn)
        d_h2, dg3, db3 = layer_norm_backward(d_u, cache.ln3)
        d_h2 = d_h2 + d_out  # out = h2 + FFN(LN_3(h2))
        d_u, d_memory, cross_grads = multi_head_attention_backward(
            d_h2, cache.cross_attn, layer["cross_attn"]
        )
        d_h1, dg2, db2 = layer_norm_backward(d_u, cache.ln2)
        d_h1 = d_h1 + d_h2  # h2 = h1 + CrossAttn(LN_2(h1), memory)
        du_q, du_kv, self_grads = multi_head_attention_backward(
            d_h1, cache.self_attn, layer["self_attn"]
        )
        dy, dg1, db1 = layer_norm_backward(du_q + du_kv, cache.ln1)
        dy = dy + d_h1  # h1 = y + SelfAttn(LN_1(y))
    else:
        d_sum3, dg3, db3 = layer_norm_backward(d_out, cache.ln3)  # d(h2 + f)
        d_h2, ffn_grads = _ffn_backward(d_sum3, cache.ffn)
        d_h2 = d_h2 + d_sum3
        d_sum2, dg2, db2 = layer_norm_backward(d_h2, cache.ln2)  # d(h1 + c)
        dq, d_memory, cross_grads = multi_head_attention_backward(
            d_sum2, cache.cross_attn, layer["cross_attn"]
        )
        d_h1 = d_sum2 + dq
        d_sum1, dg1, db1 = layer_norm_backward(d_h1, cache.ln1)  # d(y + a)
        dy_q, dy_kv, self_grads = multi_head_attention_backward(
            d_sum1, cache.self_attn, layer["self_attn"]
        )
        dy = d_sum1 + dy_q + dy_kv
    grads = {
        "self_attn": self_grads,
        "ln1": _norm_grads(dg1, db1),
        "cross_attn": cross_grads,
        "ln2": _norm_grads(dg2, db2),
        "ffn": ffn_grads,
        "ln3": _norm_grads(dg3, db3),
    }
    return dy, d_memory, grads


def _embedding_backward(dE: np.ndarray, tokens: np.ndarray, d_stream: np.ndarray) -> None:
    """Add the gradient of sqrt(d) E[tokens] to ``dE``: a repeated token adds up."""
    d = dE.shape[1]
    np.add.at(dE, tokens.reshape(-1), math.sqrt(d) * d_stream.reshape(-1, d))


def encoder_decoder_backward(d_logits, cache: EncoderDecoderCache, params, config):
    """Gradients of every parameter of :func:`encoder_decoder_forward`, given dL/dlogits.

    The chain rule in reverse: the tied projection (logits = G E^T gives dE = dlogits^T G and
    dG = dlogits E), the decoder's final norm and layers (each adding its share of d_memory),
    the encoder's final norm and layers, and the two embeddings. The one matrix E collects three
    contributions: the output projection, the target embedding and the source embedding, the
    last two accumulated row by row for every occurrence of a token. The positions are a fixed
    formula and get no gradient.

    Shapes: d_logits (B, T, vocab_size). Returns a nested dict shaped like ``params`` (use
    :func:`named_parameters` to flatten both for an optimizer).
    """
    B, T, d = cache.hidden.shape
    E = params["tok_emb"]  # (vocab_size, d)
    g2 = d_logits.reshape(-1, config.vocab_size)  # (B T, vocab_size)
    dE = g2.T @ cache.hidden.reshape(-1, d)  # (vocab_size, d) the output projection's share
    grads: dict = {"tok_emb": dE}
    dy = d_logits @ E  # (B, T, d)
    if config.final_ln:
        dy, dg, db = layer_norm_backward(dy, cache.decoder_ln_f)
        dec_norm = _norm_grads(dg, db)
    d_memory = np.zeros_like(cache.memory)  # (B, S, d)
    dec_grads = [None] * len(params["decoder"])
    for i in reversed(range(len(params["decoder"]))):
        dy, dm, dec_grads[i] = decoder_layer_backward(dy, cache.decoder[i], params["decoder"][i])
        d_memory += dm
    _embedding_backward(dE, cache.tgt_tokens, dy)
    dx = d_memory
    if config.final_ln:
        dx, dg, db = layer_norm_backward(dx, cache.encoder_ln_f)
        enc_norm = _norm_grads(dg, db)
    enc_grads = [None] * len(params["encoder"])
    for i in reversed(range(len(params["encoder"]))):
        dx, enc_grads[i] = encoder_layer_backward(dx, cache.encoder[i], params["encoder"][i])
    _embedding_backward(dE, cache.src_tokens, dx)
    grads["encoder"] = enc_grads
    grads["decoder"] = dec_grads
    if config.final_ln:
        grads["encoder_ln_f"] = enc_norm
        grads["decoder_ln_f"] = dec_norm
    return grads


class Generation(NamedTuple):
    """The output of :func:`greedy_generate`."""

    tokens: np.ndarray  # (B, 1 + num_steps) the start token, then the chosen tokens
    logits: np.ndarray  # (B, num_steps, vocab_size) the scores each choice came from


def greedy_generate(
    src_tokens, params, config: EncoderDecoderConfig, start_token: int, num_steps: int, src_pad=None
) -> Generation:
    """Generate ``num_steps`` tokens greedily: pick the arg max, feed its embedding back.

    The source is encoded once. At step t the decoder runs on the prefix of t + 1 tokens (no
    KV cache: chapter 09 adds one), the last position's logits pick the next token, and that
    token id is appended, so that its embedding is the next step's newest input.

    Shapes: src_tokens (B, S), src_pad (B, S) bool or None. Returns a Generation with
    tokens (B, 1 + num_steps) and logits (B, num_steps, vocab_size).
    """
    if not 0 <= start_token < config.vocab_size or num_steps < 1:
        raise ValueError(
            f"greedy_generate: start_token={start_token} must lie in the vocabulary "
            f"[0, {config.vocab_size - 1}] and num_steps={num_steps} be >= 1"
        )
    src_tokens = np.asarray(src_tokens)
    memory, _ = encode(src_tokens, params, config, src_pad)  # (B, S, d)
    B = src_tokens.shape[0]
    tokens = np.full((B, 1), start_token, dtype=np.int64)  # (B, 1)
    step_logits = []
    for _ in range(num_steps):
        hidden, _ = decode(tokens, memory, params, config, src_pad)  # (B, t + 1, d)
        logits = hidden[:, -1] @ params["tok_emb"].T  # (B, vocab_size)
        step_logits.append(logits)
        chosen = logits.argmax(axis=-1)  # (B,)
        tokens = np.concatenate([tokens, chosen[:, None]], axis=1)  # (B, t + 2)
    return Generation(tokens, np.stack(step_logits, axis=1))  # (B, n, vocab_size)
