"""Position information: absolute encodings, rotary encodings and relative score biases.

Taught in chapter 05 (``chapters/05_positions.ipynb``). Attention alone is permutation
equivariant (chapter 04); every function here is one way to tell it where each token sits.

Query positions follow the masks' convention: with S keys and T <= S queries, the queries are
the LAST T positions (i = S - T, ..., S - 1), what a KV cache needs.
"""

from __future__ import annotations

import math

import numpy as np

from npformer.core.attention import attention, scaled_dot_product_attention


def _even_width(fn: str, name: str, value) -> int:
    return value


def _query_key_distances(fn: str, T, S) -> np.ndarray:
    """j - i for queries i = S - T .. S - 1 and keys j = 0 .. S - 1: shape (T, S)."""
    S = T if S is None else S
    i = np.arange(S - T, S)[:, None]  # (T, 1) absolute query positions
    j = np.arange(S)[None, :]  # (1, S)
    return j - i  # (T, S)


# --- sinusoids ---------------------------------------------------------------------------


def sinusoidal_frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """The angular frequencies omega_i = base^(-2i/d) of the d/2 pairs, i = 0 .. d/2 - 1.

    Returns shape (d/2,), float64, from omega_0 = 1 (period 2 pi) down to base^(-(d-2)/d).
    """
    d = _even_width("sinusoidal_frequencies", "d_model", d_model)
    i = np.arange(d // 2)  # (d/2,) i indexes PAIRS
    return base ** (-2.0 * i / d)


def sinusoidal_positions(num_positions: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """Vaswani et al.'s fixed encoding: PE[pos, 2i] = sin(pos w_i), PE[pos, 2i+1] = cos(pos w_i).

    w_i = base^(-2i/d) with i = 0 .. d/2 - 1 indexing the PAIRS of columns (2i, 2i+1), so the
    two columns of a pair share one frequency. Shapes: -> (num_positions, d_model), float64.
    """
    fn = "sinusoidal_positions"
    n = num_positions
    d = _even_width(fn, "d_model", d_model)
    angles = np.arange(n)[:, None] * sinusoidal_frequencies(d, base)[None, :]  # (n, d/2)
    pe = np.empty((n, d))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe  # (n, d)


def sinusoidal_shift_matrix(k, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The matrix M_k with PE[pos + k] = M_k PE[pos] for every pos (it does not depend on pos).

    Block diagonal: pair i gets [[cos k w_i, sin k w_i], [-sin k w_i, cos k w_i]], from
    sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b.
    ``k`` may be any real offset. Shapes: -> (d_model, d_model).
    """
    d = _even_width("sinusoidal_shift_matrix", "d_model", d_model)
    theta = k * sinusoidal_frequencies(d, base)  # (d/2,)
    c, s = np.cos(theta), np.sin(theta)
    M = np.zeros((d, d))
    idx = np.arange(0, d, 2)
    M[idx, idx], M[idx, idx + 1] = c, s
    M[idx + 1, idx], M[idx + 1, idx + 1] = -s, c
    return M


# --- learned table and adding positions to embeddings -----------------------------------


def init_learned_positions(
    max_positions: int, d_model: int, rng: np.random.Generator, std: float = 0.02, dtype=np.float64
) -> np.ndarray:
    """A trainable table of T_max d numbers, one row per position, N(0, std^2) at the start.

    Shapes: -> (max_positions, d_model). Nothing exists past row max_positions - 1.
    """
    n = max_positions
    d = d_model
    return (rng.standard_normal((n, d)) * std).astype(dtype)


def add_positions(X, positions, scale_embeddings: bool = False) -> np.ndarray:
    """X * sqrt(d) + positions[:T]: token embeddings plus the first T rows of a position table.

    ``scale_embeddings=True`` multiplies the embeddings by sqrt(d_model) first, as Vaswani et
    al. do, so that N(0, 1/d)-sized embeddings are not drowned by entries of size one.
    Shapes: X (..., T, d), positions (T_max, d) with T <= T_max -> (..., T, d).
    """
    fn = "add_positions"
    X, P = np.asarray(X), np.asarray(positions)
    T, d = X.shape[-2:]
    if T > P.shape[0]:  # P[:T] would silently stop short
        raise ValueError(
            f"{fn}: X of shape {X.shape} has T={T} positions but the table of "
            f"shape {P.shape} stops at T_max={P.shape[0]}"
        )
    if scale_embeddings:
        X = X * math.sqrt(d)  # a Python float keeps the dtype
    return X + P[:T].astype(X.dtype, copy=False)  # (..., T, d)


# --- rotary positions (RoPE) -------------------------------------------------------------


def rope_rotation_matrix(m, d_head: int, base: float = 10000.0) -> np.ndarray:
    """R_m: block diagonal, pair i rotated by the angle m w_i, w_i = base^(-2i/d_h).

    Block i is [[cos m w_i, -sin m w_i], [sin m w_i, cos m w_i]]; R_m^T R_n = R_(n-m).
    Shapes: -> (d_head, d_head).
    """
    d = _even_width("rope_rotation_matrix", "d_head", d_head)
    theta = m * sinusoidal_frequencies(d, base)  # (d/2,)
    c, s = np.cos(theta), np.sin(theta)
    R = np.zeros((d, d))
    idx = np.arange(0, d, 2)
    R[idx, idx], R[idx, idx + 1] = c, -s
    R[idx + 1, idx], R[idx + 1, idx + 1] = s, c
    return R


def rope_angles(positions, d_head: int, base: float = 10000.0) -> np.ndarray:
    """The rotation angles m w_i of RoPE for every position m and pair i.

    Shapes: positions (T,) (integers, or reals after interpolation) -> (T, d_head / 2).
    """
    fn = "rope_angles"
    d = _even_width(fn, "d_head", d_head)
    pos = np.asarray(positions, dtype=np.float64)
    return pos[:, None] * sinusoidal_frequencies(d, base)[None, :]  # (T, d/2)


#: The two ways of grouping a head's coordinates into rotated pairs: "adjacent" pairs
#: (2i, 2i+1), as in RoFormer and this book; "half" pairs (i, i + d_h/2), the ``rotate_half``
#: layout of GPT-NeoX and LLaMA.
ROPE_PAIRINGS = ("adjacent", "half")


def rope_pairing_permutation(d_head: int) -> np.ndarray:
    """The column order that turns the adjacent layout into the half-split one.

    With ``perm = rope_pairing_permutation(d_h)``, ``x[..., perm]`` puts coordinate 2i at i
    and 2i+1 at i + d_h/2, so ``apply_rope(x)[..., perm] == apply_rope(x[..., perm],
    pairing="half")``; permuting the columns of W_q and W_k by ``perm`` turns a model of one
    layout into the same model in the other. Shapes: -> (d_h,) integers.
    """
    d = _even_width("rope_pairing_permutation", "d_head", d_head)
    return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])  # (d_h,)


def apply_rope(X, positions=None, base: float = 10000.0, pairing: str = "adjacent") -> np.ndarray:
    """Rotary position embedding (Su et al.): rotate each pair (2i, 2i+1) of x_m by m w_i.

    (x_2i, x_2i+1) -> (x_2i cos - x_2i+1 sin, x_2i sin + x_2i+1 cos), angle m w_i, so that
    out[m] = R_m x[m]. Applied to queries and keys (never values), the score
    (R_m q)^T (R_n k) = q^T R_(n-m) k depends on the positions only through n - m.
    ``pairing="half"`` rotates the pairs (i, i + d_h/2) instead, by the same angles: the
    ``rotate_half`` form x cos + rotate_half(x) sin of GPT-NeoX and LLaMA.

    Shapes: X (..., T, d_h) with d_h even; positions (T,), default 0 .. T-1 -> (..., T, d_h).
    """
    fn = "apply_rope"
    if pairing not in ROPE_PAIRINGS:
        raise ValueError(f"{fn}: pairing must be one of {ROPE_PAIRINGS}, got {pairing!r}")
    X = np.asarray(X)
    T, d = X.shape[-2:]
    if d % 2:
        raise ValueError(f"{fn}: X of shape {X.shape} has an odd width d_h={d}; RoPE rotates pairs")
    pos = np.arange(T) if positions is None else np.asarray(positions)
    theta = rope_angles(pos, d, base)  # (T, d/2)
    c, s = np.cos(theta).astype(X.dtype), np.sin(theta).astype(X.dtype)
    first, second = (slice(0, None, 2), slice(1, None, 2))  # adjacent: (2i, 2i + 1)
    if pairing == "half":
        first, second = slice(0, d // 2), slice(d // 2, None)  # half: (i, i + d_h/2)
    x_a, x_b = X[..., first], X[..., second]  # (..., T, d/2) each: the two ends of pair i
    out = np.empty_like(X)
    out[..., first] = x_a * c - x_b * s
    out[..., second] = x_a * s + x_b * c
    return out  # (..., T, d_h)


def interpolate_positions(positions, train_length: int, target_length: int) -> np.ndarray:
    """Position interpolation (Chen et al. 2023): m -> m * n_train / n'.

    Squeezes positions 0 .. n' - 1 of a longer context back into the range [0, n_train) seen in
    training, so RoPE's angles stay inside the trained range. Shapes: (T,) -> (T,) float64.
    """
    n_train = train_length
    n_new = target_length
    pos = np.asarray(positions, dtype=np.float64)
    return pos * (n_train / n_new)


# --- relative positions: Shaw et al., T5, ALiBi ------------------------------------------


def relative_position_index(T: int, S: int | None = None, max_distance: int = 4) -> np.ndarray:
    """Shaw et al.'s clipped distance clip(j - i, -k, k) + k: an index into 2k + 1 vectors.

    Shapes: -> (T, S) integers in 0 .. 2k; S defaults to T (queries are the last T keys).
    """
    fn = "relative_position_index"
    k = max_distance
    return np.clip(_query_key_distances(fn, T, S), -k, k) + k  # (T, S)


def shaw_attention(Q, K, V, rel_keys, rel_values, mask=None, scale: bool = True):
    """Self-attention with Shaw et al.'s relative position vectors.

    e_ij = q_i . (k_j + a^K_ij) / sqrt(d_h), z_i = sum_j p_ij (v_j + a^V_ij), where
    a^K_ij = rel_keys[clip(j - i, -k, k) + k] (and likewise a^V); k = (len(rel_keys) - 1) / 2.

    Shapes: Q (..., T, d_h), K (..., S, d_h), V (..., S, d_v), rel_keys (2k+1, d_h),
    rel_values (2k+1, d_v); mask broadcasts to (..., T, S).
    Returns (out (..., T, d_v), weights (..., T, S)).
    """
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    A_k, A_v = np.asarray(rel_keys), np.asarray(rel_values)
    if A_k.shape[0] != A_v.shape[0] or A_k.shape[0] % 2 == 0:  # else k would be read wrongly
        raise ValueError(
            f"shaw_attention: rel_keys {A_k.shape} and rel_values {A_v.shape} must be "
            f"(2k+1, {Q.shape[-1]}) and (2k+1, {V.shape[-1]})"
        )
    T, S = Q.shape[-2], K.shape[-2]
    k = (A_k.shape[0] - 1) // 2
    idx = relative_position_index(T, S, max_distance=max(k, 1)) if k else np.zeros((T, S), int)
    one_hot = (idx[..., None] == np.arange(2 * k + 1)).astype(Q.dtype)  # (T, S, 2k+1)

    factor = 1.0 / math.sqrt(Q.shape[-1]) if scale else 1.0
    q_rel = Q @ A_k.T  # (..., T, 2k+1) q_i . a^K_r
    # (..., T, S): the position term of the scores, which the core adds as a bias
    position = factor * np.einsum("...tr,tsr->...ts", q_rel, one_hot)
    out, cache = attention(Q, K, V, factor=factor, mask=mask, bias=position)
    bucket_weights = np.einsum("...ts,tsr->...tr", cache.weights, one_hot)  # (..., T, 2k+1)
    return out + bucket_weights @ A_v, cache.weights  # (..., T, d_v), (..., T, S)


def _t5_bucket_of_distance(n: int, num_buckets: int, max_exact: int, max_distance: int) -> int:
    if n < max_exact:
        return n
    # math.log (libm, scalar) so the floor never depends on NumPy's SIMD kernels
    large = max_exact + int(
        math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    )
    return min(large, num_buckets - 1)


def t5_relative_bucket(
    relative_position, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> np.ndarray:
    """T5's bucket of a relative position j - i: exact when close, logarithmic when far.

    Bidirectional: half the buckets for j - i > 0, half for j - i <= 0. Within a half of
    ``nb`` buckets, distances below nb / 2 get their own bucket; larger ones share buckets
    nb/2 + floor(log(n / (nb/2)) / log(max_distance / (nb/2)) * (nb - nb/2)), capped at nb - 1
    (everything from ``max_distance`` on lands in the last bucket). Causal (not bidirectional):
    only j - i <= 0 is distinguished. Shapes: any integer array -> same shape.
    """
    fn = "t5_relative_bucket"
    rp = np.asarray(relative_position)
    half = num_buckets // 2 if bidirectional else num_buckets
    if (bidirectional and num_buckets % 2) or not max_distance > half // 2:
        raise ValueError(
            f"{fn}: num_buckets={num_buckets} must be even when bidirectional and max_distance="
            f"{max_distance} exceed the exact range {half // 2} (else the log buckets break)"
        )
    buckets = np.zeros(rp.shape, dtype=np.int64)
    if bidirectional:
        num_buckets //= 2
        buckets += (rp > 0) * num_buckets
        n = np.abs(rp)
    else:
        n = -np.minimum(rp, 0)
    max_exact = num_buckets // 2
    values, inverse = np.unique(n, return_inverse=True)
    table = np.array(
        [_t5_bucket_of_distance(int(v), num_buckets, max_exact, max_distance) for v in values],
        dtype=np.int64,
    )
    return buckets + table[inverse].reshape(rp.shape)


def t5_bias(
    T: int, S: int | None, bias_table, bidirectional: bool = True, max_distance: int = 128
) -> np.ndarray:
    """T5's relative bias: one learned scalar per head and bucket, added to the scores.

    bias[k, i, j] = bias_table[bucket(j - i), k]. Shapes: bias_table (num_buckets, h) ->
    (h, T, S), which broadcasts against (B, h, T, S) scores.
    """
    fn = "t5_bias"
    table = np.asarray(bias_table)
    rel = _query_key_distances(fn, T, S)  # (T, S)
    buckets = t5_relative_bucket(rel, bidirectional, table.shape[0], max_distance)
    return np.moveaxis(table[buckets], -1, 0)  # (h, T, S)


def alibi_slopes(num_heads: int) -> np.ndarray:
    """ALiBi's per-head slopes: the geometric sequence 2^(-8k/h), k = 1 .. h.

    For h a power of two this is exact; otherwise, as in Press et al.'s code, the slopes of the
    closest smaller power of two are followed by every other slope of twice that power.
    Shapes: -> (h,).
    """
    h = num_heads

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]

    if h & (h - 1) == 0:
        return np.array(power_of_two(h))
    p = 1 << (h.bit_length() - 1)  # closest power of two below h
    return np.array(power_of_two(p) + power_of_two(2 * p)[0::2][: h - p])


def alibi_bias(num_heads: int, T: int, S: int | None = None) -> np.ndarray:
    """ALiBi's linear penalty -lambda_k |i - j| added to head k's scores (no learned parameter).

    On the causal triangle (j <= i) this is -lambda_k (i - j), Press et al.'s form; the
    absolute value extends it symmetrically to keys after the query.
    Shapes: -> (h, T, S), broadcasting against (B, h, T, S) scores.
    """
    fn = "alibi_bias"
    slopes = alibi_slopes(num_heads)  # (h,)
    dist = np.abs(_query_key_distances(fn, T, S))  # (T, S)
    return -slopes[:, None, None] * dist  # (h, T, S)


def attention_with_bias(Q, K, V, bias, mask=None, scale: bool = True):
    """softmax(Q K^T / sqrt(d_h) + bias) V: how T5 and ALiBi positions enter attention.

    The attention core (``npformer.core.attention.scaled_dot_product_attention``) with its ``bias``
    argument. Shapes: Q (..., T, d_h), K (..., S, d_h), V (..., S, d_v); bias broadcasts to
    (..., T, S) (for example (h, T, S) against (B, h, T, S)); mask likewise, True = may attend.
    Returns (out (..., T, d_v), weights (..., T, S)).
    """
    out, cache = scaled_dot_product_attention(Q, K, V, mask=mask, scale=scale, bias=bias)
    return out, cache.weights  # (..., T, d_v), (..., T, S)
