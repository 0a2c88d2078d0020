"""The key-value cache and grouped-query attention, for generating one position at a time.

Taught in chapter 09 (``chapters/09_kv_cache.ipynb``).

When a causal model generates, the keys and values of the positions it has already seen never
change: only the newest query is new. A KV cache keeps them, preallocated and written in place,
so that each step projects one row instead of the whole prefix. Grouped-query attention lets
``num_heads / num_kv_heads`` query heads share one key-value head, which shrinks that cache by
the same factor (``num_kv_heads = num_heads`` is multi-head attention, ``num_kv_heads = 1`` is
multi-query attention).

The chapter first caches a toy model, a stack of attention-only layers (no feed-forward, no
vocabulary): layer l maps X to X + grouped_query_attention(X) with its own W_q, W_k, W_v,
W_o; the output at the last position, rescaled to norm sqrt(d), is the next input vector.

The chapter then caches the trained decoder of ``npformer.model`` (chapter 10's model):
:func:`decoder_forward_with_cache` runs n new tokens at positions ``cache.length ...`` through
its blocks, and :func:`generate_greedy_with_cache` decodes greedily with it, token for token
what ``npformer.train.generate`` produces without a cache.

Weight convention of the book: a linear layer is ``x @ W`` with ``W`` of shape (d_in, d_out);
the toy model has no biases.
"""

from __future__ import annotations

import math

import numpy as np

from npformer.attention import scaled_dot_product_attention
from npformer.block import feed_forward, layer_norm
from npformer.masks import causal_mask
from npformer.validation import divisible, float_array, int_at_least


def _check_heads(func: str, d_model: int, num_heads: int, num_kv_heads: int) -> tuple[int, int]:
    """Check d % h == 0 and 1 <= g <= h with h % g == 0; return (d_h, h / g)."""
    num_heads = int_at_least(func, "num_heads", num_heads)
    num_kv_heads = int_at_least(func, "num_kv_heads", num_kv_heads)
    divisible(func, d_model, num_heads)
    if num_kv_heads > num_heads or num_heads % num_kv_heads != 0:
        raise ValueError(
            f"{func}: num_kv_heads={num_kv_heads} must divide num_heads={num_heads} "
            f"(1 <= groups <= h, each group the same size)"
        )
    return d_model // num_heads, num_heads // num_kv_heads


def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    d_head: int,
    seq_len: int,
    batch: int = 1,
    bytes_per_value: int = 8,
) -> int:
    """Bytes of a KV cache: 2 x layers x kv_heads x d_head x T x batch x bytes per value.

    The 2 counts K and V; every layer has its own projections, hence its own cache; each of the
    ``num_kv_heads`` key-value heads keeps ``d_head`` numbers per position, for ``seq_len``
    positions and ``batch`` sequences. Queries, attention weights and activations are not kept.

    Returns an exact int (divide by 2**20 for MiB, 2**30 for GiB).
    """
    fn = "kv_cache_bytes"
    sizes = {
        "num_layers": num_layers,
        "num_kv_heads": num_kv_heads,
        "d_head": d_head,
        "seq_len": seq_len,
        "batch": batch,
        "bytes_per_value": bytes_per_value,
    }
    total = 2
    for name, value in sizes.items():
        total *= int_at_least(fn, name, value)
    return total


