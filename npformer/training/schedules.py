"""Learning-rate schedules: the warm-up then inverse-square-root decay of the 2017 Transformer.

Taught in chapter 07 (``chapters/07_encoder_decoder.ipynb``), which trains the encoder-decoder
with it. Vaswani et al. (2017), Section 5.3:

    lrate(step) = d_model^-0.5 min(step^-0.5, step warmup^-1.5),   step = 1, 2, ...

The rate grows linearly for ``warmup`` steps, peaks at step = warmup with
(d_model warmup)^-0.5, and then decays as step^-0.5. ``factor`` multiplies the whole curve (1
in the paper).
"""

from __future__ import annotations


def warmup_inverse_sqrt(step, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The 2017 schedule at ``step`` (counted from 1): factor d^-0.5 min(step^-0.5, step w^-1.5).

    Raises ValueError for a step, d_model or warmup below 1. Returns a Python float.
    """
    if min(step, d_model, warmup) < 1:  # step and warmup are counted from 1
        raise ValueError(
            f"warmup_inverse_sqrt: step={step}, d_model={d_model} and warmup={warmup} must be >= 1"
        )
    return float(factor) * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
