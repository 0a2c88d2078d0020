"""The decoder-only Transformer: forward, masked loss, backward.

Taught in chapter 06 (``chapters/06_block.ipynb``), which checks its hand-written backward pass
three ways (central differences, torch autograd, side-by-side training); trained in chapters 10
and 11.

The model: token embedding (+ a learned or sinusoidal position table, or RoPE or ALiBi inside
attention, chapter 05), ``num_layers`` blocks (pre-LN
x + f(LN(x)) or post-LN LN(x + f(x))), each a causal multi-head self-attention and a
position-wise feed-forward network, an optional final layer norm and an untied output layer
with bias. Parameters live in a flat dict name -> array (``init_params``), packed in one buffer
(``npformer.core.optim.pack``), so ``sum(p.size for p in params.values())`` is exactly what the
optimizer updates. Everything keeps the parameters' dtype: float64 for gradient checks, float32
for fast training.

The three projections Q, K, V are stored side by side as one (d, 3d) matrix ``W_qkv`` (columns
[Q | K | V], head k owning columns k d_h ... (k + 1) d_h - 1 of each part): the same
parameters as three (d, d) matrices, computed with one matrix product instead of three.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from npformer.core.block import (  # noqa: F401 (AttentionLayerCache, BlockCache: re-exported)
    AttentionLayerCache,
    BlockCache,
    block_backward,
    block_forward,
    block_num_params,
    block_parameter_shapes,
    final_norm,
    final_norm_backward,
)
from npformer.core.config import (  # noqa: F401 (the config's names: re-exported for readers)
    ACTIVATIONS,
    LN_PLACEMENTS,
    POSITION_SCHEMES,
    DecoderConfig,
    PositionScheme,
    position_scheme,
)
from npformer.core.kv_cache import KVCache, RollingKVCache, check_cache
from npformer.core.masks import left_padding_mask
from npformer.core.optim import pack, zeros_like_packed
from npformer.core.positions import sinusoidal_frequencies
from npformer.core.reductions import cached_ones, max_last, sum_last, sum_rows

# ----------------------------------------------------------------------------- parameters


def parameter_shapes(config: DecoderConfig) -> dict[str, tuple[int, ...]]:
    """Names and shapes of every parameter, in the order ``init_params`` packs them."""
    return dict(_parameter_shapes(config))


@functools.lru_cache(maxsize=64)
def _parameter_shapes(config: DecoderConfig) -> tuple:
    d, vocab = config.d_model, config.vocab_size
    shapes = {"tok_emb": (vocab, d)}
    if config.positions == "learned":
        shapes["pos_emb"] = (config.max_len, d)
    for layer in range(config.num_layers):
        shapes.update(block_parameter_shapes(config, layer))
    if config.final_ln:
        shapes["ln_f.gamma"] = (d,)
        shapes["ln_f.beta"] = (d,)
    shapes["W_out"] = (d, vocab)
    shapes["b_out"] = (vocab,)
    return tuple(shapes.items())


def num_params(config: DecoderConfig) -> int:
    """Closed form for the whole model: embeddings, positions, blocks, final LN, output layer."""
    d, vocab = config.d_model, config.vocab_size
    count = vocab * d + config.num_layers * block_num_params(config) + d * vocab + vocab
    if config.positions == "learned":
        count += config.max_len * d
    if config.final_ln:
        count += 2 * d
    return count


def init_params(config: DecoderConfig, rng: np.random.Generator, dtype=np.float64) -> dict:
    """Random initial parameters, packed in one buffer (see ``npformer.core.optim.pack``).

    Weight matrices N(0, 1) / sqrt(d_in), biases 0, layer-norm gamma 1 and beta 0, token and
    position embeddings 0.1 N(0, 1). Draws are made in float64 in a fixed order, then cast, so
    float32 and float64 models from the same seed hold the same numbers up to rounding.
    Returns {name: array} with the names and shapes of ``parameter_shapes(config)``.
    """
    arrays = {}
    for name, shape in parameter_shapes(config).items():
        leaf = name.rsplit(".", 1)[-1]
        if name in ("tok_emb", "pos_emb"):
            arrays[name] = 0.1 * rng.normal(size=shape)
        elif leaf == "gamma":
            arrays[name] = np.ones(shape)
        elif leaf == "beta" or leaf.startswith("b_"):
            arrays[name] = np.zeros(shape)
        else:
            arrays[name] = rng.normal(size=shape) / math.sqrt(shape[0])
    return pack(arrays, dtype=dtype)


def check_tokens(fn: str, name: str, tokens, config: DecoderConfig) -> np.ndarray:
    """Token ids as a (B, T) array inside the vocabulary: an id outside it would index the
    embedding silently (a negative one wraps around)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.min() < 0 or tokens.max() >= config.vocab_size:
        raise ValueError(
            f"{fn}: {name} must be (B, T) ids in [0, {config.vocab_size}), got shape "
            f"{tokens.shape} with ids in [{tokens.min()}, {tokens.max()}]"
        )
    return tokens


