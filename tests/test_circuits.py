"""QK and OV circuits of a first-layer head (chapter 12): the split is exact, the copying
score reads what it should, and bad inputs are refused."""

import numpy as np
import pytest

from npformer.analysis import circuits as Ci
from npformer.analysis import interventions as I
from tests.tiny_decoder import tiny_model


@pytest.mark.parametrize("head", [0, 1])
@pytest.mark.parametrize("scale", [True, False])
def test_the_four_terms_sum_to_the_heads_scores(head, scale):
    config, params = tiny_model(scale=scale)
    tokens = np.random.default_rng(1).integers(0, 7, size=(3, 5))
    terms = Ci.qk_terms(params, config, tokens, head)
    weights = I.forward_with_interventions(params, config, tokens).own_weights[0][:, head]
    from npformer.core.attention import masked_softmax
    from npformer.core.masks import causal_mask

    np.testing.assert_allclose(masked_softmax(terms.total(), causal_mask(5)), weights, atol=1e-12)
    assert terms.token_token.shape == (3, 5, 5)


def test_position_term_ignores_tokens_and_token_term_ignores_positions():
    config, params = tiny_model()
    a = np.array([[1, 2, 3, 4, 5]])
    b = np.array([[6, 0, 2, 2, 1]])
    ta, tb = Ci.qk_terms(params, config, a, 0), Ci.qk_terms(params, config, b, 0)
    # with the layer norm's scale s fixed, the position term would not depend on the tokens:
    # it does only through s, so it keeps its sign pattern and changes by a positive factor
    ratio = ta.position_position / tb.position_position
    assert (ratio > 0).all()
    zero_pos = {**params, "pos_emb": np.zeros_like(params["pos_emb"])}
    t0 = Ci.qk_terms(zero_pos, config, a, 0)
    np.testing.assert_array_equal(t0.position_position, 0.0)
    np.testing.assert_allclose(t0.cross, 0.0, atol=1e-15)
    # without the row scale the position term is the same whatever the tokens
    fa, fb = (Ci.qk_terms(params, config, t, 0, row_scale=False) for t in (a, b))
    np.testing.assert_array_equal(fa.position_position, fb.position_position)


def test_copying_score_of_known_matrices():
    assert Ci.copying_score(np.eye(5)) == pytest.approx(1.0)
    assert Ci.copying_score(-np.eye(5)) == pytest.approx(-1.0)
    assert Ci.copying_score(np.ones((5, 5))) == 0.0  # the same logit for every symbol
    perm = np.roll(np.eye(6), 1, axis=1)  # maps each symbol to another one: no copying
    assert abs(Ci.copying_score(perm)) < 0.3


def test_ov_circuit_is_linear_in_the_output_projection():
    config, params = tiny_model()
    m = Ci.ov_circuit(params, config, 1, np.arange(3), np.arange(6))
    assert m.shape == (6, 6)
    doubled = {**params, "W_out": 2 * params["W_out"]}
    np.testing.assert_allclose(Ci.ov_circuit(doubled, config, 1, np.arange(3), np.arange(6)), 2 * m)


def test_bad_inputs():
    config, params = tiny_model()
    tokens = np.zeros((1, 4), dtype=int)
    post, p_post = tiny_model(ln="post")
    with pytest.raises(ValueError, match="pre-LN model with a learned table"):
        Ci.qk_terms(p_post, post, tokens, 0)


# ----------------------------------------------------------------------------- patching, paths
# and direct logit attribution


def _pair(seed=2, B=4, T=6, j=1):
    rng = np.random.default_rng(seed)
    clean = rng.integers(0, 7, size=(B, T))
    corrupt = clean.copy()
    corrupt[:, j] = (clean[:, j] + rng.integers(1, 7, size=B)) % 7  # differs at j only
    return clean, corrupt, rng.integers(0, 7, size=B)


