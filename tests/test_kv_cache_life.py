"""The cache's life after reset: a sliding window when it is full, and ragged batches.

Chapter 09's deeper page ``chapters/09_deeper_cache_life.ipynb``: a ``RollingKVCache`` of W
slots (``decoder_cache(..., window=W)``) decodes like the uncached forward with a banded causal
mask, in W slots however long the sequence; a left-padded batch (``left_padding_mask`` and
per-row positions) decodes every row like its prompt alone, and never reads a pad.
"""

import tracemalloc

import numpy as np
import pytest

from npformer.core.kv_cache import RollingKVCache, kv_cache_bytes
from npformer.core.masks import left_padding_mask, sliding_window_mask
from npformer.core.model import (
    POSITION_SCHEMES,
    DecoderConfig,
    decoder_cache,
    forward,
    generate_greedy_with_cache,
    init_params,
)
from npformer.core.positions import sinusoidal_positions
from npformer.training.train import generate

ABSOLUTE = ("learned", "sinusoidal")


def _decoder(positions="rope", ln="pre", seed=0):
    """11 tokens, d = 16, 4 heads, 2 blocks, a position table of 12 rows."""
    config = DecoderConfig(11, 16, 4, 2, 32, 12, ln=ln, positions=positions)
    params = init_params(config, np.random.default_rng(seed))
    # larger embeddings than the initialization's, so that positions change the argmax
    return config, {k: (3 * v if k in ("tok_emb", "pos_emb") else v) for k, v in params.items()}


def _window_steps(params, config, tokens, window, prefill):
    """Logits of a prefill, then one token per pass, through a window cache of W slots."""
    cache = decoder_cache(config, tokens.shape[0], window=window)
    parts = [forward(params, config, tokens[:, :prefill], cache=cache)[0]]
    for t in range(prefill, tokens.shape[1]):
        parts.append(forward(params, config, tokens[:, t : t + 1], cache=cache)[0])
    return np.concatenate(parts, axis=1), cache  # (B, T, vocab)


# --- the sliding window --------------------------------------------------------------------


@pytest.mark.parametrize("ln", ["pre", "post"])
@pytest.mark.parametrize("positions", POSITION_SCHEMES)
def test_sliding_window_cache_equals_the_banded_uncached_forward(positions, ln):
    """Over 4 W steps (the learned table stops at its 12 rows), in float64."""
    config, params = _decoder(positions, ln)
    window = 5
    T = 12 if positions == "learned" else 4 * window
    tokens = np.random.default_rng(1).integers(0, 11, size=(2, T))
    banded, _ = forward(params, config, tokens, attn_mask=sliding_window_mask(T, window))
    cached, cache = _window_steps(params, config, tokens, window, prefill=3)
    assert cache.length == T
    assert np.abs(cached - banded).max() < 1e-12
    causal, _ = forward(params, config, tokens)  # the band matters: not the full causal pass
    assert np.abs(causal[:, window:] - banded[:, window:]).max() > 1e-3


def test_sliding_window_cache_keeps_its_w_slot_bytes_however_long_the_sequence():
    config, params = _decoder("alibi")
    window, B = 4, 2
    cache = decoder_cache(config, B, window=window)
    K, V = cache.K, cache.V
    slot_bytes = kv_cache_bytes(config.num_layers, config.num_heads, config.d_head, window, B, 8)
    tokens = np.random.default_rng(2).integers(0, 11, size=(B, 40))
    forward(params, config, tokens[:, :window], cache=cache)
    for t in range(window, 40):
        forward(params, config, tokens[:, t : t + 1], cache=cache)
        assert cache.nbytes == slot_bytes  # W slots at step 40 as at step W
    assert cache.K is K and cache.V is V  # written in place, never reallocated
    assert cache.length == 40 and cache.K.shape[3] == window


def test_window_slots_hold_the_last_w_positions():
    cache = RollingKVCache(1, 1, 1, 4, 2)
    K = np.arange(10, dtype=float).reshape(1, 1, 10, 1) * np.ones(2)  # key of position p = p
    cache.write(0, K[:, :, :3], K[:, :, :3])
    cache.advance(3)
    for p in range(3, 10):
        keys, _ = cache.write(0, K[:, :, p : p + 1], K[:, :, p : p + 1])
        expected = cache.key_positions(1)
        cache.advance(1)
        assert np.array_equal(keys[0, 0, :, 0], expected)  # slot j holds what it says
        assert sorted(expected) == list(range(max(p - 3, 0), p + 1))  # the last 4 positions


