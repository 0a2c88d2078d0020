"""Bad scalar and container arguments to the public functions of the core modules (attention,
multi_head, block, model, optim, gradcheck): each raises ValueError naming the argument, never
TypeError, AttributeError, IndexError or ZeroDivisionError.

One table: for every (function, argument) a call with that argument replaced by a bad value of
the kinds that matter (None, a bool or a float where an int is expected, a zero width).
"""

import numpy as np
import pytest

from npformer import attention as A
from npformer import block as BL
from npformer import gradcheck as G
from npformer import model as M
from npformer import multi_head as MH
from npformer import optim as O

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 3, 4))
CFG = M.DecoderConfig(7, 8, 2, 1, 16, 6)
PARAMS = M.init_params(CFG, np.random.default_rng(1))
TOKENS = np.zeros((2, 3), dtype=int)
MHP = MH.init_multi_head_params(4, np.random.default_rng(2))
FFP = BL.init_feed_forward_params(4, 8, np.random.default_rng(3))
ONES, ZEROS = np.ones(4), np.zeros(4)

CASES = {
    # function(argument): call with the bad value, expected words of the message
    "softmax(axis)": (lambda v: A.softmax(X, axis=v), [1.0, True, None], "axis"),
    "softmax(x)": (lambda v: A.softmax(v), [None, "x"], "x must be a floating array"),
    "masked_softmax(axis)": (lambda v: A.masked_softmax(X, axis=v), [1.5, None], "axis"),
    "sdpa(Q)": (lambda v: A.scaled_dot_product_attention(v, X, X), [None], "Q must be"),
    "sdpa(scale)": (lambda v: A.scaled_dot_product_attention(X, X, X, scale=v), [None, 1], "scale"),
    "sdpa(width 0)": (lambda v: A.scaled_dot_product_attention(v, v, X), [X[..., :0]], "d_h = 0"),
    "sdpa(bias)": (lambda v: A.scaled_dot_product_attention(X, X, X, bias=v), ["b"], "bias"),
    "sdpa_backward(cache)": (
        lambda v: A.scaled_dot_product_attention_backward(X, v),
        [None, (X, X, X, X, 1.0)],
        "cache",
    ),
    "split_heads(num_heads)": (lambda v: MH.split_heads(X, v), [None, True, 2.0, 0], "num_heads"),
    "init_multi_head_params(d_model)": (
        lambda v: MH.init_multi_head_params(v, RNG),
        [None, True, 4.0, 0],
        "d_model",
    ),
    "init_multi_head_params(rng)": (lambda v: MH.init_multi_head_params(4, v), [None, 0], "rng"),
    "multi_head_attention(params)": (
        lambda v: MH.multi_head_attention(X, X, v, 2),
        [None, [1]],
        "params",
    ),
    "multi_head_attention(num_heads)": (
        lambda v: MH.multi_head_attention(X, X, MHP, v),
        [None, True, 2.0],
        "num_heads",
    ),
    "multi_head_attention(width 0)": (
        lambda v: MH.multi_head_attention(v, v, MHP, 2),
        [X[..., :0]],
        "d_model",
    ),
    "layer_norm(eps)": (
        lambda v: BL.layer_norm(X, ONES, ZEROS, eps=v),
        [None, True, -1.0, 0.0, float("nan")],
        "eps",
    ),
    "layer_norm(width 0)": (
        lambda v: BL.layer_norm(v, np.ones(0), np.zeros(0)),
        [X[..., :0]],
        "width d = 0",
    ),
    "layer_norm_backward(cache)": (lambda v: BL.layer_norm_backward(X, v), [None, ()], "cache"),
    "feed_forward(params)": (lambda v: BL.feed_forward(X, v), [None, [1]], "params"),
    "feed_forward_backward(cache)": (lambda v: BL.feed_forward_backward(X, v), [None], "cache"),
    "init_feed_forward_params(d_model)": (
        lambda v: BL.init_feed_forward_params(v, 8, RNG),
        [None, True, 4.0, 0],
        "d_model",
    ),
    "init_feed_forward_params(rng)": (
        lambda v: BL.init_feed_forward_params(4, 8, v),
        [None, 1],
        "rng",
    ),
    "feed_forward_num_params(d_ff)": (
        lambda v: BL.feed_forward_num_params(4, v),
        [None, True, 8.0, 0],
        "d_ff",
    ),
    "gelu(x)": (lambda v: BL.gelu(v), [None], "x must be"),
    "relu(x)": (lambda v: BL.relu(v), [None], "x must be"),
    "silu(x)": (lambda v: BL.silu(v), [None], "x must be"),
    "DecoderConfig(d_model)": (
        lambda v: M.DecoderConfig(7, v, 2, 1, 16, 6),
        [None, True, 8.0, 0],
        "d_model",
    ),
    "DecoderConfig(scale)": (
        lambda v: M.DecoderConfig(7, 8, 2, 1, 16, 6, scale=v),
        [None],
        "scale",
    ),
    "DecoderConfig(final_ln)": (
        lambda v: M.DecoderConfig(7, 8, 2, 1, 16, 6, final_ln=v),
        [None, 1],
        "final_ln",
    ),
    "DecoderConfig(ln_eps)": (
        lambda v: M.DecoderConfig(7, 8, 2, 1, 16, 6, ln_eps=v),
        [None, True, 0.0],
        "ln_eps",
    ),
    "DecoderConfig(positions)": (
        lambda v: M.DecoderConfig(7, 8, 2, 1, 16, 6, positions=v),
        [None, 1, "rotary"],
        "positions",
    ),
    "init_params(config)": (lambda v: M.init_params(v, RNG), [None, {}], "config"),
    "init_params(rng)": (lambda v: M.init_params(CFG, v), [None, 0], "rng"),
    "init_params(dtype)": (lambda v: M.init_params(CFG, RNG, v), ["nope", np.int64], "dtype"),
    "forward(params)": (lambda v: M.forward(v, CFG, TOKENS), [None, [1]], "params"),
    "forward(config)": (lambda v: M.forward(PARAMS, v, TOKENS), [None], "config"),
    "forward(tokens)": (
        lambda v: M.forward(PARAMS, CFG, v),
        [None, np.zeros((2, 0), int), np.zeros((2, 3), bool), np.zeros((2, 3))],
        "tokens",
    ),
    "loss_and_grads(loss_mask)": (
        lambda v: M.loss_and_grads(PARAMS, CFG, TOKENS, TOKENS, v),
        [None, np.zeros(3)],
        "loss_mask",
    ),
    "loss_and_grads(targets)": (
        lambda v: M.loss_and_grads(PARAMS, CFG, TOKENS, v, np.ones(3)),
        [None, TOKENS.astype(float)],
        "targets",
    ),
    "hidden_states(params)": (lambda v: M.hidden_states(v, CFG, TOKENS), [None], "params"),
    "masked_cross_entropy(logits)": (
        lambda v: M.masked_cross_entropy(v, TOKENS, np.ones(3)),
        [None],
        "logits",
    ),
    "masked_cross_entropy_backward(cache)": (
        lambda v: M.masked_cross_entropy_backward(v),
        [None, ()],
        "cache",
    ),
    "backward(cache)": (lambda v: M.backward(np.zeros((2, 3, 7)), v), [None, ()], "cache"),
    "num_params(config)": (lambda v: M.num_params(v), [None], "config"),
    "block_num_params(config)": (lambda v: M.block_num_params(v), [None], "config"),
    "parameter_shapes(config)": (lambda v: M.parameter_shapes(v), [None], "config"),
    "block_parameter_shapes(layer)": (
        lambda v: M.block_parameter_shapes(CFG, v),
        [None, 0.5, True, 1, -1],
        "layer",
    ),
    "ffn_preactivations(cache)": (lambda v: M.ffn_preactivations(v), [None], "cache"),
    "Adam(lr)": (lambda v: O.Adam(PARAMS, lr=v), [None, True, 0, float("inf")], "lr"),
    "relative_error(a)": (lambda v: G.relative_error(v, 1.0), [None, "a"], "a must be numbers"),
    "normwise_relative_error(a)": (
        lambda v: G.normwise_relative_error(v, {}),
        [None, [1]],
        "a must be a dict",
    ),
    "central_difference(loss_fn)": (
        lambda v: G.central_difference(v, np.zeros(3), 0, 1e-6),
        [None, 1.0],
        "loss_fn",
    ),
    "central_difference(eps)": (
        lambda v: G.central_difference(lambda: 0.0, np.zeros(3), 0, v),
        [None, True, 0.0, -1e-6],
        "eps",
    ),
    "central_difference(index)": (
        lambda v: G.central_difference(lambda: 0.0, np.zeros(3), v, 1e-6),
        [None, 0.5, True, 3, -4, (0, 0)],
        "index",
    ),
    "central_difference(array)": (
        lambda v: G.central_difference(lambda: 0.0, v, 0, 1e-6),
        [None, [0.0]],
        "array",
    ),
    "kink_crossed(eps)": (
        lambda v: G.kink_crossed(lambda: np.zeros(1), np.zeros(3), 0, v),
        [None, True],
        "eps",
    ),
    "select_coordinates(grads)": (lambda v: G.select_coordinates(v), [None, [1]], "grads"),
    "select_coordinates(threshold)": (
        lambda v: G.select_coordinates({"a": ONES}, threshold=v),
        [None, True, -1.0],
        "threshold",
    ),
    "select_coordinates(per_tensor)": (
        lambda v: G.select_coordinates({"a": ONES}, per_tensor=v, rng=RNG),
        [1.5, True, 0],
        "per_tensor",
    ),
    "gradient_check(params)": (
        lambda v: G.gradient_check(lambda: 0.0, v, {}, {}, 1e-6),
        [None, [1]],
        "params",
    ),
    "gradient_check(eps)": (
        lambda v: G.gradient_check(lambda: 0.0, {}, {}, {}, v),
        [None, True, 0.0],
        "eps",
    ),
}


@pytest.mark.parametrize(
    "case, value",
    [(case, value) for case, (_, values, _) in CASES.items() for value in values],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_bad_argument_raises_value_error_naming_it(case, value):
    call, _, words = CASES[case]
    with pytest.raises(ValueError, match=words):
        call(value)


def test_the_good_values_next_to_the_bad_ones_work():
    """The table's calls succeed with good values (so the errors come from the bad ones)."""
    A.softmax(X, axis=1)
    A.scaled_dot_product_attention(X, X, X, scale=np.True_)
    MH.split_heads(X, np.int64(2))
    BL.layer_norm(X, ONES, ZEROS, eps=np.float32(1e-5))
    M.block_parameter_shapes(CFG, np.int64(0))
    G.central_difference(lambda: 0.0, np.zeros(3), np.int64(2), 1e-6)
    G.central_difference(lambda: 0.0, np.zeros((2, 3)), (1, 2), 1e-6)
    G.select_coordinates({"a": ONES}, threshold=0, per_tensor=2, rng=RNG)
    O.Adam(PARAMS, lr=1)
