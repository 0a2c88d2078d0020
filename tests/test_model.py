"""The decoder-only model and Adam (chapter 06): gradients three ways, counts, bad inputs."""

import dataclasses

import numpy as np
import pytest

from npformer.core import model as M
from npformer.core.gradcheck import (
    central_difference,
    kink_crossed,
    normwise_relative_error,
    select_coordinates,
)
from npformer.core.optim import Adam, flat_buffer, pack
from tests.tiny_decoder import TINY


def tiny_batch(rng, B=2, T=5, vocab=7, repeated=False):
    tokens = np.full((B, T), 3) if repeated else rng.integers(0, vocab, size=(B, T))
    targets = rng.integers(0, vocab, size=(B, T))
    loss_mask = np.zeros(T)
    loss_mask[T // 2 :] = 1.0
    return tokens, targets, loss_mask


def perturbed_params(config, rng):
    """Random parameters with non-trivial layer-norm scales and biases (zeros hide bugs)."""
    params = M.init_params(config, rng)
    for name, p in params.items():
        if not name.endswith("W_qkv") and p.ndim == 1:
            p += 0.2 * rng.normal(size=p.shape)
    return params


def check_all_coordinates(config, params, tokens, targets, loss_mask, eps=1e-6):
    """Every coordinate: |numeric - analytic| <= 1e-5 |analytic| + 1e-8, kinks excepted."""
    loss, grads = M.loss_and_grads(params, config, tokens, targets, loss_mask)
    f = lambda: M.loss(params, config, tokens, targets, loss_mask)

    def preactivations():
        cache = M.forward(params, config, tokens)[1]
        return np.concatenate([a.ravel() for a in M.ffn_preactivations(cache)])

    checked = 0
    for name, g in grads.items():
        flat, g_flat = params[name].reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            numeric = central_difference(f, flat, i, eps)[0]
            if abs(numeric - g_flat[i]) > 1e-5 * abs(g_flat[i]) + 1e-8:
                assert config.activation == "relu" and kink_crossed(preactivations, flat, i, eps), (
                    f"{name}[{i}]: analytic {g_flat[i]:.6e}, numeric {numeric:.6e}"
                )
            checked += 1
    assert checked == M.num_params(config)
    return grads


@pytest.mark.parametrize("ln", ["pre", "post"])
@pytest.mark.parametrize("scale", [True, False])
def test_gradient_check_tiny(ln, scale):
    rng = np.random.default_rng(11)
    config = M.DecoderConfig(**TINY, ln=ln, scale=scale)
    check_all_coordinates(config, perturbed_params(config, rng), *tiny_batch(rng))


@pytest.mark.parametrize(
    "case",
    [
        dict(repeated=True),  # one token everywhere
        dict(B=1),
        dict(T=1),
        dict(activation="gelu"),
        dict(activation="swiglu"),
        dict(positions=False, final_ln=False),
    ],
)
def test_gradient_check_special_cases(case):
    rng = np.random.default_rng(12)
    case = dict(case)
    batch = {k: case.pop(k) for k in ("repeated", "B", "T") if k in case}
    config = M.DecoderConfig(**TINY, **case)
    tokens, targets, loss_mask = tiny_batch(rng, **batch)
    if batch.get("T") == 1:
        loss_mask = np.ones(1)
    grads = check_all_coordinates(config, perturbed_params(config, rng), tokens, targets, loss_mask)
    if batch.get("repeated"):  # only row 3 of the table moves
        assert np.all(np.delete(grads["tok_emb"], 3, axis=0) == 0)
        assert np.any(grads["tok_emb"][3] != 0)
    if config.positions:
        assert np.all(grads["pos_emb"][tokens.shape[1] :] == 0)


def test_parameter_counts():
    for d, expected in ((64, 49_984), (256, 789_760), (512, 3_152_384)):
        config = M.DecoderConfig(32, d, 8, 1, 4 * d, 16)
        shapes = M.block_parameter_shapes(config, 0)
        assert sum(int(np.prod(s)) for s in shapes.values()) == expected == 12 * d * d + 13 * d
        assert M.block_num_params(config) == expected
        # chapter 06: the matrices hold 12 d^2, the vectors 13 d
        matrices = sum(int(np.prod(s)) for s in shapes.values() if len(s) == 2)
        vectors = sum(int(np.prod(s)) for s in shapes.values() if len(s) == 1)
        assert (matrices, vectors) == (12 * d * d, 13 * d)
    experiment = M.DecoderConfig(21, 32, 4, 2, 128, 13)
    params = M.init_params(experiment, np.random.default_rng(0), np.float32)
    assert sum(p.size for p in params.values()) == M.num_params(experiment) == 27_253
    for options in (dict(positions=False), dict(final_ln=False), dict(activation="swiglu")):
        config = M.DecoderConfig(**TINY, **options)
        params = M.init_params(config, np.random.default_rng(0))
        assert sum(p.size for p in params.values()) == M.num_params(config)


def test_params_are_packed_and_float32_stays_float32():
    config = M.DecoderConfig(**TINY)
    rng = np.random.default_rng(13)
    params = M.init_params(config, rng, np.float32)
    assert flat_buffer(params) is not None
    tokens, targets, loss_mask = tiny_batch(rng)
    logits, cache = M.forward(params, config, tokens)
    assert logits.dtype == np.float32
    assert all(b.attn.weights.dtype == np.float32 for b in cache.blocks)
    loss, grads = M.loss_and_grads(params, config, tokens, targets, loss_mask)
    assert all(g.dtype == np.float32 for g in grads.values())
    assert flat_buffer(grads) is not None
    params64 = {n: p.astype(np.float64) for n, p in params.items()}
    _, grads64 = M.loss_and_grads(params64, config, tokens, targets, loss_mask)
    assert normwise_relative_error(grads, grads64) < 1e-5


def test_causal_and_explicit_masks():
    config = M.DecoderConfig(**TINY)
    rng = np.random.default_rng(14)
    params = M.init_params(config, rng)
    tokens = rng.integers(0, 7, size=(2, 5))
    logits, _ = M.forward(params, config, tokens)
    changed = tokens.copy()
    changed[:, 3] = (changed[:, 3] + 1) % 7  # the future cannot leak back
    np.testing.assert_array_equal(M.forward(params, config, changed)[0][:, :3], logits[:, :3])
    causal = np.tril(np.ones((5, 5), dtype=bool))
    np.testing.assert_allclose(M.forward(params, config, tokens, causal)[0], logits, atol=1e-14)
    both_ways = M.forward(params, config, tokens, np.ones((5, 5), dtype=bool))[0]
    assert not np.allclose(both_ways[:, :3], logits[:, :3])


def test_loss_mask_row_or_matrix():
    config = M.DecoderConfig(**TINY)
    rng = np.random.default_rng(15)
    params = M.init_params(config, rng)
    tokens, targets, row = tiny_batch(rng)
    full = np.broadcast_to(row, tokens.shape).astype(bool)
    assert M.loss(params, config, tokens, targets, row) == M.loss(
        params, config, tokens, targets, full
    )
    logits, _ = M.forward(params, config, tokens)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_p, targets[..., None], -1)[..., 0]
    assert M.loss(params, config, tokens, targets, row) == pytest.approx(-picked[full].mean())


