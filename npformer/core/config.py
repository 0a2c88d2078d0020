"""The decoder's configuration: its hyper-parameters and the names they may take.

Taught with the decoder in chapter 06 (``chapters/06_block.ipynb``; the position schemes in
chapter 05). ``npformer.core.block`` and ``npformer.core.model`` both read a ``DecoderConfig``, so
it lives below both of them; ``npformer.core.model`` hands it on to readers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npformer.core.validation import divisible

#: The feed-forward network's activations (chapter 06).
ACTIVATIONS = ("relu", "gelu", "swiglu")

LN_PLACEMENTS = ("pre", "post")

#: Where the decoder's position information comes from (chapter 05): a learned table added to
#: the embeddings, the fixed sinusoidal table added to them, rotary queries and keys in every
#: attention layer, ALiBi's linear distance penalty on the scores, or nothing at all.
POSITION_SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")


class PositionScheme(str):
    """A name from ``POSITION_SCHEMES`` that is false only for "none".

    True and False are accepted for "learned" and "none", so ``if config.positions:`` asks
    whether the model has any position information.
    """

    __slots__ = ()

    def __bool__(self) -> bool:
        return self != "none"


def position_scheme(fn: str, value) -> PositionScheme:
    """``value`` as a PositionScheme: a name of ``POSITION_SCHEMES``, or True / False for
    "learned" / "none"; anything else raises ValueError naming it."""
    if isinstance(value, (bool, np.bool_)):
        return PositionScheme("learned" if value else "none")
    if value not in POSITION_SCHEMES:  # a misspelt scheme would silently mean none
        raise ValueError(f"{fn}: positions must be one of {POSITION_SCHEMES}, got {value!r}")
    return PositionScheme(value)


@dataclass(frozen=True)
class DecoderConfig:
    """Hyper-parameters of the decoder-only model.

    ``max_len`` is the number of rows of the learned position table (sequences may be shorter);
    ``ln`` is "pre" (x + f(LN(x))) or "post" (LN(x + f(x))); ``scale`` divides the attention
    scores by sqrt(d_h); ``activation`` is "relu", "gelu" or "swiglu"; ``final_ln`` adds a
    layer norm before the output. ``positions`` is one of ``POSITION_SCHEMES``: "learned" (a
    table of ``max_len`` rows added to the embeddings, the default), "sinusoidal" (the fixed
    table, no parameters; needs an even d_model), "rope" (queries and keys rotated in every
    layer; needs an even d_h), "alibi" (a per-head linear penalty on the scores) or "none" (an
    ablation). True and False are read as "learned" and "none". Only "learned" limits the
    sequence length to ``max_len``. ``rope_scale`` multiplies the positions RoPE turns by
    (m -> m * rope_scale): position interpolation (Chen et al. 2023) sets it to n_train / n.
    """

    vocab_size: int
    d_model: int
    num_heads: int
    num_layers: int
    d_ff: int
    max_len: int
    ln: str = "pre"
    scale: bool = True
    activation: str = "relu"
    positions: str = "learned"
    final_ln: bool = True
    ln_eps: float = 1e-5
    rope_scale: float = 1.0

    def __post_init__(self):
        fn = "DecoderConfig"
        sizes = [self.vocab_size, self.d_model, self.num_heads, self.num_layers, self.d_ff]
        if min(sizes + [self.max_len]) < 1:
            raise ValueError(f"{fn}: every size must be >= 1, got {self}")
        divisible(fn, self.d_model, self.num_heads)
        if self.ln not in LN_PLACEMENTS or self.activation not in ACTIVATIONS:
            raise ValueError(
                f"{fn}: ln must be one of {LN_PLACEMENTS} and activation one of {ACTIVATIONS}, "
                f"got {self.ln!r} and {self.activation!r}"
            )
        object.__setattr__(self, "positions", position_scheme(fn, self.positions))
        odd = self.d_model % 2 if self.positions == "sinusoidal" else self.d_head % 2
        if self.positions in ("sinusoidal", "rope") and odd:
            raise ValueError(
                f"{fn}: positions={self.positions!r} needs an even d_model (sinusoidal) or d_head "
                f"(RoPE), got d_model={self.d_model}, num_heads={self.num_heads}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads
