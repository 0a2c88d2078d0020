"""The tiny decoder the model tests share: 7 tokens, d = 8, 2 heads, 2 blocks, 6 positions."""

import numpy as np

from npformer.core import model as M

TINY = dict(vocab_size=7, d_model=8, num_heads=2, num_layers=2, d_ff=16, max_len=6)


def tiny_model(seed=0, **changes):
    """A small random model with non-trivial biases and layer-norm parameters."""
    config = M.DecoderConfig(**{**TINY, **changes})
    rng = np.random.default_rng(seed)
    params = M.init_params(config, rng)
    for p in params.values():
        if p.ndim == 1:
            p += 0.3 * rng.normal(size=p.shape)
    return config, params
