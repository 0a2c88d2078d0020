"""QK and OV circuits of a first-layer head (chapter 12): the split is exact, the copying
score reads what it should, and bad inputs are refused."""

import numpy as np
import pytest

from npformer import circuits as Ci
from npformer import interventions as I
from tests.tiny_decoder import tiny_model


@pytest.mark.parametrize("head", [0, 1])
@pytest.mark.parametrize("scale", [True, False])
def test_the_four_terms_sum_to_the_heads_scores(head, scale):
    config, params = tiny_model(scale=scale)
    tokens = np.random.default_rng(1).integers(0, 7, size=(3, 5))
    terms = Ci.qk_terms(params, config, tokens, head)
    weights = I.forward_with_interventions(params, config, tokens).own_weights[0][:, head]
    from npformer.attention import masked_softmax
    from npformer.masks import causal_mask

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
    with pytest.raises(ValueError, match="head 2 is outside 0..1"):
        Ci.qk_terms(params, config, tokens, 2)
    with pytest.raises(ValueError, match="head must be an integer"):
        Ci.qk_terms(params, config, tokens, 1.0)
    post, p_post = tiny_model(ln="post")
    with pytest.raises(ValueError, match="pre-LN model with a learned position table"):
        Ci.qk_terms(p_post, post, tokens, 0)
    with pytest.raises(ValueError, match="positions must be a non-empty 1-D array"):
        Ci.ov_circuit(params, config, 0, np.array([9]), np.arange(3))
    with pytest.raises(ValueError, match="symbols must be"):
        Ci.ov_circuit(params, config, 0, np.arange(2), np.array([], dtype=int))
    with pytest.raises(ValueError, match="finite square matrix"):
        Ci.copying_score(np.ones((2, 3)))
    with pytest.raises(ValueError, match="config must be a DecoderConfig"):
        Ci.qk_terms(params, "config", tokens, 0)
