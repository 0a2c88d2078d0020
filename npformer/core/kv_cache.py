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
W_o; the output at the last position, passed through a feedback function (chapter 09's
:func:`layer_norm_last_row`, or :func:`next_input` by default), is the next input vector.

The chapter then caches the trained decoder of ``npformer.core.model`` (chapter 10's model), whose
``forward`` takes a :class:`KVCache` (``npformer.core.model.decoder_cache``) and runs the new tokens
through the same blocks as training; ``npformer.core.model.generate_greedy_with_cache`` decodes
greedily with it, token for token what ``npformer.training.train.generate`` produces without a
cache.

Weight convention of the book: a linear layer is ``x @ W`` with ``W`` of shape (d_in, d_out);
the toy model has no biases.
"""

from __future__ import annotations

import math

import numpy as np

from npformer.core.attention import scaled_dot_product_attention
from npformer.core.validation import (
    divisible,
    float_array,
    int_at_least,
)


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
    """Bytes taken by the keys and values a decoder stores for ``seq_len`` positions.

    Each layer holds a K array and a V array of shape
    ``(batch, num_kv_heads, seq_len, d_head)``; the size is the entries of those
    ``2 * num_layers`` arrays times ``bytes_per_value``.

    Returns an exact int (divide by 2**20 for MiB, 2**30 for GiB).
    """
    return 2 * num_layers * num_kv_heads * d_head * seq_len * batch * bytes_per_value


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
        shape = (num_layers, batch, num_kv_heads, max_len, d_head)
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
        d_h): every key and value of this layer up to and including the new rows. Called in
        every layer at every step, it checks nothing: the forward passes that call it check
        the cache once (:func:`check_cache`).
        """
        n = K_new.shape[2]
        end = self.length + n
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

    def reset(self) -> None:
        """Empty the cache for the next request: length 0, nothing reallocated.

        The old keys and values stay in the arrays but are never read again: every read is a
        view of the first ``length`` positions, and the next request's writes start at 0.
        """
        self.length = 0

    def key_positions(self, n: int) -> np.ndarray:
        """(S,) the position each key a pass over ``n`` new rows reads holds, in slot order."""
        return np.arange(self.length + n)


class RollingKVCache(KVCache):
    """A sliding-window cache: W = ``max_len`` slots that hold the last W positions.

    While it fills it is a :class:`KVCache`. Once full, each new token is written in place
    over the oldest, position p into slot p mod W (a ring buffer, as in Mistral's rolling
    cache), and attends to the W slots: itself and the W - 1 positions before it. The arrays
    keep their W slots however long the sequence; ``length`` counts every position seen.
    Past the fill one token per pass: n new rows would need W + n - 1 keys.
    """

    def write(self, layer: int, K_new: np.ndarray, V_new: np.ndarray):
        """Like :meth:`KVCache.write` while filling; once full, one row into slot p mod W."""
        if self.length + K_new.shape[2] <= self.max_len:  # still filling: slots in order
            return super().write(layer, K_new, V_new)
        slot = self.length % self.max_len  # evicts position length - W, the oldest
        self.K[layer, :, :, slot] = K_new[:, :, 0]  # in place, nothing reallocated
        self.V[layer, :, :, slot] = V_new[:, :, 0]
        return self.K[layer], self.V[layer]  # (B, g, W, d_h): the last W positions

    def advance(self, n: int) -> None:
        """Count ``n`` more positions seen; a full window has no end."""
        self.length += n

    def key_positions(self, n: int) -> np.ndarray:
        """(S,) the position in each slot after ``n`` new rows: slot j holds the latest
        position p <= length + n - 1 with p mod W = j."""
        last, W = self.length + n - 1, self.max_len
        if last < W:
            return np.arange(last + 1)
        return last - (last - np.arange(W)) % W  # (W,)


def check_cache(
    fn: str, cache, num_layers: int, batch: int, num_kv_heads: int, d_head: int, n: int, dtype
) -> None:
    """Raise ValueError, naming the shapes, unless ``cache`` is a KVCache of these sizes and
    ``dtype`` with room for ``n`` more positions."""
    if not isinstance(cache, KVCache):
        raise ValueError(f"{fn}: cache must be a KVCache, got {type(cache).__name__}")
    L, B, g, max_len, d_h = cache.K.shape
    if (L, B, g, d_h) != (num_layers, batch, num_kv_heads, d_head):
        raise ValueError(
            f"{fn}: cache has shape {cache.K.shape}; the model needs (L, B, g, max_len, d_h) = "
            f"({num_layers}, {batch}, {num_kv_heads}, max_len, {d_head})"
        )
    if cache.K.dtype != dtype:
        raise ValueError(
            f"{fn}: cache holds {cache.K.dtype} (shape {cache.K.shape}), the model {dtype}"
        )
    if isinstance(cache, RollingKVCache):
        if n > 1 and cache.length + n > max_len:
            raise ValueError(
                f"{fn}: a sliding-window cache of {max_len} slots holding {cache.length} "
                f"positions takes at most {max(max_len - cache.length, 1)} new positions in "
                f"one pass, got {n} (cache shape {cache.K.shape}): feed them one at a time"
            )
    elif cache.length + n > max_len:
        raise ValueError(f"{fn}: {n} new positions overflow the cache of shape {cache.K.shape}")


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
    d_kv = num_kv_heads * (d_model // num_heads)
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
    K = np.asarray(K)
    g = K.shape[1]
    if num_heads % g != 0:  # num_heads // g copies would silently give the wrong count
        raise ValueError(
            f"repeat_kv_heads: num_heads={num_heads} is not a multiple of the {g} key-value "
            f"heads of K with shape {K.shape}"
        )
    return np.repeat(K, num_heads // g, axis=1)  # (B, h, S, d_h)


def _check_layer(fn: str, params, d: int, d_kv: int, dtype) -> None:
    expected = {"W_q": (d, d), "W_k": (d, d_kv), "W_v": (d, d_kv), "W_o": (d, d)}
    for name, shape in expected.items():
        if name not in params:
            raise ValueError(f"{fn}: params lacks {name!r} (expected shape {shape})")
        W = params[name]
        if W.shape != shape or W.dtype != dtype:
            raise ValueError(f"{fn}: params[{name!r}] is {W.dtype} {W.shape}, not {dtype} {shape}")


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
    # Each group's K, V broadcast over its h/g query heads (axis 2): never copied per head.
    # causal: the n queries are the last n of the S keys; a single last row sees every key.
    heads, _ = scaled_dot_product_attention(Q, K[:, :, None], V[:, :, None], causal=n > 1)
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
    if isinstance(cache, KVCache):
        X = float_array(fn, "X", X)
        B, n, d = X.shape if X.ndim == 3 else (0, 0, 0)
        check_cache(fn, cache, len(layers), B, num_kv_heads, d // num_heads, n, X.dtype)
    for layer, params in enumerate(layers):
        Y = grouped_query_attention(X, params, num_heads, num_kv_heads, cache, layer)
        Y += X  # the residual, added in place to the layer's fresh output
        X = Y
    if cache is not None:
        cache.advance(X.shape[1])
    return X  # (B, n, d)


def next_input(Y) -> np.ndarray:
    """The next input vector: the output at the last position, rescaled to norm sqrt(d).

    Rescaling puts every fed-back vector on one scale (the benchmark and chapter 14 use it;
    chapter 09 feeds back :func:`layer_norm_last_row`); it is no part of the cache.
    Shapes: Y (B, n, d) -> (B, 1, d).
    """
    Y = np.asarray(Y)
    y = Y[:, -1:]  # (B, 1, d)
    return y * (math.sqrt(Y.shape[2]) / np.linalg.norm(y, axis=-1, keepdims=True))


def generate_without_cache(
    prompt, layers, num_new: int, num_heads: int, num_kv_heads: int, feedback=next_input
):
    """Generate ``num_new`` vectors the way a model without a cache must: at every step, run
    the forward pass over the whole prefix (a prefill) and keep the last row.

    ``feedback`` maps the outputs (B, n, d) to the next input (B, 1, d); the default is
    :func:`next_input`, chapter 09 passes :func:`layer_norm_last_row`.
    Shapes: prompt (B, P, d). Returns the sequence (B, P + num_new, d).
    """
    X = np.asarray(prompt)
    for _ in range(num_new):
        Y = attention_only_forward(X, layers, num_heads, num_kv_heads)  # (B, P + t, d)
        X = np.concatenate([X, feedback(Y)], axis=1)  # (B, P + t + 1, d)
    return X


def generate_with_cache(
    prompt,
    layers,
    num_new: int,
    num_heads: int,
    num_kv_heads: int,
    cache=None,
    feedback=next_input,
):
    """Generate ``num_new`` vectors with a KV cache: one prefill over the prompt, then one row
    per step, reading every earlier key and value from the cache.

    ``cache`` defaults to a fresh :class:`KVCache` for P + num_new positions; any empty object
    with the same ``write`` / ``advance`` / ``length`` interface works. ``feedback`` as in
    :func:`generate_without_cache`.
    Shapes: prompt (B, P, d). Returns the sequence (B, P + num_new, d), equal to
    :func:`generate_without_cache` up to rounding.
    """
    prompt = np.asarray(prompt)
    B, P, d = prompt.shape
    if cache is None:
        d_h = d // num_heads
        cache = KVCache(len(layers), B, num_kv_heads, P + num_new, d_h, dtype=prompt.dtype)
    if cache.length != 0:  # the prompt would be written after another sequence's rows
        raise ValueError(
            f"generate_with_cache: the cache must start empty, it holds {cache.length} positions"
        )
    rows = [prompt]
    x = feedback(attention_only_forward(prompt, layers, num_heads, num_kv_heads, cache))
    rows.append(x)  # (B, 1, d)
    for _ in range(num_new - 1):
        x = feedback(attention_only_forward(x, layers, num_heads, num_kv_heads, cache))
        rows.append(x)  # (B, 1, d)
    return np.concatenate(rows, axis=1)  # (B, P + num_new, d)


def layer_norm_last_row(Y) -> np.ndarray:
    """The next input of chapter 09's toy model: the last output row, layer-normalized.

    y = Y[:, -1:], then (y - mean(y)) / std(y) over the d features (a layer norm without gain
    and shift, eps = 0): every fed-back vector has mean 0 and variance 1, so the residual
    stream cannot drift in scale however many vectors are generated.
    Shapes: Y (B, n, d) -> (B, 1, d).
    """
    y = np.asarray(Y)[:, -1:]  # (B, 1, d)
    centred = y - y.mean(axis=-1, keepdims=True)
    return centred / centred.std(axis=-1, keepdims=True)