class KVCache:
    """Keys and values of every layer, preallocated for ``max_len`` positions, written in place.

    ``K`` and ``V`` have shape (num_layers, B, g, max_len, d_h) with g = num_kv_heads; the first
    ``length`` positions are filled. A forward pass over n new rows calls :meth:`write` once per
    layer (each writes positions length ... length + n - 1 and returns views of everything
    cached so far), then :meth:`advance` once. Nothing is ever copied or reallocated.
    """

    def __init__(
        self,
        num_layers: int,
        batch: int,
        num_kv_heads: int,
        max_len: int,
        d_head: int,
        dtype=np.float64,
    ):
        fn = "KVCache"
        shape = tuple(
            int_at_least(fn, name, value)
            for name, value in [
                ("num_layers", num_layers),
                ("batch", batch),
                ("num_kv_heads", num_kv_heads),
                ("max_len", max_len),
                ("d_head", d_head),
            ]
        )
        if not np.issubdtype(np.dtype(dtype), np.floating):
            raise ValueError(f"{fn}: dtype must be floating, got {np.dtype(dtype)}")
        self.K = np.zeros(shape, dtype=dtype)  # (L, B, g, max_len, d_h)
        self.V = np.zeros(shape, dtype=dtype)  # (L, B, g, max_len, d_h)
        self.length = 0

    @property
    def max_len(self) -> int:
        return self.K.shape[3]

    @property
    def nbytes(self) -> int:
        """Bytes the cache holds: K.nbytes + V.nbytes (allocated for all max_len positions)."""
        return self.K.nbytes + self.V.nbytes

    def write(self, layer: int, K_new: np.ndarray, V_new: np.ndarray):
        """Store the n new rows of ``layer`` at positions length ... length + n - 1, in place.

        Shapes: K_new, V_new (B, g, n, d_h). Returns views (K, V) of shape (B, g, length + n,
        d_h): every key and value of this layer up to and including the new rows.
        """
        fn = "KVCache.write"
        L, B, g, max_len, d_h = self.K.shape
        if not 0 <= layer < L:
            raise ValueError(f"{fn}: layer {layer} is out of range for a cache of {L} layers")
        n = K_new.shape[2] if K_new.ndim == 4 else -1
        for name, new in (("K_new", K_new), ("V_new", V_new)):
            if new.ndim != 4 or new.shape != (B, g, n, d_h):
                raise ValueError(
                    f"{fn}: {name} has shape {new.shape}, expected (B, g, n, d_h) = "
                    f"({B}, {g}, n, {d_h}) with the same n for K_new {K_new.shape} and "
                    f"V_new {V_new.shape}"
                )
            if new.dtype != self.K.dtype:
                raise ValueError(
                    f"{fn}: {name} has dtype {new.dtype} and shape {new.shape}, the cache holds "
                    f"{self.K.dtype}"
                )
        end = self.length + n
        if end > max_len:
            raise ValueError(
                f"{fn}: {n} new positions after {self.length} exceed the cache's max_len "
                f"{max_len} (K_new shape {K_new.shape}, cache shape {self.K.shape})"
            )
        self.K[layer, :, :, self.length : end] = K_new  # in place, no copy of the past
        self.V[layer, :, :, self.length : end] = V_new
        return self.K[layer, :, :, :end], self.V[layer, :, :, :end]  # (B, g, end, d_h) views

    def advance(self, n: int) -> None:
        """Mark ``n`` more positions as filled (after every layer has written them)."""
        n = int_at_least("KVCache.advance", "n", n)
        if self.length + n > self.max_len:
            raise ValueError(
                f"KVCache.advance: length {self.length} + {n} exceeds max_len {self.max_len}"
            )
        self.length += n


def init_attention_only_model(
    num_layers: int,
    d_model: int,
    num_heads: int,
    num_kv_heads: int,
    rng: np.random.Generator,
    dtype=np.float64,
) -> list[dict]:
    """Random weights of the toy attention-only model: one dict per layer, no biases.

    W_q (d, d), W_k (d, g d_h), W_v (d, g d_h), W_o (d, d) with g = num_kv_heads, d_h = d / h,
    entries N(0, 1/d) so that x @ W keeps the scale of x. ``num_kv_heads = num_heads`` gives
    the multi-head model.

    Returns a list of ``num_layers`` dicts name -> array of ``dtype``.
    """
    fn = "init_attention_only_model"
    num_layers = int_at_least(fn, "num_layers", num_layers)
    d_model = int_at_least(fn, "d_model", d_model)
    d_h, _ = _check_heads(fn, d_model, num_heads, num_kv_heads)
    if not np.issubdtype(np.dtype(dtype), np.floating):
        raise ValueError(f"{fn}: dtype must be floating, got {np.dtype(dtype)}")
    d_kv = num_kv_heads * d_h
    std = 1.0 / math.sqrt(d_model)
    shapes = {"W_q": (d_model, d_model), "W_k": (d_model, d_kv), "W_v": (d_model, d_kv)}
    shapes["W_o"] = (d_model, d_model)
    return [
        {name: (rng.standard_normal(shape) * std).astype(dtype) for name, shape in shapes.items()}
        for _ in range(num_layers)
    ]