# ----------------------------------------------------------------------------- torch twin

TWIN_CASES = [
    dict(),
    dict(ln="post"),
    dict(scale=False),
    dict(ln="post", scale=False, activation="gelu"),
    dict(activation="swiglu"),
    dict(positions=False, final_ln=False),
]


def twin_of(params, config, torch):
    from tests.torch_twin import TorchDecoder

    return TorchDecoder(
        {n: p.copy() for n, p in params.items()},
        config.num_heads,
        config.num_layers,
        config.ln,
        config.scale,
        config.activation,
        config.positions,
        config.final_ln,
        config.ln_eps,
    )


@pytest.mark.parametrize("case", TWIN_CASES)
def test_gradients_match_torch_twin(case):
    torch = pytest.importorskip("torch")
    config = M.DecoderConfig(21, 16, 4, 2, 64, 13, **case)
    rng = np.random.default_rng(16)
    params = perturbed_params(config, rng)
    tokens = rng.integers(0, 21, size=(3, 12))
    targets = rng.integers(0, 21, size=(3, 12))
    loss_mask = np.r_[np.zeros(6), np.ones(6)]
    loss, grads = M.loss_and_grads(params, config, tokens, targets, loss_mask)
    twin = twin_of(params, config, torch)
    loss_t = twin.loss(torch.tensor(tokens), torch.tensor(targets), torch.tensor(loss_mask))
    loss_t.backward()
    assert abs(loss - loss_t.item()) <= 1e-13 * abs(loss)
    assert normwise_relative_error(grads, twin.grads()) < 1e-12


