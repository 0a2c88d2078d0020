"""Tests of npformer.core.encoder_decoder: torch.nn.Transformer with copied weights, parameter
counts in closed form, masking properties, greedy generation, bad inputs."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.core.encoder_decoder import (
    BASE_2017,
    EncoderDecoderConfig,
    count_parameters,
    decode,
    embed,
    encode,
    encoder_decoder_forward,
    greedy_generate,
    init_encoder_decoder_params,
    named_parameters,
    parameter_count,
)
from npformer.core.masks import padding_mask

SMALL = EncoderDecoderConfig(
    vocab_size=13, d_model=16, num_heads=4, d_ff=24, num_encoder_layers=2, num_decoder_layers=2
)


def random_model(config, seed):
    """Parameters with every entry random (biases, gammas and betas too), float64."""
    rng = np.random.default_rng(seed)
    params = init_encoder_decoder_params(config, rng)
    for _, p in named_parameters(params):
        p += 0.2 * rng.standard_normal(p.shape)
    return params


def random_batch(config, seed, B=3, S=7, T=5):
    rng = np.random.default_rng(seed + 1000)
    src = rng.integers(0, config.vocab_size, (B, S))
    tgt = rng.integers(0, config.vocab_size, (B, T))
    lengths = rng.integers(1, S + 1, B)
    lengths[0] = S  # one full row, the others padded
    return src, tgt, lengths


# ---------------------------------------------------------------------------------------------
# torch.nn.Transformer with the same weights (torch alone on the reference side)
# ---------------------------------------------------------------------------------------------


def torch_sinusoids(torch, n, d):
    """The (n, d) sinusoidal table of Vaswani et al., written again in torch (float64)."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    omega = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * omega)
    pe[:, 1::2] = torch.cos(pos * omega)
    return pe


def torch_reference(config, params, fast_path_encoder=False):
    """A torch twin: nn.Embedding + sinusoids + nn.Transformer + tied projection."""
    torch = pytest.importorskip("torch")
    kw = dict(dropout=0.0, batch_first=True, dtype=torch.float64)
    custom = None
    if fast_path_encoder:
        layer = torch.nn.TransformerEncoderLayer(
            config.d_model, config.num_heads, config.d_ff, layer_norm_eps=config.ln_eps, **kw
        )
        custom = torch.nn.TransformerEncoder(
            layer,
            config.num_encoder_layers,
            norm=torch.nn.LayerNorm(config.d_model, eps=config.ln_eps, dtype=torch.float64),
            enable_nested_tensor=False,
        )
    model = torch.nn.Transformer(
        d_model=config.d_model,
        nhead=config.num_heads,
        num_encoder_layers=config.num_encoder_layers,
        num_decoder_layers=config.num_decoder_layers,
        dim_feedforward=config.d_ff,
        layer_norm_eps=config.ln_eps,
        custom_encoder=custom,
        **kw,
    )
    emb = torch.nn.Embedding(config.vocab_size, config.d_model, dtype=torch.float64)

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))

    def attn(m, a):
        m.in_proj_weight.copy_(t(np.concatenate([a["W_q"].T, a["W_k"].T, a["W_v"].T])))
        m.in_proj_bias.copy_(t(np.concatenate([a["b_q"], a["b_k"], a["b_v"]])))
        m.out_proj.weight.copy_(t(a["W_o"].T))
        m.out_proj.bias.copy_(t(a["b_o"]))

    def norm(m, n):
        m.weight.copy_(t(n["gamma"]))
        m.bias.copy_(t(n["beta"]))

    def ffn(m, f):
        m.linear1.weight.copy_(t(f["W_1"].T))
        m.linear1.bias.copy_(t(f["b_1"]))
        m.linear2.weight.copy_(t(f["W_2"].T))
        m.linear2.bias.copy_(t(f["b_2"]))

    with torch.no_grad():
        emb.weight.copy_(t(params["tok_emb"]))
        for m, p in zip(model.encoder.layers, params["encoder"], strict=True):
            attn(m.self_attn, p["self_attn"])
            norm(m.norm1, p["ln1"])
            ffn(m, p["ffn"])
            norm(m.norm2, p["ln2"])
        for m, p in zip(model.decoder.layers, params["decoder"], strict=True):
            attn(m.self_attn, p["self_attn"])
            norm(m.norm1, p["ln1"])
            attn(m.multihead_attn, p["cross_attn"])
            norm(m.norm2, p["ln2"])
            ffn(m, p["ffn"])
            norm(m.norm3, p["ln3"])
        norm(model.encoder.norm, params["encoder_ln_f"])
        norm(model.decoder.norm, params["decoder_ln_f"])
    model.eval()
    d = config.d_model

    def positions(n):
        return torch_sinusoids(torch, n, d)

    def forward(src, tgt, lengths):
        src, tgt, lengths = torch.from_numpy(src), torch.from_numpy(tgt), torch.from_numpy(lengths)
        x = emb(src) * math.sqrt(d) + positions(src.shape[1])
        y = emb(tgt) * math.sqrt(d) + positions(tgt.shape[1])
        ignore = torch.arange(src.shape[1])[None, :] >= lengths[:, None]  # True = padding
        causal = torch.nn.Transformer.generate_square_subsequent_mask(
            tgt.shape[1], dtype=torch.float64
        )
        h = model(
            x,
            y,
            tgt_mask=causal,
            src_key_padding_mask=ignore,
            memory_key_padding_mask=ignore,
            tgt_is_causal=True,
        )
        return (h @ emb.weight.T).detach().numpy()

    return forward


