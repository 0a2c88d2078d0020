"""Interventions on the decoder (chapter 12): the hooked forward pass equals the model's, each
intervention does what it says, the distances and the adversarial search keep their promises,
and bad inputs are refused with the shapes named."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.analysis import interventions as I
from npformer.core import model as M
from npformer.core.attention import masked_softmax
from npformer.core.masks import causal_mask
from npformer.training.train import generate, model_logits
from tests.tiny_decoder import tiny_model


def tokens_for(config, B=3, T=5, seed=1):
    return np.random.default_rng(seed).integers(0, config.vocab_size, size=(B, T))


# ----------------------------------------------------------------------------- no intervention


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"ln": "post"},
        {"scale": False},
        {"positions": False},
        {"final_ln": False},
        {"activation": "gelu"},
        {"activation": "swiglu"},
        {"num_heads": 4, "num_layers": 3},
        {"positions": "sinusoidal"},
        {"positions": "rope"},
        {"positions": "alibi"},
    ],
)
def test_no_intervention_equals_model_forward(changes):
    config, params = tiny_model(**changes)
    tokens = tokens_for(config)
    ref, cache = M.forward(params, config, tokens)
    out = I.forward_with_interventions(params, config, tokens)
    assert out.logits.dtype == np.float64
    np.testing.assert_array_equal(out.logits, ref)  # the same code path, bit for bit
    for layer, block in enumerate(cache.blocks):
        np.testing.assert_array_equal(out.own_weights[layer], block.attn.weights)
        np.testing.assert_array_equal(out.weights[layer], out.own_weights[layer])


def test_no_intervention_equals_model_forward_with_a_custom_mask():
    config, params = tiny_model()
    tokens = tokens_for(config, T=6)
    mask = np.tril(np.ones((6, 6), dtype=bool))
    mask[:3, :3] = True  # a bidirectional prefix
    ref, _ = M.forward(params, config, tokens, mask)
    out = I.forward_with_interventions(params, config, tokens, attn_mask=mask)
    assert np.abs(out.logits - ref).max() < 1e-10
    assert out.own_weights[0][:, :, 0, 2].min() > 0  # the prefix sees ahead


def test_a_query_that_sees_nothing_reads_nothing():
    config, params = tiny_model()
    tokens = tokens_for(config, T=4)
    mask = np.tril(np.ones((4, 4), dtype=bool))
    mask[2] = False  # query 2 sees no key
    ref, _ = M.forward(params, config, tokens, mask)
    out = I.forward_with_interventions(
        params, config, tokens, attn_mask=mask, replace={(0, 0): I.uniform_weights}
    )
    assert (out.weights[0][:, :, 2] == 0).all()
    clean = I.forward_with_interventions(params, config, tokens, attn_mask=mask)
    assert np.abs(clean.logits - ref).max() < 1e-10


def test_float32_parameters_stay_float32():
    config, params = tiny_model()
    p32 = {k: v.astype(np.float32) for k, v in params.items()}
    out = I.forward_with_interventions(p32, config, tokens_for(config))
    assert out.logits.dtype == np.float32 and out.weights[0].dtype == np.float32


def test_weights_are_causal_distributions():
    config, params = tiny_model()
    out = I.forward_with_interventions(params, config, tokens_for(config, T=6))
    for w in out.own_weights:
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)
        assert (w[..., ~causal_mask(6)] == 0).all()


# ----------------------------------------------------------------------------- interventions


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rope", "alibi"])
def test_ablation_equals_zeroing_the_heads_rows_of_W_o(positions):
    config, params = tiny_model(num_heads=2, positions=positions)
    tokens = tokens_for(config)
    d_h = config.d_head
    for layer, head in [(0, 0), (1, 1)]:
        edited = {k: v.copy() for k, v in params.items()}
        edited[f"block{layer}.attn.W_o"][head * d_h : (head + 1) * d_h] = 0.0
        ref, _ = M.forward(edited, config, tokens)
        out = I.forward_with_interventions(params, config, tokens, ablate=[(layer, head)])
        assert np.abs(out.logits - ref).max() < 1e-10


def test_replacing_a_head_by_its_own_weights_changes_nothing():
    config, params = tiny_model()
    tokens = tokens_for(config)
    clean = I.forward_with_interventions(params, config, tokens)
    own = clean.own_weights[1][:, 0]  # (B, T, T)
    out = I.forward_with_interventions(params, config, tokens, replace={(1, 0): own})
    np.testing.assert_array_equal(out.logits, clean.logits)


def test_replacement_in_layer_1_leaves_layer_0_alone_and_is_applied():
    config, params = tiny_model()
    tokens = tokens_for(config)
    clean = I.forward_with_interventions(params, config, tokens)
    out = I.forward_with_interventions(params, config, tokens, replace={(1, 1): I.uniform_weights})
    np.testing.assert_array_equal(out.weights[0], clean.weights[0])
    np.testing.assert_array_equal(out.own_weights[1], clean.own_weights[1])
    visible = causal_mask(5)
    expected = np.where(visible, 1.0 / visible.sum(-1, keepdims=True), 0.0)  # (T, T)
    np.testing.assert_allclose(out.weights[1][:, 1], np.broadcast_to(expected, (3, 5, 5)))
    assert np.abs(out.logits - clean.logits).max() > 1e-6  # it did something


def test_a_shared_T_by_S_replacement_broadcasts_over_the_batch():
    config, params = tiny_model()
    tokens = tokens_for(config)
    shared = I.uniform_weights(np.zeros((5, 5)), causal_mask(5))  # (T, S)
    a = I.forward_with_interventions(params, config, tokens, replace={(0, 1): shared})
    b = I.forward_with_interventions(params, config, tokens, replace={(0, 1): I.uniform_weights})
    np.testing.assert_array_equal(a.logits, b.logits)


def test_permuted_weights_shuffle_within_visible_keys():
    config, params = tiny_model()
    tokens = tokens_for(config, B=4, T=6)
    rule = I.permuted_weights(np.random.default_rng(3))
    out = I.forward_with_interventions(params, config, tokens, replace={(0, 0): rule})
    own, new = out.own_weights[0][:, 0], out.weights[0][:, 0]  # (B, T, T)
    visible = causal_mask(6)
    assert (new[:, ~visible] == 0).all()
    for b in range(4):
        for t in range(6):
            np.testing.assert_array_equal(np.sort(new[b, t, : t + 1]), np.sort(own[b, t, : t + 1]))
    assert not np.array_equal(new, own)  # something moved


@given(B=st.integers(1, 3), T=st.integers(1, 7), seed=st.integers(0, 2**16), prefix=st.booleans())
def test_permuted_weights_property(B, T, seed, prefix):
    rng = np.random.default_rng(seed)
    visible = np.broadcast_to(causal_mask(T), (B, T, T)).copy()
    if prefix:
        visible[:, : T // 2, : T // 2] = True  # visible keys need not be a prefix of the row
    weights = np.where(visible, rng.random((B, T, T)), 0.0)
    weights /= weights.sum(-1, keepdims=True)
    new = I.permuted_weights(rng)(weights, visible)
    assert (new[~visible] == 0).all()
    for b in range(B):
        for t in range(T):
            row = visible[b, t]
            np.testing.assert_array_equal(np.sort(new[b, t, row]), np.sort(weights[b, t, row]))


def test_token_edits_equal_editing_the_tokens_and_respect_causality():
    config, params = tiny_model()
    tokens = tokens_for(config, B=3, T=6)
    new = np.array([1, 2, 3])
    out = I.forward_with_interventions(params, config, tokens, token_edits={3: new})
    edited = tokens.copy()
    edited[:, 3] = new
    ref, _ = M.forward(params, config, edited)
    assert np.abs(out.logits - ref).max() < 1e-10
    clean = I.forward_with_interventions(params, config, tokens)
    np.testing.assert_array_equal(out.logits[:, :3], clean.logits[:, :3])  # the past is untouched
    np.testing.assert_array_equal(tokens, tokens_for(config, B=3, T=6))  # input not modified


def test_generation_without_intervention_equals_the_trainer_generate():
    config, params = tiny_model()
    start = tokens_for(config, B=4, T=2)
    ours = I.generate_with_interventions(params, config, start, 4)
    ref = generate(model_logits(params, config), start, 4)
    np.testing.assert_array_equal(ours, ref)
    ablated = I.generate_with_interventions(params, config, start, 4, ablate=[(0, 0)])
    assert ablated.shape == (4, 4)


# ----------------------------------------------------------------------------- distances


def test_distances_on_known_cases():
    p = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    q = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(I.total_variation(p, q), [0.0, 1.0])
    np.testing.assert_allclose(I.js_divergence(p, q), [0.0, 1.0], atol=1e-15)
    # JS([1, 0], [1/2, 1/2]) = 1/2 log2(4/3) + 1/4 log2(2/3) + 1/4 log2(2) in closed form
    js = I.js_divergence(np.array([1.0, 0.0]), np.array([0.5, 0.5]))
    expected = 0.5 * np.log2(4 / 3) + 0.25 * np.log2(2 / 3) + 0.25
    assert abs(js - expected) < 1e-15


@given(n=st.integers(2, 6), seed=st.integers(0, 2**16))
def test_distances_are_symmetric_and_bounded(n, seed):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(n), size=2)
    for f in (I.total_variation, I.js_divergence):
        assert abs(f(p, q) - f(q, p)) < 1e-12
        assert 0 <= f(p, q) <= 1
        assert f(p, p) < 1e-12
    # Pinsker-type sandwich for JS in bits: JS <= TV
    assert I.js_divergence(p, q) <= I.total_variation(p, q) + 1e-12


def test_js_gradient_matches_central_differences():
    rng = np.random.default_rng(0)
    visible = np.array([True, True, True, False, True])
    p = np.where(visible, rng.random(5), 0.0)
    p /= p.sum()
    z = np.where(visible, rng.normal(size=5), -np.inf)
    grad = I.js_divergence_grad_logits(p, z, visible)
    eps = 1e-6
    for i in np.flatnonzero(visible):
        zp, zm = z.copy(), z.copy()
        zp[i] += eps
        zm[i] -= eps
        f = lambda zz: I.js_divergence(p, masked_softmax(zz, visible))
        numeric = (f(zp) - f(zm)) / (2 * eps)
        assert abs(numeric - grad[i]) < 1e-8
    assert grad[~visible] == 0
    assert (
        np.abs(I.js_divergence_grad_logits(p, np.log(np.where(visible, p, 1)), visible)).max()
        < 1e-12
    )


# ----------------------------------------------------------------------------- adversarial search


def test_adversarial_search_keeps_predictions_and_moves_away():
    config, params = tiny_model()
    tokens = tokens_for(config, B=4, T=6)
    rows = np.array([3, 4, 5])
    result = I.adversarial_weights(params, config, tokens, 1, 0, rows, steps=30)
    clean = I.forward_with_interventions(params, config, tokens)
    out = I.forward_with_interventions(params, config, tokens, replace={(1, 0): result.weights})
    np.testing.assert_array_equal(out.logits[:, rows].argmax(-1), clean.logits[:, rows].argmax(-1))
    np.testing.assert_array_equal(result.own, clean.own_weights[1][:, 0])
    others = np.setdiff1d(np.arange(6), rows)
    np.testing.assert_array_equal(result.weights[:, others], result.own[:, others])
    np.testing.assert_allclose(
        result.distance, I.js_divergence(result.own[:, rows], result.weights[:, rows]), atol=1e-12
    )
    assert (np.diff(result.history) >= 0).all()
    assert result.distance.shape == (4, 3) and result.accepted.shape == (4, 3)
    assert result.distance.mean() > 0.05 and len(result.history) <= 31


def test_adversarial_search_is_deterministic_given_the_seed():
    config, params = tiny_model()
    tokens = tokens_for(config, B=2, T=5)
    a = I.adversarial_weights(params, config, tokens, 0, 1, [2, 4], steps=10, seed=5)
    b = I.adversarial_weights(params, config, tokens, 0, 1, [2, 4], steps=10, seed=5)
    np.testing.assert_array_equal(a.weights, b.weights)


# ----------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("key", [(2, 0), (0, 2), (-1, 0)])
def test_bad_head_index(key):
    config, params = tiny_model()
    with pytest.raises(ValueError, match=r"outside the model: layers 0\.\.1, heads 0\.\.1"):
        I.forward_with_interventions(params, config, tokens_for(config), ablate=[key])
    with pytest.raises(ValueError, match="outside the model"):
        I.forward_with_interventions(params, config, tokens_for(config), replace={key: np.eye(5)})
    with pytest.raises(ValueError, match="outside the model"):
        I.adversarial_weights(params, config, tokens_for(config), *key, [3])


def test_replacement_of_the_wrong_shape():
    config, params = tiny_model()
    tokens = tokens_for(config)  # (3, 5)
    bad = np.full((3, 4, 4), 0.25)
    with pytest.raises(ValueError, match=r"shape \(3, 4, 4\).*\(3, 5, 5\).*\(5, 5\)"):
        I.forward_with_interventions(params, config, tokens, replace={(0, 0): bad})
    with pytest.raises(ValueError, match=r"shape \(3, 4, 4\)"):
        I.forward_with_interventions(params, config, tokens, replace={(0, 0): lambda w, v: bad})


def test_replacement_not_summing_to_one():
    config, params = tiny_model()
    tokens = tokens_for(config)
    w = I.uniform_weights(np.zeros((5, 5)), causal_mask(5)) * 0.9
    with pytest.raises(ValueError, match=r"shape \(5, 5\) must be >= 0.*sum to one over"):
        I.forward_with_interventions(params, config, tokens, replace={(1, 1): w})


def test_replacement_on_masked_keys_or_negative_or_not_float():
    config, params = tiny_model()
    tokens = tokens_for(config)
    full = np.full((5, 5), 0.2)  # sums to one but reads the future
    with pytest.raises(ValueError, match="keys the mask hides"):
        I.forward_with_interventions(params, config, tokens, replace={(0, 0): full})
    neg = np.tril(np.ones((5, 5)))
    neg[2, :3] = [2.0, -1.0, 0.0]
    neg /= neg.sum(-1, keepdims=True)
    with pytest.raises(ValueError, match=r"shape \(5, 5\) must be >= 0"):
        I.forward_with_interventions(params, config, tokens, replace={(0, 0): neg})


def test_bad_adversarial_inputs():
    config, params = tiny_model()
    tokens = tokens_for(config)  # (3, 5)
    with pytest.raises(ValueError, match=r"distinct.*shape \(3, 5\); got \[2, 2\]"):
        I.adversarial_weights(params, config, tokens, 0, 0, [2, 2])


# ----------------------------------------------------------------------------- patching


def test_outputs_are_the_heads_weighted_values_and_patching_own_outputs_changes_nothing():
    config, params = tiny_model()
    tokens = tokens_for(config)
    clean = I.forward_with_interventions(params, config, tokens)
    assert len(clean.outputs) == 2 and clean.outputs[0].shape == (3, 2, 5, 4)
    same = I.forward_with_interventions(
        params,
        config,
        tokens,
        patch={(0, 1): clean.outputs[0][:, 1], (1, 0): clean.outputs[1][:, 0]},
    )
    np.testing.assert_allclose(same.logits, clean.logits, atol=1e-12)
    ablated = I.forward_with_interventions(params, config, tokens, ablate=[(1, 1)])
    np.testing.assert_array_equal(ablated.outputs[1][:, 1], 0.0)


def test_patching_zeros_equals_ablation_and_a_mean_broadcasts():
    config, params = tiny_model()
    tokens = tokens_for(config)
    ablated = I.forward_with_interventions(params, config, tokens, ablate=[(0, 0)])
    zeros = I.forward_with_interventions(params, config, tokens, patch={(0, 0): np.zeros(4)})
    np.testing.assert_allclose(zeros.logits, ablated.logits, atol=1e-12)
    clean = I.forward_with_interventions(params, config, tokens)
    mean = clean.outputs[0][:, 0].mean(axis=0)  # (T, d_h)
    out = I.forward_with_interventions(params, config, tokens, patch={(0, 0): mean})
    np.testing.assert_allclose(out.outputs[0][:, 0], np.broadcast_to(mean, (3, 5, 4)))
    assert np.abs(out.logits - clean.logits).max() > 1e-6
    np.testing.assert_array_equal(
        out.own_weights[0], clean.own_weights[0]
    )  # weights still computed


def test_patching_from_another_prompt_restores_its_logits_at_the_patched_path():
    # a one-layer, one-head model: patching the only head's output from prompt P into P'
    # gives P's logits wherever the residual stream differs only through that head
    config, params = tiny_model(num_layers=1, num_heads=1)
    tokens = tokens_for(config, B=1, T=5)
    edited = tokens.copy()
    edited[0, 1] = (edited[0, 1] + 1) % config.vocab_size
    clean = I.forward_with_interventions(params, config, tokens)
    patched = I.forward_with_interventions(
        params, config, edited, patch={(0, 0): clean.outputs[0][:, 0]}
    )
    keep = [0, 2, 3, 4]  # every position but the edited one
    np.testing.assert_allclose(patched.logits[:, keep], clean.logits[:, keep], atol=1e-12)


def test_bad_patches():
    config, params = tiny_model()
    tokens = tokens_for(config)
    with pytest.raises(ValueError, match=r"patch\[\(0, 0\)\] of shape \(3, 5\) does not fit"):
        I.forward_with_interventions(params, config, tokens, patch={(0, 0): np.zeros((3, 5))})
    with pytest.raises(ValueError, match="outside the model"):
        I.forward_with_interventions(params, config, tokens, patch={(5, 0): np.zeros(4)})


def test_adversarial_search_with_a_drop_bound_keeps_the_logit_difference_within_it():
    config, params = tiny_model()
    tokens = tokens_for(config, B=4, T=6)
    rows = np.array([3, 4, 5])
    result = I.adversarial_weights(params, config, tokens, 0, 0, rows, steps=30, max_drop=0.1)
    clean = I.forward_with_interventions(params, config, tokens)
    out = I.forward_with_interventions(params, config, tokens, replace={(0, 0): result.weights})
    target = clean.logits[:, rows].argmax(-1)
    kept = I.logit_difference(out.logits[:, rows], target) / I.logit_difference(
        clean.logits[:, rows], target
    )
    assert kept.min() >= 0.9 - 1e-12
    np.testing.assert_allclose(result.kept, kept, atol=1e-12)
    free = I.adversarial_weights(params, config, tokens, 0, 0, rows, steps=30)
    assert free.kept.min() < 0.9  # without the bound the search goes further


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rope", "alibi"])
@pytest.mark.parametrize("ln", ["pre", "post"])
def test_replacing_a_head_equals_patching_it_with_the_new_weights_times_its_values(positions, ln):
    # V read from model.forward's own cache, not from the intervention's hook
    config, params = tiny_model(positions=positions, ln=ln)
    tokens = tokens_for(config)
    _, cache = M.forward(params, config, tokens)
    rng = np.random.default_rng(5)
    new = np.tril(rng.random((5, 5))) + 0.1 * np.eye(5)  # (T, S) causal, positive
    new /= new.sum(-1, keepdims=True)
    clean = M.forward(params, config, tokens)[0]
    for layer, head in [(0, 1), (1, 0)]:
        # a head's values come before its weights are used, so they are the clean run's
        V = cache.blocks[layer].attn.v[:, head]  # (B, T, d_h)
        replaced = I.forward_with_interventions(
            params, config, tokens, replace={(layer, head): new}
        )
        patched = I.forward_with_interventions(
            params, config, tokens, patch={(layer, head): new @ V}
        )
        np.testing.assert_allclose(replaced.logits, patched.logits, atol=1e-12)
        np.testing.assert_allclose(replaced.outputs[layer][:, head], new @ V, atol=1e-12)
        assert np.abs(replaced.logits - clean).max() > 1e-4


@pytest.mark.parametrize("positions", ["sinusoidal", "rope", "alibi"])
def test_replacement_works_under_every_position_scheme(positions):
    # the weights a RoPE or ALiBi head computes already carry the positions; a replacement A'
    # takes their place and the head outputs A' V (V is never rotated)
    config, params = tiny_model(positions=positions)
    tokens = tokens_for(config)
    clean = I.forward_with_interventions(params, config, tokens)
    out = I.forward_with_interventions(params, config, tokens, replace={(0, 1): I.uniform_weights})
    _, cache = M.forward(params, config, tokens)
    V = cache.blocks[0].attn.v[:, 1]  # (B, T, d_h)
    np.testing.assert_allclose(out.outputs[0][:, 1], out.weights[0][:, 1] @ V, atol=1e-12)
    np.testing.assert_array_equal(out.weights[0][:, 0], clean.weights[0][:, 0])
    assert np.abs(out.logits - clean.logits).max() > 1e-3


def test_logit_difference_is_the_margin_over_the_best_other_token():
    logits = np.array([[1.0, 3.0, 0.5], [1.0, 3.0, 0.5], [2.0, 2.0, 0.0]])
    # leads by 2; trails the best other by 2.5; tied with another token: 0
    np.testing.assert_array_equal(I.logit_difference(logits, np.array([1, 2, 0])), [2.0, -2.5, 0.0])
    rng = np.random.default_rng(0)
    x, t = rng.normal(size=(4, 5, 9)), rng.integers(0, 9, size=(4, 5))
    kept = x.copy()
    by_sort = np.take_along_axis(x, t[..., None], -1)[..., 0] - np.where(
        np.arange(9) == t[..., None], -np.inf, x
    ).max(-1)
    np.testing.assert_allclose(I.logit_difference(x, t), by_sort, rtol=0, atol=0)
    np.testing.assert_array_equal(x, kept)  # the logits are not changed in place
    with pytest.raises(ValueError, match="target"):
        I.logit_difference(x, t[:, :3])