@pytest.mark.parametrize("case", [dict(), dict(ln="post", scale=False)])
def test_training_matches_torch_twin(case):
    torch = pytest.importorskip("torch")
    config = M.DecoderConfig(21, 16, 4, 2, 64, 13, **case)
    rng = np.random.default_rng(17)
    params = M.init_params(config, rng)
    twin = twin_of(params, config, torch)
    opt = Adam(params, lr=3e-3)
    opt_t = torch.optim.Adam(twin.parameters(), lr=3e-3)
    loss_mask = np.r_[np.zeros(6), np.ones(6)]
    for _ in range(40):
        tokens = rng.integers(0, 21, size=(4, 12))
        targets = np.roll(tokens, -1, axis=1)
        loss, grads = M.loss_and_grads(params, config, tokens, targets, loss_mask)
        opt.step(grads)
        opt_t.zero_grad()
        loss_t = twin.loss(torch.tensor(tokens), torch.tensor(targets), torch.tensor(loss_mask))
        loss_t.backward()
        opt_t.step()
        assert abs(loss - loss_t.item()) <= 1e-9 * abs(loss)


# ----------------------------------------------------------------------------- Adam


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adam_matches_torch(packed, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(18)
    arrays = {"a": rng.normal(size=(3, 4)), "b": rng.normal(size=5)}
    params = (
        pack(arrays, dtype=dtype) if packed else {n: a.astype(dtype) for n, a in arrays.items()}
    )
    assert (flat_buffer(params) is not None) == packed
    tensors = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays.values()]
    opt = Adam(params, lr=1e-2, betas=(0.8, 0.99), eps=1e-7)
    opt_t = torch.optim.Adam(tensors, lr=1e-2, betas=(0.8, 0.99), eps=1e-7)
    for step in range(25):
        grads = {n: rng.normal(size=a.shape).astype(dtype) for n, a in arrays.items()}
        if step % 2:
            grads = pack(grads)  # packed or not, step by step
        opt.step(grads)
        for t, g in zip(tensors, grads.values(), strict=True):
            t.grad = torch.tensor(g)
        opt_t.step()
    tol = 1e-14 if dtype == np.float64 else 1e-6
    for p, t in zip(params.values(), tensors, strict=True):
        assert p.dtype == dtype
        np.testing.assert_allclose(p, t.detach().numpy(), atol=tol)


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (5,)), ((4,), (2, 2))])
def test_adam_aligns_packed_gradients_by_name(shapes):
    """Gradients packed in another order than the parameters go to the parameter of their name:
    the same result as unpacked dicts, step after step (the flat buffers are NOT paired by
    position, which would swap the two updates)."""
    rng = np.random.default_rng(40)
    arrays = {"a": rng.normal(size=shapes[0]), "b": rng.normal(size=shapes[1])}
    packed = pack(arrays)
    plain = {n: a.copy() for n, a in arrays.items()}
    opt_packed, opt_plain = Adam(packed, lr=0.1), Adam(plain, lr=0.1)
    for _ in range(3):
        g = {"b": rng.normal(size=shapes[1]), "a": rng.normal(size=shapes[0])}  # reversed order
        reordered = pack(g)
        assert flat_buffer(reordered) is not None and list(reordered) == ["b", "a"]
        opt_packed.step(reordered)
        opt_plain.step(g)
        for name in arrays:
            np.testing.assert_array_equal(packed[name], plain[name])
    assert flat_buffer(packed) is not None  # the parameters stay packed, updated in place
    # and the packed fast path, same order, gives the same numbers as the name-by-name loop
    p1, p2 = pack(arrays), pack(arrays)
    o1, o2 = Adam(p1, lr=0.1), Adam(p2, lr=0.1)
    g = pack({"a": rng.normal(size=shapes[0]), "b": rng.normal(size=shapes[1])})
    o1.step(g)
    o2.step(dict(g))  # a plain dict: not a flat buffer, so the loop runs
    assert all(np.array_equal(p1[n], p2[n]) for n in arrays)