CONFIGS = [
    SMALL,
    EncoderDecoderConfig(11, 8, 2, 32, 1, 3),
    EncoderDecoderConfig(17, 24, 6, 40, 3, 1),
    # one head: torch warns at construction that its nested-tensor path needs an even h
    pytest.param(
        EncoderDecoderConfig(9, 12, 1, 12, 1, 1),
        marks=pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning"),
    ),
]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_equals_torch_transformer(config, seed):
    params = random_model(config, seed)
    src, tgt, lengths = random_batch(config, seed)
    ours, _ = encoder_decoder_forward(src, tgt, params, config, padding_mask(lengths, src.shape[1]))
    theirs = torch_reference(config, params)(src, tgt, lengths)
    assert np.abs(ours - theirs).max() < 1e-10


@given(
    heads=st.sampled_from([2, 4]),
    width_per_head=st.sampled_from([2, 4]),
    layers=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    B=st.integers(1, 3),
    S=st.integers(1, 6),
    T=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_equals_torch_on_random_shapes(heads, width_per_head, layers, B, S, T, seed):
    config = EncoderDecoderConfig(7, heads * width_per_head, heads, 12, *layers)
    params = random_model(config, seed)
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 7, (B, S))
    tgt = rng.integers(0, 7, (B, T))
    lengths = rng.integers(1, S + 1, B)
    ours, _ = encoder_decoder_forward(src, tgt, params, config, padding_mask(lengths, S))
    theirs = torch_reference(config, params)(src, tgt, lengths)
    assert np.abs(ours - theirs).max() < 1e-10


def test_equals_torch_fast_path(monkeypatch):
    """Under inference mode torch's encoder layers take their fused kernel: same answer."""
    torch = pytest.importorskip("torch")
    calls = []
    fused = torch._transformer_encoder_layer_fwd

    def counting(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(torch, "_transformer_encoder_layer_fwd", counting)
    params = random_model(SMALL, 3)
    src, tgt, lengths = random_batch(SMALL, 3)
    forward = torch_reference(SMALL, params, fast_path_encoder=True)
    with torch.inference_mode():
        theirs = forward(src, tgt, lengths)
    assert len(calls) == SMALL.num_encoder_layers
    ours, _ = encoder_decoder_forward(src, tgt, params, SMALL, padding_mask(lengths, src.shape[1]))
    assert np.abs(ours - theirs).max() < 1e-10


def test_batch_of_one_and_length_one_equal_torch():
    params = random_model(SMALL, 4)
    src = np.array([[3]])
    tgt = np.array([[5]])
    lengths = np.array([1])
    ours, _ = encoder_decoder_forward(src, tgt, params, SMALL, padding_mask(lengths, 1))
    theirs = torch_reference(SMALL, params)(src, tgt, lengths)
    assert ours.shape == (1, 1, SMALL.vocab_size)
    assert np.abs(ours - theirs).max() < 1e-10


# ---------------------------------------------------------------------------------------------
# Parameter counts
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("final_ln", [True, False])
def test_closed_form_count_equals_the_tensors(config, final_ln):
    config = dataclasses.replace(config, final_ln=final_ln)
    params = init_encoder_decoder_params(config, np.random.default_rng(0))
    counts = parameter_count(config)
    assert counts["total"] == count_parameters(params)
    assert counts["tok_emb"] == params["tok_emb"].size
    assert counts["decoder_layer"] == count_parameters(params["decoder"][0])
    assert counts["encoder_layer"] == count_parameters(params["encoder"][0])


def test_layer_closed_forms_at_d_ff_4d():
    for d in (8, 64, 512):
        config = EncoderDecoderConfig(10, d, 4, 4 * d, 1, 1)
        counts = parameter_count(config)
        assert counts["encoder_layer"] == 12 * d * d + 13 * d
        assert counts["decoder_layer"] == 16 * d * d + 19 * d


def test_base_2017_count():
    counts = parameter_count(BASE_2017)
    assert counts["total"] == 63_084_544
    assert counts["tok_emb"] == 37_000 * 512
    assert parameter_count(dataclasses.replace(BASE_2017, final_ln=False))["total"] == 63_082_496


def test_count_equals_torch_transformer_plus_embedding():
    torch = pytest.importorskip("torch")
    model = torch.nn.Transformer(
        d_model=512,
        nhead=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        dim_feedforward=2048,
        batch_first=True,
        device="meta",
    )
    stack = sum(p.numel() for p in model.parameters())
    assert stack + 37_000 * 512 == parameter_count(BASE_2017)["total"]


def test_named_parameters_are_the_dicts_own_arrays():
    params = init_encoder_decoder_params(SMALL, np.random.default_rng(0))
    names = dict(named_parameters(params))
    assert "decoder.1.cross_attn.W_q" in names and "encoder_ln_f.gamma" in names
    names["decoder.1.cross_attn.W_q"][0, 0] = 123.0
    assert params["decoder"][1]["cross_attn"]["W_q"][0, 0] == 123.0


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


def test_embedding_scale_and_positions():
    """embed(x)[t] = sqrt(d) E[x_t] + PE[t], with PE written out here from its formula."""
    params = random_model(SMALL, 0)
    tokens = np.array([[1, 1, 4]])
    x = embed(tokens, params["tok_emb"])
    d = SMALL.d_model
    omega = 10000.0 ** (-np.arange(0, d, 2) / d)
    pe = np.empty((3, d))
    pe[:, 0::2] = np.sin(np.arange(3)[:, None] * omega)
    pe[:, 1::2] = np.cos(np.arange(3)[:, None] * omega)
    expected = math.sqrt(d) * params["tok_emb"][tokens[0]] + pe
    np.testing.assert_allclose(x[0], expected, rtol=0, atol=1e-13)


def test_padded_source_tokens_change_nothing():
    params = random_model(SMALL, 5)
    src, tgt, lengths = random_batch(SMALL, 5)
    pad = padding_mask(lengths, src.shape[1])
    before, cache = encoder_decoder_forward(src, tgt, params, SMALL, pad)
    src2 = np.where(pad, src, (src + 1) % SMALL.vocab_size)
    assert (src2 != src).any()
    after, _ = encoder_decoder_forward(src2, tgt, params, SMALL, pad)
    np.testing.assert_array_equal(before, after)
    for layer in cache.decoder:
        w = layer.cross_attn.attention.weights  # (B, h, T, S)
        assert np.all(w[~np.broadcast_to(pad[:, None, None, :], w.shape)] == 0.0)
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)


