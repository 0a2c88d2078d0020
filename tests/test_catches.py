"""Checks added because a bug of the catalogue (``mutants/``, ``make mutants``) slipped through.

Each test names, in its docstring, the mutant it was written for: before it existed, that bug
passed every test and chapter the mutant names. See mutants/README.md.
"""

import numpy as np

from npformer.core.block import feed_forward, feed_forward_backward, init_feed_forward_params
from npformer.core.model import DecoderConfig, forward, init_params
from npformer.core.multi_head import WEIGHT_NAMES, init_multi_head_params
from npformer.training.train import prompt_attention_mask


def test_bidirectional_prompt_mask_hides_everything_after_the_prompt():
    """Mutant ``prompt_mask_leaks_the_answer``: the prompt's rows opened to the whole sequence.

    The existing test looked at the prompt block and at the rows after the prompt, never at the
    prompt rows' keys after the prompt. Here the whole mask is compared with its definition, and
    the model run with it is checked for the property that matters: no position from the
    separator on reads a later token.
    """
    L, T = 3, 7
    mask = prompt_attention_mask(L, T, bidirectional=True)
    expected = np.tril(np.ones((T, T), dtype=bool))  # causal
    expected[:L, :L] = True  # the prompt sees itself both ways, and nothing after it
    np.testing.assert_array_equal(mask, expected)

    config = DecoderConfig(vocab_size=11, d_model=8, num_heads=2, num_layers=2, d_ff=16, max_len=T)
    params = init_params(config, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 11, size=(2, T))
    logits, _ = forward(params, config, tokens, mask)
    for t in range(L, T):  # change token t: the logits before t must not move
        changed = tokens.copy()
        changed[:, t] = (changed[:, t] + 1) % 11
        other, _ = forward(params, config, changed, mask)
        np.testing.assert_allclose(other[:, :t], logits[:, :t], rtol=0, atol=1e-12)


def test_multi_head_init_keeps_the_scale_of_its_input():
    """Mutant ``multi_head_init_scale_one_over_d``: weights drawn N(0, 1/d^2) instead of N(0, 1/d).

    Every test used the weights as they came, and attention is right for any weights; only the
    promise of the docstring (x @ W keeps the scale of x) was never measured.
    """
    d = 256
    params = init_multi_head_params(d, np.random.default_rng(0))
    x = np.random.default_rng(1).standard_normal((64, d))  # rows of norm about sqrt(d)
    for name in WEIGHT_NAMES:
        W = params[name]
        assert abs(W.std() * np.sqrt(d) - 1) < 0.02, (name, W.std())
        ratio = np.linalg.norm(x @ W) / np.linalg.norm(x)
        assert 0.9 < ratio < 1.1, (name, ratio)


def test_decoder_weights_are_scaled_by_their_fan_in():
    """Mutant ``init_params_fan_out``: weights divided by sqrt(d_out) instead of sqrt(d_in).

    The gradient checks, the torch twin and the training tests all pass for any initial
    weights; the rule "N(0, 1) / sqrt(d_in)" of ``init_params`` is checked here, on matrices
    whose two sides differ (W_qkv is (d, 3d), the FFN's W_2 is (d_ff, d), W_out is (d, V)).
    """
    config = DecoderConfig(vocab_size=300, d_model=64, num_heads=4, num_layers=1, d_ff=256,
                           max_len=8)  # fmt: skip
    params = init_params(config, np.random.default_rng(0))
    for name in ("block0.attn.W_qkv", "block0.attn.W_o", "block0.ffn.W_1", "block0.ffn.W_2",
                 "W_out"):  # fmt: skip
        W = params[name]
        assert abs(W.std() * np.sqrt(W.shape[0]) - 1) < 0.05, (name, W.shape, W.std())


def test_relu_backward_gives_the_kink_derivative_zero():
    """Mutant ``relu_kink_derivative_one``: the ReLU backward uses pre >= 0 instead of pre > 0.

    Central differences never sample the kink (random inputs miss 0), and torch's ReLU also
    gives it derivative 0, so every comparison agreed. Pre-activations exactly 0 are not rare:
    a zero input row with the zero initial biases gives them. Then no gradient may flow.
    """
    params = init_feed_forward_params(6, 12, np.random.default_rng(0))
    x = np.zeros((2, 3, 6))  # every pre-activation is exactly 0 (the biases start at 0)
    out, cache = feed_forward(x, params)
    dx, grads = feed_forward_backward(np.ones_like(out), cache)
    assert not dx.any()
    assert not grads["b_1"].any() and not grads["W_1"].any()
