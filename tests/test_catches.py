"""Checks added because a bug of the catalogue (``mutants/``, ``make mutants``) slipped through.

Each test names, in its docstring, the mutant it was written for: before it existed, that bug
passed every test and chapter the mutant names. See mutants/README.md.
"""

import numpy as np

from npformer.model import DecoderConfig, forward, init_params
from npformer.train import prompt_attention_mask


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
