"""The decoder's configuration: its hyper-parameters and the names they may take.

Taught with the decoder in chapter 06 (``chapters/06_block.ipynb``; the position schemes in
chapter 05). ``npformer.block`` and ``npformer.model`` both read a ``DecoderConfig``, so it
lives below both of them; ``npformer.model`` hands it on to readers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npformer.validation import divisible, flag, positive_number

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
    if not isinstance(value, str) or value not in POSITION_SCHEMES:
        raise ValueError(
            f"{fn}: positions must be one of {POSITION_SCHEMES} (or True / False for "
            f"'learned' / 'none'), got {value!r}"
        )
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
        for name in ("vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{fn}: {name} must be a positive integer, got {value!r}")
        divisible(fn, self.d_model, self.num_heads)
        if self.ln not in LN_PLACEMENTS:
            raise ValueError(f"{fn}: ln must be one of {LN_PLACEMENTS}, got {self.ln!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"{fn}: activation must be one of {ACTIVATIONS}, got {self.activation!r}"
            )
        positive_number(fn, "ln_eps", self.ln_eps)
        positive_number(fn, "rope_scale", self.rope_scale)
        flag(fn, "scale", self.scale)
        flag(fn, "final_ln", self.final_ln)
        object.__setattr__(self, "positions", position_scheme(fn, self.positions))
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(
                f"{fn}: positions='sinusoidal' needs an even d_model (sin/cos pairs), "
                f"got d_model={self.d_model}"
            )
        if self.positions == "rope" and self.d_head % 2:
            raise ValueError(
                f"{fn}: positions='rope' needs an even d_head (RoPE rotates pairs), got "
                f"d_head={self.d_head} (d_model={self.d_model}, num_heads={self.num_heads})"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads


def check_config(fn: str, config) -> DecoderConfig:
    """Return ``config`` if it is a DecoderConfig, or raise ValueError naming its type."""
    if not isinstance(config, DecoderConfig):
        raise ValueError(f"{fn}: config must be a DecoderConfig, got {type(config).__name__}")
    return config