@pytest.mark.parametrize("packed", [True, False])
def test_adam_fill_second_moment_leaves_m_at_zero(packed):
    """After k gradients folded into v only, the first step starts m from zero (bias-corrected
    as a first step) and divides by v bias-corrected over k + 1 gradients (Adam-2k)."""
    rng = np.random.default_rng(41)
    start = {"a": rng.normal(size=(2, 3)), "b": rng.normal(size=4)}
    params = pack(start) if packed else {n: a.copy() for n, a in start.items()}
    opt = Adam(params, lr=0.1, betas=(0.9, 0.98), eps=1e-9)
    filled = [{n: rng.normal(size=a.shape) for n, a in start.items()} for _ in range(5)]
    for g in filled:
        opt.fill_second_moment(g)
    assert all(np.array_equal(params[n], start[n]) for n in start)  # no weight moved
    g = {n: rng.normal(size=a.shape) for n, a in start.items()}
    opt.step(g)
    for n in start:
        v = sum(0.02 * 0.98 ** (4 - k) * f[n] ** 2 for k, f in enumerate(filled))
        v = 0.98 * v + 0.02 * g[n] ** 2
        expected = start[n] - 0.1 * g[n] / (np.sqrt(v / (1 - 0.98**6)) + 1e-9)
        np.testing.assert_allclose(params[n], expected, rtol=1e-12)


def test_adam_bad_inputs():
    params = pack({"a": np.zeros(3)})
    with pytest.raises(ValueError, match="betas"):
        Adam(params, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match=r"lr=-1.0 and eps=1e-08 must be > 0"):
        Adam(params, lr=-1.0)
    with pytest.raises(ValueError, match=r"params \['a'\] must be ndarrays"):
        Adam({"a": [0.0, 0.0]})
    with pytest.raises(ValueError, match=r"gradients \['a'\] do not have"):
        Adam(params).step({"a": np.zeros(2)})


# ----------------------------------------------------------------------------- bad inputs


def test_config_bad_inputs():
    with pytest.raises(ValueError, match="d_model=10 must be a positive multiple of num_heads=4"):
        M.DecoderConfig(7, 10, 4, 1, 16, 6)
    with pytest.raises(ValueError, match="ln must be one of"):
        M.DecoderConfig(**TINY, ln="middle")
    with pytest.raises(ValueError, match="activation"):
        M.DecoderConfig(**TINY, activation="tanh")


def test_forward_and_loss_bad_inputs():
    config = M.DecoderConfig(**TINY)
    rng = np.random.default_rng(19)
    params = M.init_params(config, rng)
    tokens, targets, loss_mask = tiny_batch(rng)
    with pytest.raises(ValueError, match=r"\[-1, 0\]"):
        M.forward(params, config, np.where(tokens == tokens[0, 0], -1, 0))
    with pytest.raises(
        ValueError, match=r"mask of shape \(4, 4\) does not broadcast.*\(2, 2, 5, 5\)"
    ):
        M.forward(params, config, tokens, np.ones((4, 4), dtype=bool))
    with pytest.raises(ValueError, match="0/1 values"):
        M.loss(params, config, tokens, targets, np.full(5, 0.5))
    bad = dict(params)
    bad["W_out"] = np.zeros((8, 6))
    logits, cache = M.forward(params, config, tokens)