# ----------------------------------------------------------------------------- caches


class DecoderCache(NamedTuple):
    """What ``backward`` needs; ``blocks[l].attn.weights`` are the attention maps of block l."""

    tokens: np.ndarray  # (B, T)
    blocks: list
    x_out: np.ndarray  # (B, T, d) the input of the output layer
    ln_f: tuple | None
    params: dict
    config: DecoderConfig


def _sinusoid_rows(positions: np.ndarray, d: int, dtype: np.dtype) -> np.ndarray:
    """The rows of the fixed sinusoidal table at ``positions`` only, in ``dtype``.

    PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), the formula of ``sinusoidal_positions``
    evaluated at the given positions, with the same float64 products, so each row equals the
    table's row at p; the work and memory are those of the rows asked for, whatever p is.
    Shapes: positions (...,) integers -> (..., d).
    """
    angles = positions[..., None] * sinusoidal_frequencies(d)  # (..., d/2) float64
    rows = np.empty(angles.shape[:-1] + (d,))
    rows[..., 0::2] = np.sin(angles)
    rows[..., 1::2] = np.cos(angles)
    return rows.astype(dtype, copy=False)  # (..., d)


@functools.lru_cache(maxsize=32)
def _sinusoid_block(start: int, T: int, d: int, dtype: np.dtype) -> np.ndarray:
    """(T, d) rows start ... start + T - 1 of the sinusoidal table (read-only, reused)."""
    rows = _sinusoid_rows(np.arange(start, start + T), d, dtype)
    rows.flags.writeable = False
    return rows


# ----------------------------------------------------------------------------- the model