def _bytes_allocated(step):
    """Peak bytes that ``step()`` allocates (NumPy reports its arrays to tracemalloc)."""
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_sinusoidal_step_at_a_far_position_allocates_only_its_own_rows():
    """One token at position 10**6 costs what a token at position 10 costs, not a table of
    10**6 rows (128 MB here): the rows are computed at their positions, cached or per-row."""
    config, params = _decoder("sinusoidal")
    far = 10**6

    def one_step(position):
        cache = decoder_cache(config, 1, window=4)
        forward(params, config, np.zeros((1, 4), int), cache=cache)
        cache.advance(position - 4)  # as after `position` tokens: the slots are full
        return _bytes_allocated(lambda: forward(params, config, np.zeros((1, 1), int), cache=cache))

    near_bytes = one_step(10)
    assert one_step(far) < 2 * near_bytes + 4096  # the same handful of small arrays
    tokens = np.zeros((2, 3), int)
    per_row = np.array([[far, far + 1, far + 2], [7, 8, 9]])  # (B, T) positions
    rows_bytes = _bytes_allocated(lambda: forward(params, config, tokens, positions=per_row))
    assert rows_bytes < 2 * _bytes_allocated(lambda: forward(params, config, tokens)) + 4096


def test_sinusoidal_rows_equal_the_table_at_any_start():
    """The model's sinusoidal rows are those of ``sinusoidal_positions`` bit for bit: a learned
    table set to the sinusoids gives the same logits, uncached, cached and per-row."""
    config, params = _decoder("sinusoidal")
    n = 3000
    table_config = DecoderConfig(11, 16, 4, 2, 32, n, positions="learned")
    table_params = dict(params, pos_emb=sinusoidal_positions(n, 16))
    tokens = np.random.default_rng(4).integers(0, 11, size=(2, 5))
    rows = np.array([[2990, 2991, 2992, 2993, 2994], [0, 1, 2, 3, 4]])
    for kwargs in ({}, {"positions": rows}, {"positions": rows[0]}):
        a, _ = forward(params, config, tokens, **kwargs)
        b, _ = forward(table_params, table_config, tokens, **kwargs)
        assert np.array_equal(a, b)
    cached = []
    for model in ((params, config), (table_params, table_config)):
        cache = decoder_cache(model[1], 2, window=4)
        forward(*model, tokens[:, :4], cache=cache)
        cache.advance(2990)  # the fifth token at position 2994
        cached.append(forward(*model, tokens[:, 4:], cache=cache)[0])
    assert np.array_equal(cached[0], cached[1])


@pytest.mark.parametrize("positions", ["rope", "alibi", "sinusoidal", "none"])
def test_a_window_decodes_past_max_len_except_with_a_learned_table(positions):
    config, params = _decoder(positions)
    start = np.random.default_rng(3).integers(0, 11, size=(3, 4))
    tokens = generate_greedy_with_cache(params, config, start, 20, window=6)  # 23 > 12 rows
    expected = generate(
        lambda t: forward(params, config, t, attn_mask=sliding_window_mask(t.shape[1], 6))[0],
        start,
        20,
    )
    assert np.array_equal(tokens, expected)
    learned, learned_params = _decoder("learned")
    with pytest.raises(ValueError, match="num_new=20 need 23 positions.*sliding window"):
        generate_greedy_with_cache(learned_params, learned, start, 20, window=6)
    cache = decoder_cache(learned, 3, window=6)
    forward(learned_params, learned, np.zeros((3, 6), int), cache=cache)
    for _ in range(6):
        forward(learned_params, learned, np.zeros((3, 1), int), cache=cache)
    with pytest.raises(ValueError, match="outside the 12 rows.*sliding window does not lift"):
        forward(learned_params, learned, np.zeros((3, 1), int), cache=cache)


def test_window_errors_name_the_arguments():
    config, params = _decoder()
    cache = decoder_cache(config, 2, window=4)
    forward(params, config, np.zeros((2, 3), int), cache=cache)
    with pytest.raises(ValueError, match=r"4 slots holding 3 positions takes at most 1 .* got 2"):
        forward(params, config, np.zeros((2, 2), int), cache=cache)
    with pytest.raises(ValueError, match="max_len=4 or window=4 >= 1, not both"):
        decoder_cache(config, 2, 4, window=4)
    with pytest.raises(ValueError, match="window=0 >= 1"):
        decoder_cache(config, 2, window=0)
    with pytest.raises(ValueError, match=r"window=2 must hold the prompt.*\(1, 3\)"):
        generate_greedy_with_cache(params, config, np.zeros((1, 3), int), 2, window=2)
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        sliding_window_mask(4, 0)


# --- ragged batches -------------------------------------------------------------------------


def _left_pad(prompts, pad_id=0):
    """(tokens (B, P), pad (B,)): each prompt right-aligned after pad_id tokens."""
    P = max(len(p) for p in prompts)
    tokens = np.full((len(prompts), P), pad_id, dtype=np.int64)
    for b, p in enumerate(prompts):
        tokens[b, P - len(p) :] = p
    return tokens, P - np.array([len(p) for p in prompts])