def test_select_coordinates_subset_is_seeded():
    grads = {"a": np.linspace(-1, 1, 50), "b": np.zeros(4)}
    every = select_coordinates(grads, 1e-6)
    assert set(every) == {"a"} and every["a"].size == 50 - (np.abs(grads["a"]) <= 1e-6).sum()
    some = select_coordinates(grads, 1e-6, per_tensor=10, rng=np.random.default_rng(0))
    again = select_coordinates(grads, 1e-6, per_tensor=10, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(some["a"], again["a"])
    assert some["a"].size == 10 and set(some["a"]) <= set(every["a"])


def test_flat_buffer_sees_through_changes_and_copies():
    import copy

    params = pack({"a": np.zeros((2, 3)), "b": np.ones(4)})
    buffer = flat_buffer(params)
    assert buffer is not None and buffer.size == 10
    assert flat_buffer(dict(params)) is buffer  # a plain dict of the same views
    assert flat_buffer(copy.deepcopy(params)) is None  # copies are no longer views
    changed = pack({"a": np.zeros((2, 3)), "b": np.ones(4)})
    changed["b"] = np.ones(4)
    assert flat_buffer(changed) is None
    reordered = {"b": params["b"], "a": params["a"]}
    assert flat_buffer(reordered) is None


# ----------------------------------------------------------------------------- training path


@pytest.mark.parametrize(
    "options", [dict(), dict(ln="post", scale=False), dict(final_ln=False, positions=False)]
)
def test_loss_and_grads_equals_forward_loss_backward(options):
    """The fused training path (output layer on the selected positions only) computes the same
    loss and gradients as forward, masked_cross_entropy and backward in turn."""
    config = M.DecoderConfig(**TINY, **options)
    rng = np.random.default_rng(21)
    params = perturbed_params(config, rng)
    tokens, targets, _ = tiny_batch(rng, B=3, T=6)
    loss_mask = rng.integers(0, 2, size=(3, 6))  # an irregular selection, per sequence
    loss_mask[0, 0] = 1
    both_ways = np.ones((6, 6), dtype=bool)
    for attn_mask in (None, both_ways):
        logits, cache = M.forward(params, config, tokens, attn_mask)
        expected_loss, c_loss = M.masked_cross_entropy(logits, targets, loss_mask)
        expected = M.backward(M.masked_cross_entropy_backward(c_loss), cache)
        loss, grads = M.loss_and_grads(params, config, tokens, targets, loss_mask, attn_mask)
        assert loss == pytest.approx(expected_loss, rel=1e-13)
        assert normwise_relative_error(grads, expected) < 1e-13
        assert flat_buffer(grads) is not None


def test_hidden_states_are_the_residual_stream():
    config = M.DecoderConfig(**TINY)
    rng = np.random.default_rng(22)
    params = perturbed_params(config, rng)
    tokens = rng.integers(0, 7, size=(2, 5))
    states = M.hidden_states(params, config, tokens)
    assert len(states) == config.num_layers + 1 and all(s.shape == (2, 5, 8) for s in states)
    np.testing.assert_array_equal(states[0], params["tok_emb"][tokens] + params["pos_emb"][:5])
    last = (states[-1] - states[-1].mean(-1, keepdims=True)) / np.sqrt(
        states[-1].var(-1, keepdims=True) + config.ln_eps
    )
    last = last * params["ln_f.gamma"] + params["ln_f.beta"]
    logits = last @ params["W_out"] + params["b_out"]
    np.testing.assert_allclose(logits, M.forward(params, config, tokens)[0], atol=1e-12)


# ----------------------------------------------------------------------------- position schemes

SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")


@pytest.mark.parametrize(
    "positions, ln, rope_scale",
    [(s, "pre", 1.0) for s in SCHEMES]
    + [("rope", "post", 1.0), ("alibi", "post", 1.0), ("rope", "pre", 0.375)],
)
def test_gradient_check_every_position_scheme(positions, ln, rope_scale):
    rng = np.random.default_rng(31)
    config = M.DecoderConfig(**TINY, ln=ln, positions=positions, rope_scale=rope_scale)
    grads = check_all_coordinates(config, perturbed_params(config, rng), *tiny_batch(rng))
    assert ("pos_emb" in grads) == (positions == "learned")


def test_gradient_check_position_schemes_with_an_explicit_mask():
    """RoPE and ALiBi through the masked (non-causal-fast-path) branch of the core."""
    rng = np.random.default_rng(32)
    mask = np.tril(np.ones((5, 5), dtype=bool))
    mask[:2, :2] = True  # a bidirectional prompt of two tokens
    for positions in ("rope", "alibi"):  # each f is used before the loop moves on
        config = M.DecoderConfig(**TINY, positions=positions)
        params = perturbed_params(config, rng)
        tokens, targets, loss_mask = tiny_batch(rng)
        _, grads = M.loss_and_grads(params, config, tokens, targets, loss_mask, mask)
        f = lambda: M.loss(params, config, tokens, targets, loss_mask, mask)  # noqa: B023
        for name in ("block0.attn.W_qkv", "block1.attn.b_qkv", "tok_emb"):
            flat, g = params[name].reshape(-1), grads[name].reshape(-1)
            for i in range(0, flat.size, 3):
                numeric = central_difference(f, flat, i, 1e-6)[0]
                assert abs(numeric - g[i]) <= 1e-5 * abs(g[i]) + 1e-8, (positions, name, i)


def reference_logits(params, config, tokens):
    """The pre-LN decoder written again from the public functions of the package, one per step."""
    from npformer.core.attention import scaled_dot_product_attention
    from npformer.core.block import feed_forward, layer_norm
    from npformer.core.masks import causal_mask
    from npformer.core.multi_head import merge_heads, split_heads
    from npformer.core.positions import alibi_bias, apply_rope, sinusoidal_positions

    B, T = tokens.shape
    d, h = config.d_model, config.num_heads
    x = params["tok_emb"][tokens]
    if config.positions == "learned":
        x = x + params["pos_emb"][:T]
    elif config.positions == "sinusoidal":
        x = x + sinusoidal_positions(T, d)
    for layer in range(config.num_layers):
        q = f"block{layer}."
        n1 = layer_norm(x, params[q + "ln1.gamma"], params[q + "ln1.beta"])[0]
        qkv = n1 @ params[q + "attn.W_qkv"] + params[q + "attn.b_qkv"]
        Q, K, V = (split_heads(qkv[..., i * d : (i + 1) * d], h) for i in range(3))
        if config.positions == "rope":
            turned = np.arange(T) * config.rope_scale  # (T,) the positions RoPE turns by
            Q, K = apply_rope(Q, turned), apply_rope(K, turned)
        bias = alibi_bias(h, T) if config.positions == "alibi" else None
        ctx = scaled_dot_product_attention(Q, K, V, causal_mask(T), bias=bias)[0]
        x = x + merge_heads(ctx) @ params[q + "attn.W_o"] + params[q + "attn.b_o"]
        n2 = layer_norm(x, params[q + "ln2.gamma"], params[q + "ln2.beta"])[0]
        ffn = {n: params[q + "ffn." + n] for n in ("W_1", "b_1", "W_2", "b_2")}
        x = x + feed_forward(n2, ffn)[0]
    x = layer_norm(x, params["ln_f.gamma"], params["ln_f.beta"])[0]
    return x @ params["W_out"] + params["b_out"]


@pytest.mark.parametrize("positions, rope_scale", [(s, 1.0) for s in SCHEMES] + [("rope", 0.25)])
def test_every_scheme_matches_a_composition_of_the_public_functions(positions, rope_scale):
    config = M.DecoderConfig(**TINY, positions=positions, rope_scale=rope_scale)
    rng = np.random.default_rng(33)
    params = perturbed_params(config, rng)
    tokens = rng.integers(0, 7, size=(3, 6))
    logits, _ = M.forward(params, config, tokens)
    np.testing.assert_allclose(logits, reference_logits(params, config, tokens), atol=1e-12)


def test_position_schemes_differ_and_only_learned_is_bounded_by_max_len():
    rng = np.random.default_rng(34)
    tokens = rng.integers(0, 7, size=(2, 6))
    outputs = {}
    for positions in SCHEMES:
        config = M.DecoderConfig(**TINY, positions=positions)
        params = M.init_params(config, np.random.default_rng(0))
        outputs[positions] = M.forward(params, config, tokens)[0]
        if positions != "learned":  # past the max_len = 6 rows, as far as we like
            long = rng.integers(0, 7, size=(2, 24))
            logits, _ = M.forward(params, config, long)
            assert logits.shape == (2, 24, 7) and np.isfinite(logits).all()
            states = M.hidden_states(params, config, long)
            np.testing.assert_allclose(
                M.forward(params, config, long[:, :6])[0], logits[:, :6], atol=1e-12
            )
            assert len(states) == config.num_layers + 1
    names = list(outputs)
    for i, a in enumerate(names):  # each scheme changes the function (the same token weights)
        for b in names[i + 1 :]:
            assert not np.allclose(outputs[a], outputs[b]), (a, b)


def test_position_scheme_config():
    assert M.DecoderConfig(**TINY).positions == "learned"
    assert M.DecoderConfig(**TINY, positions=True) == M.DecoderConfig(**TINY)
    none = M.DecoderConfig(**TINY, positions=False)
    assert none.positions == "none" and not none.positions
    assert none == M.DecoderConfig(**TINY, positions="none")
    for positions in ("sinusoidal", "rope", "alibi"):
        config = M.DecoderConfig(**TINY, positions=positions)
        assert config.positions  # has position information, but no parameters for it
        assert "pos_emb" not in M.parameter_shapes(config)
        assert M.num_params(config) == M.num_params(none)
        params = M.init_params(config, np.random.default_rng(0))
        assert sum(p.size for p in params.values()) == M.num_params(config)
    with pytest.raises(ValueError, match=r"positions must be one of .*got 'absolute'"):
        M.DecoderConfig(**TINY, positions="absolute")
    with pytest.raises(ValueError, match=r"positions must be one of .*got None"):
        M.DecoderConfig(**TINY, positions=None)
    with pytest.raises(ValueError, match=r"'sinusoidal' needs an even d_model"):
        M.DecoderConfig(7, 9, 1, 1, 16, 6, positions="sinusoidal")
    M.DecoderConfig(7, 6, 2, 1, 16, 6, positions="alibi")  # odd widths are fine elsewhere


def test_rope_scale_squeezes_the_positions_rope_turns_by():
    """rope_scale = 1/2 on a sequence of 8 is RoPE on positions 0, 0.5, ..., 3.5: the rotation
    a model trained on 4 positions saw at half the step (position interpolation)."""
    rng = np.random.default_rng(35)
    config = M.DecoderConfig(**{**TINY, "max_len": 8}, positions="rope")
    params = perturbed_params(config, rng)
    tokens = rng.integers(0, 7, size=(2, 8))
    base = M.forward(params, config, tokens)[0]
    squeezed = M.forward(params, dataclasses.replace(config, rope_scale=0.5), tokens)[0]
    assert not np.allclose(base, squeezed)  # the scale reaches the rotation
    np.testing.assert_allclose(  # ... and only it: the first position is never turned
        base[:, 0], squeezed[:, 0], atol=1e-12
    )
    np.testing.assert_allclose(
        squeezed,
        reference_logits(params, dataclasses.replace(config, rope_scale=0.5), tokens),
        atol=1e-12,
    )


def test_rope_scores_depend_on_relative_position_only():
    """Shifting every query and key position by the same offset leaves a RoPE model unchanged
    only through relative distances: the logits at a position do not depend on where the
    sequence started (no absolute position enters anywhere)."""
    rng = np.random.default_rng(35)
    tokens = rng.integers(0, 7, size=(2, 5))
    for positions, invariant in (("rope", True), ("alibi", True), ("learned", False)):
        config = M.DecoderConfig(**TINY, positions=positions)
        params = perturbed_params(config, rng)
        logits = M.forward(params, config, tokens)[0]
        # prefix a token the queries cannot see past: attention to it is killed by a mask
        padded = np.concatenate([np.zeros((2, 1), dtype=int), tokens], axis=1)  # (2, 6)
        mask = np.tril(np.ones((6, 6), dtype=bool))
        mask[:, 0] = False
        mask[0, 0] = True
        shifted = M.forward(params, config, padded, mask)[0][:, 1:]
        assert np.allclose(shifted, logits, atol=1e-12) == invariant, positions