def forward(
    params: dict,
    config: DecoderConfig,
    tokens,
    attn_mask=None,
    cache=None,
    positions=None,
    head_edit=None,
    residual_edit=None,
):
    """Logits of the next token at every position.

    x_0 = tok_emb[tokens] + pos_emb[:T]; x_l = block_l(x_{l-1}); logits = LN_f(x_L) W_out + b_out.
    ``attn_mask`` (bool, True = may attend, broadcasting to (B, h, T, S)) replaces the default
    causal mask, e.g. to let a prompt attend both ways.

    ``cache``, a ``KVCache`` from ``decoder_cache``, makes the T tokens the positions after the
    ``cache.length`` ones it holds: every block writes their keys and values into it and
    attends to all S = cache.length + T of them, and the cache then advances by T. A prefill
    followed by one token per call gives the logits of one pass over the whole sequence, for
    every position scheme. ``positions`` (T,) overrides the position ids of the tokens (default:
    cache.length ... cache.length + T - 1, or 0 ... T - 1 without a cache); (B, T) gives each
    row its own, for the learned and sinusoidal tables (a left-padded batch). A sliding-window
    cache (``decoder_cache(..., window=W)``) lets each token attend to itself and the W - 1
    positions before it, its keys S = min(cache.length + T, W).

    Hooks, for forward passes only (under an edit the returned cache mixes edited and unedited
    values, which no backward pass may use): ``head_edit(layer, weights, v, heads)`` is called
    in every block's attention (weights (B, h, T, S), v and heads (B, h, T, d_h)) and returns
    the heads' outputs to use; ``residual_edit(layer, x)`` is called on the residual stream
    (B, T, d) after every block and returns the stream to go on with.
    Shapes: tokens (B, T) integer ids < vocab_size, S <= max_len for learned positions.
    Returns (logits (B, T, vocab_size) in the parameters' dtype, DecoderCache); the
    DecoderCache of a cached pass is for reading only (``backward`` needs an uncached one).
    """
    fn = "forward"
    tokens = check_tokens(fn, "tokens", tokens, config)
    B, T = tokens.shape
    start = 0
    if cache is not None:
        dtype = params["tok_emb"].dtype
        check_cache(fn, cache, config.num_layers, B, config.num_heads, config.d_head, T, dtype)
        start = cache.length
    if positions is not None and np.ndim(positions) == 2 and config.positions in ("rope", "alibi"):
        raise ValueError(
            f"{fn}: positions of shape {np.shape(positions)} (one per row) serve the learned and "
            f"sinusoidal tables; {config.positions} depends only on distances: give (T,) or None"
        )
    if positions is None and config.positions == "learned" and start + T > config.max_len:
        window = isinstance(cache, RollingKVCache)
        raise ValueError(
            f"{fn}: tokens of shape {tokens.shape} after the {start} cached positions reach "
            f"position {start + T - 1}, outside the {config.max_len} rows of the position table"
            + (" (a sliding window does not lift the table's limit)" if window else "")
        )
    x, blocks = _forward_blocks(
        params, config, tokens, attn_mask, head_edit, residual_edit, cache, positions
    )
    if cache is not None:
        cache.advance(T)
    c_f = None
    if config.final_ln:
        x, c_f = final_norm(x, params, config)
    logits = x.reshape(B * T, -1) @ params["W_out"]  # (B T, vocab)
    logits += params["b_out"]
    return logits.reshape(B, T, -1), DecoderCache(tokens, blocks, x, c_f, params, config)


def _embed(params, config, tokens, start=0, positions=None):
    """x_0 = tok_emb[tokens] (+ the learned or sinusoidal position table): a new (B, T, d).

    The position rows are ``positions`` (T,), or start ... start + T - 1 when it is None.
    """
    T = tokens.shape[1]
    x = params["tok_emb"][tokens]  # (B, T, d) a copy
    if config.positions == "learned":
        table = params["pos_emb"]  # (max_len, d)
        x += table[start : start + T] if positions is None else table[positions]
    elif config.positions == "sinusoidal":
        if positions is None:
            x += _sinusoid_block(start, T, config.d_model, x.dtype)
        else:
            x += _sinusoid_rows(positions, config.d_model, x.dtype)
    return x


def _forward_blocks(
    params,
    config,
    tokens,
    attn_mask,
    head_edit=None,
    residual_edit=None,
    cache=None,
    positions=None,
):
    """Embeddings and blocks, without the final layer norm and output layer (hooks, cache and
    positions: ``forward``; the cache is written but not advanced).

    Returns (x_L (B, T, d), [BlockCache of each block]); every intermediate x_l is a new array
    (no block writes into its input), so callers may keep them.
    """
    start = 0 if cache is None else cache.length
    x = _embed(params, config, tokens, start, positions)  # (B, T, d)
    blocks = []
    for layer in range(config.num_layers):
        edit = None if head_edit is None else functools.partial(head_edit, layer)
        x, c = block_forward(x, params, config, layer, attn_mask, edit, cache, positions)
        if residual_edit is not None:
            x = residual_edit(layer, x)
        blocks.append(c)
    return x, blocks


def decoder_cache(
    config: DecoderConfig,
    batch: int,
    max_len: int | None = None,
    dtype=np.float64,
    window: int | None = None,
):
    """An empty ``KVCache`` for ``forward`` with ``config``: keys and values of every block.

    One key-value head per query head (the decoder is multi-head), room for ``max_len``
    positions (default: the rows of the position table). ``window`` = W instead gives a
    sliding-window ``RollingKVCache`` of W slots, which never fills: each token attends to
    itself and the W - 1 positions before it.
    Returns a KVCache whose K and V have shape (num_layers, batch, h, max_len or W, d_h).
    """
    if window is not None:
        if max_len is not None or window < 1:
            raise ValueError(
                f"decoder_cache: give max_len={max_len} or window={window} >= 1, not both (a "
                f"window's slots are its max_len)"
            )
        shape = (config.num_layers, batch, config.num_heads, window, config.d_head, dtype)
        return RollingKVCache(*shape)
    max_len = config.max_len if max_len is None else max_len
    return KVCache(config.num_layers, batch, config.num_heads, max_len, config.d_head, dtype)