def _ragged_logits(params, config, tokens, pad, steps):
    """Logits of a left-padded prefill then of ``steps`` (B, n) teacher-forced tokens."""
    cache = decoder_cache(config, tokens.shape[0], tokens.shape[1] + steps.shape[1])
    parts = []
    for new in [tokens] + [steps[:, t : t + 1] for t in range(steps.shape[1])]:
        n, start = new.shape[1], cache.length
        mask = left_padding_mask(pad, start, n)  # (B, 1, n, S)
        positions = None
        if config.positions in ABSOLUTE:
            positions = np.maximum(np.arange(start, start + n) - pad[:, None], 0)  # (B, n)
        parts.append(forward(params, config, new, mask, cache, positions)[0])
    return np.concatenate(parts, axis=1)  # (B, P + steps, vocab)


def _prompts(rng):
    return [rng.integers(1, 11, size=n) for n in (3, 7, 1, 5)]


@pytest.mark.parametrize("ln", ["pre", "post"])
@pytest.mark.parametrize("positions", POSITION_SCHEMES)
def test_each_row_of_a_ragged_batch_decodes_like_its_prompt_alone(positions, ln):
    config, params = _decoder(positions, ln)
    rng = np.random.default_rng(4)
    prompts = _prompts(rng)
    tokens, pad = _left_pad(prompts)
    lengths = np.array([len(p) for p in prompts])
    ragged = generate_greedy_with_cache(params, config, tokens, 5, prompt_lengths=lengths)
    steps = rng.integers(0, 11, size=(len(prompts), 4))  # the same next tokens for both
    logits = _ragged_logits(params, config, tokens, pad, steps)
    for b, prompt in enumerate(prompts):
        alone = generate_greedy_with_cache(params, config, prompt[None], 5)
        assert np.array_equal(ragged[b], alone[0])
        sequence = np.concatenate([prompt, steps[b]])[None]  # (1, len + 4)
        alone_logits, _ = forward(params, config, sequence)
        assert np.abs(logits[b, pad[b] :] - alone_logits[0]).max() < 1e-12


@pytest.mark.parametrize("positions", POSITION_SCHEMES)
def test_padded_slots_are_never_attended_to(positions):
    """Any pad token gives the same logits at every real position: the pads are unseen."""
    config, params = _decoder(positions)
    rng = np.random.default_rng(5)
    prompts = _prompts(rng)
    steps = rng.integers(0, 11, size=(len(prompts), 3))
    runs = []
    for pad_id in (0, 9):
        tokens, pad = _left_pad(prompts, pad_id)
        runs.append(_ragged_logits(params, config, tokens, pad, steps))
    real = np.arange(runs[0].shape[1])[None, :] >= pad[:, None]  # (B, P + 3)
    assert np.abs(runs[0] - runs[1])[real].max() < 1e-12


def test_ragged_errors_name_the_arguments():
    config, params = _decoder("rope")
    start = np.zeros((2, 4), int)
    with pytest.raises(ValueError, match=r"prompt_lengths must be 2 integers in \[1, 4\]"):
        generate_greedy_with_cache(params, config, start, 2, prompt_lengths=[5, 1])
    with pytest.raises(ValueError, match=r"prompt_lengths must be 2 .* shape \(3,\)"):
        generate_greedy_with_cache(params, config, start, 2, prompt_lengths=[1, 2, 3])
    with pytest.raises(ValueError, match=r"positions of shape \(2, 4\).*rope depends only"):
        forward(params, config, start, positions=np.zeros((2, 4), int))
    with pytest.raises(ValueError, match="not combined with prompt_lengths"):
        generate_greedy_with_cache(params, config, start, 2, window=4, prompt_lengths=[1, 2])
    with pytest.raises(ValueError, match=r"pad count must lie in \[0, start \+ n = 4\)"):
        left_padding_mask([4, 0], 0, 4)


@pytest.mark.parametrize("offset", [10_000, 1_000_000])
def test_alibi_under_shifted_positions_reads_the_same_distances(offset):
    """Position ids shifted by an offset shift ALiBi's keys with its queries: the integer
    distances, and so the float32 logits, are exactly the unshifted ones, in one pass and
    through the cache. (Keys left at their slots put a constant of about slope x offset on
    every score, which float32 rounds.)"""
    config, params = _decoder("alibi")
    params = {k: v.astype(np.float32) for k, v in params.items()}
    tokens = np.random.default_rng(4).integers(0, 11, size=(2, 10))
    base = forward(params, config, tokens)[0]  # (2, 10, 11)
    shifted = forward(params, config, tokens, positions=np.arange(10) + offset)[0]
    assert np.array_equal(shifted, base)
    cache = decoder_cache(config, 2, dtype=np.float32)
    steps = [
        forward(params, config, tokens[:, :6], cache=cache, positions=np.arange(6) + offset)[0]
    ]
    for t in range(6, 10):
        positions = np.array([t + offset])
        steps.append(
            forward(params, config, tokens[:, t : t + 1], cache=cache, positions=positions)[0]
        )
    np.testing.assert_allclose(np.concatenate(steps, axis=1), base, atol=1e-5)