def test_later_target_tokens_do_not_change_earlier_logits():
    params = random_model(SMALL, 6)
    src, tgt, lengths = random_batch(SMALL, 6)
    pad = padding_mask(lengths, src.shape[1])
    before, _ = encoder_decoder_forward(src, tgt, params, SMALL, pad)
    for t in range(tgt.shape[1]):
        changed = tgt.copy()
        changed[:, t] = (changed[:, t] + 1) % SMALL.vocab_size
        after, _ = encoder_decoder_forward(src, changed, params, SMALL, pad)
        np.testing.assert_array_equal(after[:, :t], before[:, :t])
        assert np.abs(after[:, t] - before[:, t]).max() > 1e-6


def test_greedy_generation_equals_teacher_forcing_on_its_own_tokens():
    params = random_model(SMALL, 7)
    src, _, lengths = random_batch(SMALL, 7)
    pad = padding_mask(lengths, src.shape[1])
    gen = greedy_generate(src, params, SMALL, start_token=0, num_steps=6, src_pad=pad)
    assert gen.tokens.shape == (3, 7) and gen.logits.shape == (3, 6, SMALL.vocab_size)
    assert np.all(gen.tokens[:, 0] == 0)
    forced, _ = encoder_decoder_forward(src, gen.tokens[:, :-1], params, SMALL, pad)
    np.testing.assert_allclose(gen.logits, forced, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(gen.tokens[:, 1:], forced.argmax(-1))


def test_encode_decode_compose_to_the_forward():
    params = random_model(SMALL, 8)
    src, tgt, lengths = random_batch(SMALL, 8)
    pad = padding_mask(lengths, src.shape[1])
    memory, _ = encode(src, params, SMALL, pad)
    hidden, _ = decode(tgt, memory, params, SMALL, pad)
    logits, cache = encoder_decoder_forward(src, tgt, params, SMALL, pad)
    np.testing.assert_array_equal(cache.memory, memory)
    np.testing.assert_array_equal(logits, hidden @ params["tok_emb"].T)


def test_without_final_norm_runs_and_differs():
    config = dataclasses.replace(SMALL, final_ln=False)
    params = random_model(config, 9)
    assert "encoder_ln_f" not in params
    src, tgt, lengths = random_batch(config, 9)
    logits, _ = encoder_decoder_forward(src, tgt, params, config)
    assert logits.shape == (3, 5, config.vocab_size) and np.isfinite(logits).all()


# ---------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------


def test_wrong_head_count_in_a_layer_is_caught_by_the_attention():
    """d % h is checked by the config; multi-head attention checks it again for a bare layer."""
    from npformer.core.encoder_decoder import encoder_layer

    params = random_model(SMALL, 0)
    x = np.zeros((2, 3, 16))
    with pytest.raises(ValueError, match=r"d_model=16 must be a positive multiple of num_heads=3"):
        encoder_layer(x, params["encoder"][0], num_heads=3)


def test_layers_reject_bad_streams_and_incomplete_layers():
    from npformer.core.encoder_decoder import decoder_layer

    params = random_model(SMALL, 0)
    dec = params["decoder"][0]
    x, y = np.zeros((2, 7, 16)), np.zeros((2, 5, 16))
    out, cache = decoder_layer(y, x, dec, 4)  # the complete layer runs
    assert out.shape == (2, 5, 16) and cache.cross_attn.attention.weights.shape == (2, 4, 5, 7)


# ---------------------------------------------------------------------------------------------
# Backward pass: central differences, and torch autograd with the same weights
# ---------------------------------------------------------------------------------------------


def _loss_and_grads(config, params, src, tgt_in, tgt_out, src_pad, smoothing=0.1):
    from npformer.core.encoder_decoder import encoder_decoder_backward
    from npformer.core.label_smoothing import (
        label_smoothed_cross_entropy,
        label_smoothed_cross_entropy_backward,
    )

    logits, cache = encoder_decoder_forward(src, tgt_in, params, config, src_pad)
    loss, lc = label_smoothed_cross_entropy(logits, tgt_out, smoothing)
    grads = encoder_decoder_backward(
        label_smoothed_cross_entropy_backward(lc), cache, params, config
    )
    return loss, grads


@pytest.mark.parametrize("ln", ["post", "pre"])
@pytest.mark.parametrize("final_ln", [True, False])
def test_backward_matches_central_differences(final_ln, ln):
    from npformer.core.gradcheck import gradient_check, select_coordinates
    from npformer.core.label_smoothing import label_smoothed_cross_entropy

    config = dataclasses.replace(SMALL, final_ln=final_ln, ln=ln)
    params = random_model(config, 3)
    src, tgt_in, lengths = random_batch(config, 3)
    src[0, 3] = src[0, 1] = tgt_in[0, 2]  # a token repeated in the source and in the target
    tgt_out = np.random.default_rng(7).integers(0, config.vocab_size, tgt_in.shape)
    src_pad = padding_mask(lengths, src.shape[1])
    _, grads = _loss_and_grads(config, params, src, tgt_in, tgt_out, src_pad)
    flat_p, flat_g = dict(named_parameters(params)), dict(named_parameters(grads))
    assert list(flat_p) == list(flat_g)
    assert all(flat_p[n].shape == flat_g[n].shape for n in flat_p)

    def loss_fn():
        logits, _ = encoder_decoder_forward(src, tgt_in, params, config, src_pad)
        return label_smoothed_cross_entropy(logits, tgt_out, 0.1)[0]

    # gradients above 1e-5: below it, the difference quotient's rounding (about 1e-10 at
    # eps = 1e-6 on a loss near 2) is a relative error of 1e-5
    coords = select_coordinates(flat_g, threshold=1e-5, per_tensor=4, rng=np.random.default_rng(0))
    # every kind of parameter is checked: embedding, both attentions, FFN, every norm
    for part in ("tok_emb", "cross_attn.W_k", "self_attn.W_q", "ffn.W_1", "ln3.gamma"):
        assert any(part in name for name in coords), part
    check = gradient_check(loss_fn, flat_p, flat_g, coords, eps=1e-6)
    assert check.worst < 1e-5, check.failures(1e-5)


def test_backward_equals_torch_autograd():
    torch = pytest.importorskip("torch")
    config = SMALL
    params = random_model(config, 5)
    src, tgt_in, lengths = random_batch(config, 5)
    tgt_out = np.random.default_rng(9).integers(0, config.vocab_size, tgt_in.shape)
    src_pad = padding_mask(lengths, src.shape[1])
    loss, grads = _loss_and_grads(config, params, src, tgt_in, tgt_out, src_pad)

    # torch alone: nn.Transformer, nn.Embedding, F.cross_entropy(label_smoothing=0.1)
    kw = dict(dropout=0.0, batch_first=True, dtype=torch.float64)
    model = torch.nn.Transformer(
        config.d_model,
        config.num_heads,
        config.num_encoder_layers,
        config.num_decoder_layers,
        config.d_ff,
        **kw,
    )
    emb = torch.nn.Embedding(config.vocab_size, config.d_model, dtype=torch.float64)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    with torch.no_grad():
        emb.weight.copy_(t(params["tok_emb"]))
        pairs = [
            (model.encoder.layers[i], p, ("self_attn",)) for i, p in enumerate(params["encoder"])
        ]
        pairs += [
            (model.decoder.layers[i], p, ("self_attn", "multihead_attn"))
            for i, p in enumerate(params["decoder"])
        ]
        for m, p, attns in pairs:
            for torch_name in attns:
                a = p["self_attn" if torch_name == "self_attn" else "cross_attn"]
                mod = getattr(m, torch_name)
                mod.in_proj_weight.copy_(t(np.concatenate([a["W_q"].T, a["W_k"].T, a["W_v"].T])))
                mod.in_proj_bias.copy_(t(np.concatenate([a["b_q"], a["b_k"], a["b_v"]])))
                mod.out_proj.weight.copy_(t(a["W_o"].T))
                mod.out_proj.bias.copy_(t(a["b_o"]))
            for k in (1, 2, 3):
                if f"ln{k}" in p:
                    getattr(m, f"norm{k}").weight.copy_(t(p[f"ln{k}"]["gamma"]))
                    getattr(m, f"norm{k}").bias.copy_(t(p[f"ln{k}"]["beta"]))
            m.linear1.weight.copy_(t(p["ffn"]["W_1"].T))
            m.linear1.bias.copy_(t(p["ffn"]["b_1"]))
            m.linear2.weight.copy_(t(p["ffn"]["W_2"].T))
            m.linear2.bias.copy_(t(p["ffn"]["b_2"]))
        for norm, p in ((model.encoder.norm, "encoder_ln_f"), (model.decoder.norm, "decoder_ln_f")):
            norm.weight.copy_(t(params[p]["gamma"]))
            norm.bias.copy_(t(params[p]["beta"]))
    d = config.d_model

    def positions(n):
        return torch_sinusoids(torch, n, d)

    x = emb(t(src)) * math.sqrt(d) + positions(src.shape[1])
    y = emb(t(tgt_in)) * math.sqrt(d) + positions(tgt_in.shape[1])
    ignore = t(~src_pad)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(
        tgt_in.shape[1], dtype=torch.float64
    )
    h = model(x, y, tgt_mask=causal, src_key_padding_mask=ignore, memory_key_padding_mask=ignore)
    logits = h @ emb.weight.T
    ref = torch.nn.functional.cross_entropy(
        logits.reshape(-1, config.vocab_size), t(tgt_out).reshape(-1), label_smoothing=0.1
    )
    ref.backward()
    assert abs(loss - ref.item()) < 1e-12
    pairs = [(grads["tok_emb"], emb.weight.grad)]
    enc, dec = grads["encoder"][0], grads["decoder"][1]
    pairs += [
        (enc["self_attn"]["W_v"].T, model.encoder.layers[0].self_attn.in_proj_weight.grad[2 * d :]),
        (
            dec["cross_attn"]["W_k"].T,
            model.decoder.layers[1].multihead_attn.in_proj_weight.grad[d : 2 * d],
        ),
        (dec["cross_attn"]["b_q"], model.decoder.layers[1].multihead_attn.in_proj_bias.grad[:d]),
        (dec["ffn"]["W_1"].T, model.decoder.layers[1].linear1.weight.grad),
        (dec["ln2"]["gamma"], model.decoder.layers[1].norm2.weight.grad),
        (grads["encoder_ln_f"]["beta"], model.encoder.norm.bias.grad),
    ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-9, atol=1e-12)


def test_pre_ln_differs_from_post_ln_and_bad_ln_is_rejected():
    params = random_model(SMALL, 4)
    src, tgt_in, _ = random_batch(SMALL, 4)
    post, _ = encoder_decoder_forward(src, tgt_in, params, SMALL)
    pre_config = dataclasses.replace(SMALL, ln="pre")
    pre, cache = encoder_decoder_forward(src, tgt_in, params, pre_config)
    assert np.abs(pre - post).max() > 0.1  # the same weights, another model
    assert cache.encoder[0].ln == "pre"
    with pytest.raises(ValueError, match="ln must be"):
        dataclasses.replace(SMALL, ln="middle")