def generate_greedy_with_cache(
    params: dict,
    config: DecoderConfig,
    start,
    num_new: int,
    position_offset=True,
    window: int | None = None,
    prompt_lengths=None,
):
    """Greedy decoding through a KV cache: one prefill over ``start``, then one token per step.

    Each step is ``forward`` on the newest token with the cache (argmax, ties to the lowest
    id): token for token what ``npformer.training.train.generate(model_logits(params, config),
    start, num_new)`` returns without a cache. ``position_offset=False`` gives each new token the
    position ids of a fresh sequence (0 for a single token): the classic bug, kept here so
    that the chapter can show which check catches it.

    ``window`` = W decodes through a sliding-window cache of W >= t0 slots (each token sees
    itself and the W - 1 before it). ``prompt_lengths`` (B,) makes ``start`` a left-padded
    ragged batch: row b's prompt is its last prompt_lengths[b] tokens; the pads are never
    attended to and each row's tokens get their own positions, so every row decodes as its
    prompt would alone.

    Shapes: start (B, t0) integer ids. Returns the generated tokens only, (B, num_new) int64.
    """
    fn = "generate_greedy_with_cache"
    tokens = check_tokens(fn, "start", start, config)
    B, t0 = tokens.shape
    pad = None
    if prompt_lengths is not None:  # a length outside [1, t0] would pad a wrong number of slots
        lengths = np.asarray(prompt_lengths)
        if lengths.shape != (B,) or lengths.min() < 1 or lengths.max() > t0:
            raise ValueError(
                f"{fn}: prompt_lengths must be {B} integers in [1, {t0}] for start of shape "
                f"({B}, {t0}), got {lengths.tolist()} of shape {lengths.shape}"
            )
        pad = t0 - lengths  # (B,)
    if window is not None:
        if window < t0 or pad is not None:
            raise ValueError(
                f"{fn}: window={window} must hold the prompt, start of shape {tokens.shape}, "
                f"and is not combined with prompt_lengths"
            )
    if config.positions == "learned" and t0 + num_new - 1 > config.max_len:
        raise ValueError(
            f"{fn}: start of shape {tokens.shape} and num_new={num_new} need "
            f"{t0 + num_new - 1} positions, more than the {config.max_len} of the table"
            + ("; a sliding window does not lift that limit" if window else "")
        )
    out = np.empty((B, num_new), dtype=np.int64)
    dtype = params["tok_emb"].dtype
    if window is None:
        cache = decoder_cache(config, B, max(t0 + num_new - 1, 1), dtype)
    else:
        cache = decoder_cache(config, B, dtype=dtype, window=window)
    new = tokens
    for step in range(num_new):
        positions = None if position_offset else np.arange(new.shape[1])
        mask = None
        if pad is not None:  # left padding: hide the pads, count each row from its first token
            mask = left_padding_mask(pad, cache.length, new.shape[1])  # (B, 1, n, S)
            if config.positions in ("learned", "sinusoidal"):
                columns = np.arange(cache.length, cache.length + new.shape[1])  # (n,)
                positions = np.maximum(columns - pad[:, None], 0)  # (B, n); pads at 0
        logits, _ = forward(params, config, new, mask, cache, positions)  # (B, n, vocab)
        out[:, step] = logits[:, -1].argmax(axis=-1)  # (B,) ties go to the lowest id
        new = out[:, step : step + 1]  # (B, 1) the next input
    return out


def hidden_states(params: dict, config: DecoderConfig, tokens, attn_mask=None) -> list:
    """The residual stream: x_0 = embeddings (+ positions), then x_l after each block l.

    What a probe reads (chapter 11). ``attn_mask`` as in ``forward``.
    Returns a list of num_layers + 1 arrays of shape (B, T, d).
    """
    tokens = check_tokens("hidden_states", "tokens", tokens, config)
    x = _embed(params, config, tokens)  # (B, T, d)
    states = [x]
    for layer in range(config.num_layers):
        x, _ = block_forward(x, params, config, layer, attn_mask)
        states.append(x)
    return states


