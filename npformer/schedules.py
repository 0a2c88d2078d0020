"""Learning-rate schedules: the warm-up then inverse-square-root decay of the 2017 Transformer.

Taught in chapter 07 (``chapters/07_encoder_decoder.ipynb``), which trains the encoder-decoder
with it. Vaswani et al. (2017), Section 5.3:

    lrate(step) = d_model^-0.5 min(step^-0.5, step warmup^-1.5),   step = 1, 2, ...

The rate grows linearly for ``warmup`` steps, peaks at step = warmup with
(d_model warmup)^-0.5, and then decays as step^-0.5. ``factor`` multiplies the whole curve (1
in the paper).
"""

from __future__ import annotations

import math

import numpy as np


def _positive_int(fn: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{fn}: {name} must be a positive integer, got {value!r}")
    return int(value)


def warmup_inverse_sqrt(step, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The 2017 schedule at ``step`` (counted from 1): factor d^-0.5 min(step^-0.5, step w^-1.5).

    Raises ValueError for a step, d_model or warmup that is not a positive integer, and for a
    factor that is not a positive number. Returns a Python float.
    """
    fn = "warmup_inverse_sqrt"
    step = _positive_int(fn, "step", step)
    d_model = _positive_int(fn, "d_model", d_model)
    warmup = _positive_int(fn, "warmup", warmup)
    if isinstance(factor, bool) or not isinstance(factor, (int, float, np.floating)):
        raise ValueError(f"{fn}: factor must be a positive number, got {factor!r}")
    if not factor > 0 or not math.isfinite(factor):
        raise ValueError(f"{fn}: factor must be a positive number, got {factor!r}")
    return float(factor) * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