def repeat_kv_heads(K, num_heads: int) -> np.ndarray:
    """Give every query head its group's key (or value) head: head i reads K head i // (h / g).

    Shapes: K (B, g, S, d_h) -> (B, h, S, d_h). Grouped-query attention equals multi-head
    attention on these repeated heads; the cache never stores them (that is the point).
    """
    fn = "repeat_kv_heads"
    K = float_array(fn, "K", K)
    if K.ndim != 4:
        raise ValueError(f"{fn}: K must have shape (B, g, S, d_h), got shape {K.shape}")
    num_heads = int_at_least(fn, "num_heads", num_heads)
    g = K.shape[1]
    if num_heads % g != 0:
        raise ValueError(
            f"{fn}: num_heads={num_heads} is not a multiple of the {g} key-value heads of K "
            f"with shape {K.shape}"
        )
    return np.repeat(K, num_heads // g, axis=1)  # (B, h, S, d_h)


def _check_layer(fn: str, params, d: int, d_kv: int, dtype) -> None:
    expected = {"W_q": (d, d), "W_k": (d, d_kv), "W_v": (d, d_kv), "W_o": (d, d)}
    for name, shape in expected.items():
        if name not in params:
            raise ValueError(f"{fn}: params lacks {name!r} (expected shape {shape})")
        W = params[name]
        if W.shape != shape or W.dtype != dtype:
            raise ValueError(
                f"{fn}: params[{name!r}] has shape {W.shape} and dtype {W.dtype}, expected "
                f"{shape} and {dtype} for d_model={d}, num_kv_heads * d_h={d_kv}"
            )


def grouped_query_attention(
    X, params: dict, num_heads: int, num_kv_heads: int, cache=None, layer: int = 0
):
    """Causal grouped-query self-attention of n new rows, optionally through a KV cache.

    Q = X W_q is cut into h heads, K = X W_k and V = X W_v into g = num_kv_heads heads; query
    head i attends with key-value head i // (h / g); the heads are merged and projected by W_o:
        out = concat_i softmax(Q_i K_{i // r}^T / sqrt(d_h) + causal mask) V_{i // r}  W_o.
    Without a cache the n rows are the whole sequence (a prefill). With a cache their K and V
    are written after the ``cache.length`` rows already cached and the n queries attend to all
    of them, causally: new row i sits at position cache.length + i. One new row needs no mask.

    The attention itself is the core of chapter 01, ``scaled_dot_product_attention``, on the
    query heads grouped as (B, g, h/g, n, d_h) against keys and values of shape
    (B, g, 1, S, d_h), which broadcast over each group.

    Shapes: X (B, n, d); params as in :func:`init_attention_only_model`.
    Returns out (B, n, d) (without the residual).
    """
    fn = "grouped_query_attention"
    X = float_array(fn, "X", X)
    if X.ndim != 3:
        raise ValueError(f"{fn}: X must have shape (B, n, d), got shape {X.shape}")
    B, n, d = X.shape
    d_h, group = _check_heads(fn, d, num_heads, num_kv_heads)
    g = num_kv_heads
    _check_layer(fn, params, d, g * d_h, X.dtype)

    Q = (X @ params["W_q"]).reshape(B, n, g, group, d_h)  # (B, n, g, h/g, d_h)
    Q = Q.transpose(0, 2, 3, 1, 4)  # (B, g, h/g, n, d_h): query heads by group
    K = (X @ params["W_k"]).reshape(B, n, g, d_h).transpose(0, 2, 1, 3)  # (B, g, n, d_h)
    V = (X @ params["W_v"]).reshape(B, n, g, d_h).transpose(0, 2, 1, 3)  # (B, g, n, d_h)
    if cache is not None:
        K, V = cache.write(layer, K, V)  # (B, g, S, d_h): the past and the new rows
    S = K.shape[2]
    # Each group's K, V broadcast over its h/g query heads (axis 2): never copied per head.
    mask = None if n == 1 else causal_mask(n, S)  # a single last row sees every key
    heads, _ = scaled_dot_product_attention(Q, K[:, :, None], V[:, :, None], mask)
    merged = heads.transpose(0, 3, 1, 2, 4).reshape(B, n, d)  # (B, n, d): heads side by side
    return merged @ params["W_o"]  # (B, n, d)


def attention_only_forward(X, layers: list[dict], num_heads: int, num_kv_heads: int, cache=None):
    """The toy model: X <- X + grouped_query_attention(X) for each layer, in order.

    Without a cache X holds the whole sequence. With a cache X holds the n rows after the
    ``cache.length`` cached ones; each layer appends its K, V and the cache advances by n.

    Shapes: X (B, n, d). Returns (B, n, d), the last layer's output at the n positions.
    """
    fn = "attention_only_forward"
    if len(layers) == 0:
        raise ValueError(f"{fn}: the model needs at least one layer, got {len(layers)}")
    if cache is not None and len(cache.K) != len(layers):
        raise ValueError(
            f"{fn}: the cache holds {len(cache.K)} layers, the model has {len(layers)} "
            f"(X shape {np.shape(X)})"
        )
    for layer, params in enumerate(layers):
        Y = grouped_query_attention(X, params, num_heads, num_kv_heads, cache, layer)
        Y += X  # the residual, added in place to the layer's fresh output
        X = Y
    if cache is not None:
        cache.advance(X.shape[1])
    return X  # (B, n, d)


def next_input(Y) -> np.ndarray:
    """The next input vector: the output at the last position, rescaled to norm sqrt(d).

    The rescaling only keeps the toy model's numbers on one scale (residual sums would
    otherwise grow at every step); it is no part of the cache. Shapes: Y (B, n, d) -> (B, 1, d).
    """
    Y = float_array("next_input", "Y", Y)
    if Y.ndim != 3:
        raise ValueError(f"next_input: Y must have shape (B, n, d), got shape {Y.shape}")
    y = Y[:, -1:]  # (B, 1, d)
    return y * (math.sqrt(Y.shape[2]) / np.linalg.norm(y, axis=-1, keepdims=True))


def _check_prompt(fn: str, prompt, num_new) -> tuple[np.ndarray, int]:
    prompt = float_array(fn, "prompt", prompt)
    if prompt.ndim != 3 or prompt.shape[1] == 0:
        raise ValueError(f"{fn}: prompt must have shape (B, P, d) with P >= 1, got {prompt.shape}")
    return prompt, int_at_least(fn, "num_new", num_new)


def generate_without_cache(prompt, layers, num_new: int, num_heads: int, num_kv_heads: int):
    """Generate ``num_new`` vectors the way a model without a cache must: at every step, run
    the forward pass over the whole prefix (a prefill) and keep the last row.

    Shapes: prompt (B, P, d). Returns the sequence (B, P + num_new, d).
    """
    X, num_new = _check_prompt("generate_without_cache", prompt, num_new)
    for _ in range(num_new):
        Y = attention_only_forward(X, layers, num_heads, num_kv_heads)  # (B, P + t, d)
        X = np.concatenate([X, next_input(Y)], axis=1)  # (B, P + t + 1, d)
    return X


def generate_with_cache(
    prompt, layers, num_new: int, num_heads: int, num_kv_heads: int, cache=None
):
    """Generate ``num_new`` vectors with a KV cache: one prefill over the prompt, then one row
    per step, reading every earlier key and value from the cache.

    ``cache`` defaults to a fresh :class:`KVCache` for P + num_new positions; any empty object
    with the same ``write`` / ``advance`` / ``length`` interface works.
    Shapes: prompt (B, P, d). Returns the sequence (B, P + num_new, d), equal to
    :func:`generate_without_cache` up to rounding.
    """
    fn = "generate_with_cache"
    prompt, num_new = _check_prompt(fn, prompt, num_new)
    B, P, d = prompt.shape
    d_h, _ = _check_heads(fn, d, num_heads, num_kv_heads)
    if cache is None:
        cache = KVCache(len(layers), B, num_kv_heads, P + num_new, d_h, dtype=prompt.dtype)
    if cache.length != 0:
        raise ValueError(f"{fn}: the cache must start empty, it holds {cache.length} positions")
    rows = [prompt]
    x = next_input(attention_only_forward(prompt, layers, num_heads, num_kv_heads, cache))
    rows.append(x)  # (B, 1, d)
    for _ in range(num_new - 1):
        x = next_input(attention_only_forward(x, layers, num_heads, num_kv_heads, cache))
        rows.append(x)  # (B, 1, d)
    return np.concatenate(rows, axis=1)  # (B, P + num_new, d)


# ----------------------------------------------------------------------------- the trained decoder


def decoder_cache(config, batch: int, max_len: int | None = None, dtype=np.float64) -> KVCache:
    """An empty :class:`KVCache` for the decoder of ``npformer.model`` with ``config``.

    One key-value head per query head (the decoder is multi-head), ``max_len`` positions
    (default: the rows of its position table).
    """
    max_len = config.max_len if max_len is None else max_len
    return KVCache(config.num_layers, batch, config.num_heads, max_len, config.d_head, dtype)


def _heads(x, B: int, n: int, h: int, d_h: int) -> np.ndarray:
    return x.reshape(B, n, h, d_h).transpose(0, 2, 1, 3)  # (B, n, h d_h) -> (B, h, n, d_h)


def _attention_with_cache(x, params, config, layer, cache):
    """The causal self-attention sub-layer of block ``layer`` on n new rows, through the cache."""
    B, n, d = x.shape
    h, d_h = config.num_heads, config.d_head
    a = f"block{layer}.attn."
    qkv = x @ params[a + "W_qkv"]  # (B, n, 3d): columns [Q | K | V]
    qkv += params[a + "b_qkv"]
    q = _heads(qkv[..., :d], B, n, h, d_h)  # (B, h, n, d_h)
    k = np.ascontiguousarray(_heads(qkv[..., d : 2 * d], B, n, h, d_h))
    v = np.ascontiguousarray(_heads(qkv[..., 2 * d :], B, n, h, d_h))
    K, V = cache.write(layer, k, v)  # (B, h, S, d_h): every key and value so far
    S = K.shape[2]
    mask = None if n == 1 else causal_mask(n, S)  # new row i sits at position S - n + i
    heads, _ = scaled_dot_product_attention(q, K, V, mask, scale=config.scale)  # (B, h, n, d_h)
    out = heads.transpose(0, 2, 1, 3).reshape(B, n, d) @ params[a + "W_o"]  # (B, n, d)
    out += params[a + "b_o"]
    return out


def _ffn_params(params, layer: int, activation: str) -> dict:
    names = ["W_1", "b_1", "W_2", "b_2"] + (["W_gate", "b_gate"] if activation == "swiglu" else [])
    return {n: params[f"block{layer}.ffn.{n}"] for n in names}


def decoder_forward_with_cache(params: dict, config, tokens, cache: KVCache, positions=None):
    """Logits of n new tokens, given the ``cache.length`` earlier ones only through the cache.

    The decoder of ``npformer.model`` (learned positions, pre-LN or post-LN blocks, optional
    final layer norm): the new tokens' embeddings plus their position rows, each block's
    attention reading every cached key and value, the keys and values of the new rows written
    into the cache, which then advances by n. ``positions`` (n,) are the position ids of the
    new tokens, by default ``cache.length ... cache.length + n - 1``: the rows after the cached
    ones. (Passing ``np.arange(n)`` instead reproduces the classic bug of a cache without a
    position offset.)

    Shapes: tokens (B, n) integer ids. Returns logits (B, n, vocab_size).
    """
    from npformer.model import check_tokens  # the model imports nothing from here

    fn = "decoder_forward_with_cache"
    tokens = check_tokens(fn, "tokens", tokens, config)
    B, n = tokens.shape
    if not isinstance(cache, KVCache):
        raise ValueError(f"{fn}: cache must be a KVCache, got {type(cache).__name__}")
    expected = (config.num_layers, B, config.num_heads, cache.max_len, config.d_head)
    if cache.K.shape != expected:
        raise ValueError(
            f"{fn}: the cache has shape {cache.K.shape}, the model and tokens {tokens.shape} "
            f"need (num_layers, B, h, max_len, d_h) = {expected}"
        )
    if "pos_emb" not in params and config.positions:
        raise ValueError(f"{fn}: only learned positions (params['pos_emb']) are supported")
    if positions is None:
        positions = np.arange(cache.length, cache.length + n)
    positions = np.asarray(positions)
    if positions.shape != (n,) or not np.issubdtype(positions.dtype, np.integer):
        raise ValueError(
            f"{fn}: positions must be {n} integer ids for tokens of shape {tokens.shape}, got "
            f"shape {positions.shape} and dtype {positions.dtype}"
        )
    if "pos_emb" in params and (positions.min() < 0 or positions.max() >= config.max_len):
        raise ValueError(
            f"{fn}: positions {positions.min()} ... {positions.max()} fall outside the "
            f"{config.max_len} rows of the position table (cache length {cache.length})"
        )
    dtype = params["tok_emb"].dtype
    if cache.K.dtype != dtype:
        raise ValueError(f"{fn}: the cache holds {cache.K.dtype}, the parameters are {dtype}")
    x = params["tok_emb"][tokens]  # (B, n, d) a copy
    if "pos_emb" in params:
        x += params["pos_emb"][positions]  # the new rows' own positions
    eps = config.ln_eps
    for layer in range(config.num_layers):
        q = f"block{layer}."
        ln1 = (params[q + "ln1.gamma"], params[q + "ln1.beta"], eps)
        ln2 = (params[q + "ln2.gamma"], params[q + "ln2.beta"], eps)
        ffn = _ffn_params(params, layer, config.activation)
        if config.ln == "pre":  # x + f(LN(x))
            x = x + _attention_with_cache(layer_norm(x, *ln1)[0], params, config, layer, cache)
            x = x + feed_forward(layer_norm(x, *ln2)[0], ffn, config.activation)[0]
        else:  # LN(x + f(x))
            x = layer_norm(x + _attention_with_cache(x, params, config, layer, cache), *ln1)[0]
            x = layer_norm(x + feed_forward(x, ffn, config.activation)[0], *ln2)[0]
    cache.advance(n)
    if config.final_ln:
        x = layer_norm(x, params["ln_f.gamma"], params["ln_f.beta"], eps)[0]
    logits = x @ params["W_out"]  # (B, n, vocab)
    logits += params["b_out"]
    return logits


def generate_greedy_with_cache(params: dict, config, start, num_new: int, position_offset=True):
    """Greedy decoding through a KV cache: one prefill over ``start``, then one token per step.

    Token for token what ``npformer.train.generate(model_logits(params, config), start,
    num_new)`` returns (argmax, ties to the lowest id), with every step after the prefill a
    forward pass over one new token. ``position_offset=False`` gives each new token the
    position ids of a fresh sequence (0 for a single token): the classic bug, kept here so
    that the chapter can show which check catches it.

    Shapes: start (B, t0) integer ids. Returns the generated tokens only, (B, num_new) int64.
    """
    fn = "generate_greedy_with_cache"
    tokens = np.asarray(start)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer) or tokens.shape[1] < 1:
        raise ValueError(
            f"{fn}: start must be a (B, t0) integer array with t0 >= 1, got dtype "
            f"{tokens.dtype} with shape {tokens.shape}"
        )
    num_new = int_at_least(fn, "num_new", num_new, minimum=0)
    B, t0 = tokens.shape
    if num_new == 0:
        return np.zeros((B, 0), dtype=np.int64)
    cache = decoder_cache(config, B, t0 + num_new - 1, params["tok_emb"].dtype)
    new = tokens
    out = np.empty((B, num_new), dtype=np.int64)
    for step in range(num_new):
        positions = None if position_offset else np.arange(new.shape[1])
        logits = decoder_forward_with_cache(params, config, new, cache, positions)
        out[:, step] = logits[:, -1].argmax(axis=-1)  # (B,) ties go to the lowest id
        new = out[:, step : step + 1]  # (B, 1) the next input
    return out