def masked_cross_entropy(logits, targets, loss_mask):
    """Cross-entropy averaged over the positions selected by a 0/1 mask.

    loss = -sum_{b,t} m[b,t] log softmax(logits[b,t])[targets[b,t]] / sum_{b,t} m[b,t].
    Shapes: logits (B, T, V), targets (B, T) integer, loss_mask broadcasting to (B, T) (a (T,)
    row selects the same positions in every sequence). Returns (loss as a Python float, cache
    for ``masked_cross_entropy_backward``).
    """
    logits = np.asarray(logits)
    targets, weights = _loss_weights(
        "masked_cross_entropy", logits.shape, targets, loss_mask, logits.dtype
    )
    shifted = logits - max_last(logits)  # (B, T, V)
    probs = np.exp(shifted)
    total = sum_last(probs)  # (B, T, 1)
    probs /= total
    picked = np.take_along_axis(shifted, targets[..., None], axis=-1)[..., 0]  # (B, T)
    log_p = picked - np.log(total[..., 0])  # (B, T) log softmax at the target
    loss = -float(np.einsum("bt,bt->", weights, log_p))
    return loss, (probs, targets, weights)


def _loss_weights(fn, logits_shape, targets, loss_mask, dtype):
    """Targets (B, T) and the loss mask's weights m / sum(m) (B, T) for logits (B, T, V).

    A targets array of another shape would broadcast into a wrong loss, and a mask of
    weights other than 0/1 (or of no 1 at all) would average wrongly: both raise ValueError.
    """
    B, T, V = logits_shape
    targets, m = np.asarray(targets), np.asarray(loss_mask)
    if targets.shape != (B, T) or np.broadcast_shapes(m.shape, (B, T)) != (B, T):
        raise ValueError(
            f"{fn}: targets {targets.shape} and loss_mask {m.shape} must match the logits' "
            f"(B, T) = {(B, T)} (loss_mask may broadcast)"
        )
    weights = np.broadcast_to(m, (B, T)).astype(dtype)  # (B, T) a copy
    if not ((weights == 0) | (weights == 1)).all() or weights.sum() == 0:
        raise ValueError(f"{fn}: loss_mask of shape {m.shape} must hold 0/1 values, at least one 1")
    weights /= weights.sum()  # (B, T) sums to 1
    return targets, weights


def masked_cross_entropy_backward(cache):
    """dL/dlogits = (softmax(logits) - onehot(targets)) * m / sum(m). Returns (B, T, V)."""
    probs, targets, weights = cache
    B, T, V = probs.shape
    d = probs.copy()
    d.reshape(B * T, V)[np.arange(B * T), targets.ravel()] -= 1
    d *= weights[..., None]
    return d


def backward(d_logits, cache: DecoderCache) -> dict:
    """Hand-written gradients of every parameter, given dL/dlogits.

    The chain rule in reverse order of ``forward``. The token embedding's gradient accumulates
    one contribution per occurrence (a token repeated in the batch adds up, as with
    ``np.add.at``; computed as a one-hot matrix product); the position table's rows beyond T
    get zero. Returns {name: gradient} packed like the
    parameters (same names, shapes and dtype).
    """
    tokens, blocks, x_out, c_f, params, config = cache
    B, T = tokens.shape
    d, N = config.d_model, B * T
    grads = zeros_like_packed(params)
    g2 = d_logits.reshape(N, -1)  # (B T, V)
    np.matmul(x_out.reshape(N, d).T, g2, out=grads["W_out"])  # (d, V)
    sum_rows(g2, out=grads["b_out"])
    dx = (g2 @ params["W_out"].T).reshape(B, T, d)  # (B, T, d)
    if config.final_ln:
        dx = final_norm_backward(dx, c_f, grads)
    return _backward_blocks(dx, tokens, blocks, params, config, grads)