@pytest.mark.parametrize("row", [3, 5])
def test_direct_logit_attribution_sums_to_the_logit_difference(row):
    config, params = tiny_model()
    tokens, _, answer = _pair()
    dla = Ci.direct_logit_attribution(params, config, tokens, row, answer)
    logits = I.forward_with_interventions(params, config, tokens).logits[:, row]  # (B, V)
    np.testing.assert_allclose(dla.values.sum(axis=1), dla.logit_difference, atol=1e-12)
    np.testing.assert_allclose(dla.logit_difference, I.logit_difference(logits, answer), atol=1e-12)
    assert len(dla.names) == dla.values.shape[1] == 2 + 2 * (2 + 2) + 1


def test_direct_logit_attribution_of_a_silent_head_is_zero_and_rival_is_kept():
    config, params = tiny_model()
    tokens, _, answer = _pair()
    silent = {**params, "block1.attn.W_o": params["block1.attn.W_o"].copy()}
    silent["block1.attn.W_o"][4:] = 0.0  # head 1 of layer 1 writes nothing (d_h = 4)
    dla = Ci.direct_logit_attribution(silent, config, tokens, 4, answer)
    np.testing.assert_array_equal(dla.values[:, dla.names.index("(1, 1)")], 0.0)
    rival = (answer + 1) % 7
    fixed = Ci.direct_logit_attribution(params, config, tokens, 4, answer, rival=rival)
    np.testing.assert_array_equal(fixed.rival, rival)
    np.testing.assert_allclose(fixed.values.sum(axis=1), fixed.logit_difference, atol=1e-12)


def test_patching_nothing_changes_nothing_and_everything_restores_the_clean_run():
    config, params = tiny_model()
    clean, corrupt, _ = _pair(j=1)
    c = Ci.record_run(params, config, clean)
    r = Ci.record_run(params, config, corrupt)
    none = np.zeros((2, 2, 6), dtype=bool)
    np.testing.assert_array_equal(
        Ci.patch_head_outputs(params, config, corrupt, c.heads, none).logits, r.logits
    )
    # every head at every position from the clean run: rows other than the edited one see
    # only clean values (their own token, their position, clean heads), so they are clean
    every = Ci.patch_head_outputs(params, config, corrupt, c.heads, ~none).logits
    rows = [t for t in range(6) if t != 1]
    np.testing.assert_allclose(every[:, rows], c.logits[:, rows], atol=1e-12)
    assert np.abs(every[:, 1] - c.logits[:, 1]).max() > 1e-3  # the edited row is not restored


def test_head_position_map_is_one_patch_at_a_time_and_causal():
    config, params = tiny_model()
    clean, corrupt, answer = _pair(j=1)
    result = Ci.head_position_patching(params, config, clean, corrupt, 4, answer)
    assert result.patched.shape == (2, 2, 6)
    c = Ci.record_run(params, config, clean)
    where = np.zeros((2, 2, 6), dtype=bool)
    where[0, 1, 3] = True
    out = Ci.patch_head_outputs(params, config, corrupt, c.heads, where)
    D = I.logit_difference(out.logits[:, 4], answer).mean()
    assert result.patched[0, 1, 3] == pytest.approx(D, abs=1e-12)
    # a head at a position after the measured row cannot reach it (causal mask)
    np.testing.assert_allclose(result.shares()[:, :, 5], 0.0, atol=1e-12)


def test_path_patching_parts_against_a_direct_computation():
    from npformer.core.block import block_forward, final_norm
    from npformer.core.model import hidden_states

    config, params = tiny_model()
    clean, corrupt, answer = _pair(j=1)
    row, k = 4, 1
    paths = Ci.path_patching(params, config, clean, corrupt, (0, k), row, answer)
    c = Ci.record_run(params, config, clean)
    r = Ci.record_run(params, config, corrupt)
    delta = (c.heads[0][:, k] - r.heads[0][:, k]) @ params["block0.attn.W_o"][4:8]  # (B, T, d)
    x0, x1, x2 = hidden_states(params, config, corrupt)

    def D(x):  # mean logit difference at ``row`` from the stream before the final LN
        logits = final_norm(x, params, config)[0] @ params["W_out"] + params["b_out"]
        return I.logit_difference(logits[:, row], answer).mean()

    assert paths.direct == pytest.approx(D(x2 + delta), abs=1e-12)
    through, _ = block_forward(x1 + delta, params, config, 1, None)
    assert paths.later_blocks == pytest.approx(D(through - delta), abs=1e-12)
    assert paths.corrupt == pytest.approx(D(x2), abs=1e-12)

    # own_ffn: block 0's feed-forward layer reads x_mid + delta, the rest of the stream does not
    def ffn0(x):  # pre-LN: layer norm 2, then the feed-forward layer (ReLU), written out
        h = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + config.ln_eps)
        h = h * params["block0.ln2.gamma"] + params["block0.ln2.beta"]
        hidden = np.maximum(h @ params["block0.ffn.W_1"] + params["block0.ffn.b_1"], 0)
        return hidden @ params["block0.ffn.W_2"] + params["block0.ffn.b_2"]

    B, h, T, d_h = r.heads[0].shape
    attn0 = r.heads[0].transpose(0, 2, 1, 3).reshape(B, T, h * d_h) @ params["block0.attn.W_o"]
    x_mid = x0 + attn0 + params["block0.attn.b_o"]  # the stream between attention and FFN
    np.testing.assert_allclose(x_mid + ffn0(x_mid), x1, atol=1e-12)  # the pieces are right
    own, _ = block_forward(x1 + ffn0(x_mid + delta) - ffn0(x_mid), params, config, 1, None)
    assert paths.own_ffn == pytest.approx(D(own), abs=1e-12)
    where = np.zeros((2, 2, 6), dtype=bool)
    where[0, k] = True
    patched = Ci.patch_head_outputs(params, config, corrupt, c.heads, where).logits
    assert paths.total == pytest.approx(
        I.logit_difference(patched[:, row], answer).mean(), abs=1e-12
    )


def test_path_patching_without_later_blocks_is_all_direct():
    config, params = tiny_model()
    quiet = dict(params)
    for name in ("block1.attn.W_o", "block1.attn.b_o", "block1.ffn.W_2", "block1.ffn.b_2"):
        quiet[name] = np.zeros_like(params[name])
    for name in ("block0.ffn.W_2", "block0.ffn.b_2"):
        quiet[name] = np.zeros_like(params[name])
    clean, corrupt, answer = _pair(j=1)
    shares = Ci.path_patching(quiet, config, clean, corrupt, (0, 0), 4, answer).shares()
    assert shares["later_blocks"] == pytest.approx(0.0, abs=1e-12)
    assert shares["own_ffn"] == pytest.approx(0.0, abs=1e-12)
    assert shares["rest"] == pytest.approx(0.0, abs=1e-12)
    assert shares["direct"] == pytest.approx(shares["total"], abs=1e-12)


def test_prefix_matching_scores_against_a_loop_over_the_maps():
    config, params = tiny_model()
    scores = Ci.prefix_matching_scores(params, config, 4, 2, 7, batch=20, seed=3)
    # the same sequences, drawn as the function draws them, read query by query
    part = np.argsort(np.random.default_rng(3).random((20, 7)), axis=1)[:, :4]  # (20, 4)
    tokens = np.concatenate([part, part[:, :2]], axis=1)  # (20, 6)
    maps = I.forward_with_interventions(params, config, tokens).own_weights
    for layer in range(2):
        for head in range(2):
            picked = []
            for b in range(20):
                for t in (4, 5):
                    i = int(np.flatnonzero(tokens[b, :4] == tokens[b, t])[0])
                    picked.append(maps[layer][b, head, t, i + 1])
            assert scores[layer, head] == pytest.approx(np.mean(picked), abs=1e-12)


def test_bad_inputs_of_the_patching_functions():
    config, params = tiny_model()
    clean, corrupt, answer = _pair()
    with pytest.raises(ValueError, match="head .* must be in a layer before the last"):
        Ci.path_patching(params, config, clean, corrupt, (1, 0), 3, answer)
    post, p_post = tiny_model(ln="post")