def _backward_blocks(dx, tokens, blocks, params, config, grads):
    """From dL/dx_L (B, T, d) back through the blocks to the embeddings; fills ``grads``."""
    B, T = tokens.shape
    d, N = config.d_model, B * T
    for layer in reversed(range(config.num_layers)):
        dx = block_backward(dx, blocks[layer], params, config, layer, grads)
    # dE[v] = sum of dx over the positions holding token v: a product with the one-hot matrix
    # of the tokens, which adds repeated tokens up exactly like np.add.at, several times faster
    if N * config.vocab_size <= 1 << 22:
        one_hot = tokens.reshape(N, 1) == np.arange(config.vocab_size)  # (N, vocab) bool
        np.matmul(one_hot.T.astype(dx.dtype), dx.reshape(N, d), out=grads["tok_emb"])
    else:  # a one-hot matrix this large would cost more than it saves
        np.add.at(grads["tok_emb"], tokens, dx)
    if config.positions == "learned":
        ones_b = cached_ones(B, dx.dtype, False)
        np.matmul(ones_b, dx.reshape(B, T * d), out=grads["pos_emb"][:T].reshape(T * d))
    return grads


def loss_and_grads(params: dict, config: DecoderConfig, tokens, targets, loss_mask, attn_mask=None):
    """Forward, masked cross-entropy and backward in one call. Returns (loss, grads).

    The same numbers as ``forward``, ``masked_cross_entropy`` and ``backward`` in turn (up to
    rounding), computed for training: the final layer norm and the output layer run only on
    the positions the loss mask selects. The other positions carry no loss, so their logits
    would only be computed to receive a zero gradient (half of the positions in chapter 10).
    """
    fn = "loss_and_grads"
    tokens = check_tokens(fn, "tokens", tokens, config)
    B, T = tokens.shape
    V, d, N = config.vocab_size, config.d_model, B * T
    dtype = params["tok_emb"].dtype
    targets, weights = _loss_weights(fn, (B, T, V), targets, loss_mask, dtype)
    x, blocks = _forward_blocks(params, config, tokens, attn_mask)  # (B, T, d)
    rows = np.flatnonzero(weights)  # (M,) the selected positions of the flattened (B T)
    M = rows.size
    w = weights.ravel()[rows]  # (M,) each 1 / M
    xs = x.reshape(N, d)[rows]  # (M, d)
    c_f = None
    if config.final_ln:
        xs, c_f = final_norm(xs, params, config)
    logits = xs @ params["W_out"]  # (M, V)
    logits += params["b_out"]
    logits -= max_last(logits)  # softmax cross-entropy, in place
    target = targets.ravel()[rows]  # (M,)
    picked = logits[np.arange(M), target]  # (M,) shifted logit of the target
    probs = np.exp(logits, out=logits)  # (M, V)
    total = sum_last(probs)  # (M, 1)
    loss = -float(w @ (picked - np.log(total[:, 0])))
    probs /= total
    d_logits = probs  # (M, V): (softmax - onehot) * w
    d_logits[np.arange(M), target] -= 1
    d_logits *= w[:, None]
    grads = zeros_like_packed(params)
    np.matmul(xs.T, d_logits, out=grads["W_out"])  # (d, V)
    sum_rows(d_logits, out=grads["b_out"])
    d_xs = d_logits @ params["W_out"].T  # (M, d)
    if config.final_ln:
        d_xs = final_norm_backward(d_xs, c_f, grads)
    dx = np.zeros((N, d), dtype=dtype)  # unselected positions: no gradient
    dx[rows] = d_xs
    return loss, _backward_blocks(dx.reshape(B, T, d), tokens, blocks, params, config, grads)


def loss(params: dict, config: DecoderConfig, tokens, targets, loss_mask, attn_mask=None):
    """The masked cross-entropy of the model on a batch (forward only). Returns a float."""
    logits, _ = forward(params, config, tokens, attn_mask)
    return masked_cross_entropy(logits, targets, loss_mask)[0]


def ffn_preactivations(cache: DecoderCache) -> list:
    """The feed-forward pre-activations x W_1 + b_1 of every block, (B, T, d_ff) each."""
    return [block.ffn.pre for block in cache.blocks]
