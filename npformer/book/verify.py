"""``python -m npformer verify``: check this machine against the book's numbers (preface).

A reader whose numbers differ from the book's wants to know whether the machine is the cause.
This module recomputes a dozen numbers that the chapters print, from several chapters: closed
forms and seeded results that do not depend on the floating-point kernels, plus one short
seeded training run whose last digits do. Each gets one verdict:

- ``equal``: the value the book prints, to the digits it prints;
- ``within band``: not equal, but inside the range the book measured for it across kernels
  (only the training run has a band; exact quantities have none);
- ``outside``: neither. The command then exits with status 1.

The machine's BLAS library and kernels, and NumPy's SIMD extensions, are printed first.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np


class Reference(NamedTuple):
    """One number of the book: where it is printed, what it is, how it is recomputed."""

    name: str
    chapter: str
    expected: float
    digits: int  # significant digits the book prints; "equal" means equal at these digits
    band: tuple[float, float] | None  # the range measured across kernels, or None if exact
    compute: Callable[[], float]


class Verdict(NamedTuple):
    reference: Reference
    value: float
    verdict: str  # "equal", "within band" or "outside"


def _rounded(x: float, digits: int) -> float:
    return float(f"{x:.{digits}g}")


def judge(ref: Reference, value: float) -> str:
    """The verdict for ``value`` against ``ref``."""
    if not math.isfinite(value):
        return "outside"
    if _rounded(value, ref.digits) == _rounded(ref.expected, ref.digits):
        return "equal"
    if ref.band is not None and ref.band[0] <= value <= ref.band[1]:
        return "within band"
    return "outside"


# --- the recomputations, one small function per number --------------------------------------


def _slowest_period() -> float:
    from npformer.core.positions import sinusoidal_frequencies

    return float(2 * np.pi / sinusoidal_frequencies(512).min())


def _shift_matrix_position_free() -> float:
    """max |M_k PE(pos) - PE(pos + k)| over positions: 0 up to rounding (a verdict, 1 or 0)."""
    from npformer.core.positions import sinusoidal_positions, sinusoidal_shift_matrix

    pe = sinusoidal_positions(200, 64)
    gap = np.abs(pe[:-7] @ sinusoidal_shift_matrix(7, 64).T - pe[7:]).max()
    return float(gap < 1e-10)


def _block_params(d: int) -> Callable[[], float]:
    def compute() -> float:
        from npformer.core.model import DecoderConfig, block_num_params

        config = DecoderConfig(
            vocab_size=16, d_model=d, num_heads=8, num_layers=1, d_ff=4 * d, max_len=8
        )
        return float(block_num_params(config))

    return compute


def _base_model_params() -> float:
    from npformer.core.encoder_decoder import EncoderDecoderConfig, parameter_count

    config = EncoderDecoderConfig(
        vocab_size=37000,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        num_encoder_layers=6,
        num_decoder_layers=6,
        final_ln=False,
    )
    return float(parameter_count(config)["total"])


def _cache_gib(layers: int, kv_heads: int, d_head: int, T: int, batch: int, nbytes: int):
    def compute() -> float:
        from npformer.core.kv_cache import kv_cache_bytes

        return kv_cache_bytes(layers, kv_heads, d_head, T, batch, nbytes) / 2**30

    return compute


def _experiment_params() -> float:
    from npformer.core.model import num_params
    from npformer.training.train import TrainConfig

    return float(num_params(TrainConfig().model_config()))


def _distinct_share() -> float:
    from npformer.training.tasks import distinct_share

    return distinct_share(6)


def _attention_matches_loops() -> float:
    """Seeded attention against a plain loop in float64: 1 if they agree to 1e-12, else 0."""
    from npformer.core.attention import scaled_dot_product_attention

    rng = np.random.default_rng(1)
    Q, K, V = (rng.standard_normal((5, 4)) for _ in range(3))
    out, _ = scaled_dot_product_attention(Q, K, V)
    loop = np.zeros_like(out)
    for i in range(5):
        z = [sum(Q[i, c] * K[j, c] for c in range(4)) / 2.0 for j in range(5)]
        w = [math.exp(zj - max(z)) for zj in z]
        for j in range(5):
            loop[i] += w[j] / sum(w) * V[j]
    return float(np.abs(out - loop).max() < 1e-12)


def _score_matrix_mib() -> float:
    """Bytes of one T x T float64 score matrix at T = 2048, in MiB (chapter 08)."""
    return float(np.empty((2048, 2048)).nbytes / 2**20)


def _short_training() -> float:
    """Final training loss (mean of the last 20 steps) of a 300-step seeded copy run, L = 4."""
    from npformer.training.train import TrainConfig, train

    result = train(TrainConfig(task="copy", length=4, seed=0, steps=300))
    return float(result.losses[-20:].mean())


REFERENCES: tuple[Reference, ...] = (
    Reference(
        "attention equals a plain loop (1 = yes)", "01", 1.0, 1, None, _attention_matches_loops
    ),
    Reference("limit of the entropy, ln 64", "02", 4.1589, 5, None, lambda: math.log(64)),
    Reference("limit of the sensitivity, 1 - 1/64", "02", 0.9844, 4, None, lambda: 1 - 1 / 64),
    Reference("slowest sinusoid period at d = 512", "05", 60611, 5, None, _slowest_period),
    Reference(
        "M_k independent of position (1 = yes)", "05", 1.0, 1, None, _shift_matrix_position_free
    ),
    Reference("parameters of one block, d = 64", "06", 49984, 5, None, _block_params(64)),
    Reference("parameters of one block, d = 256", "06", 789760, 6, None, _block_params(256)),
    Reference("parameters of one block, d = 512", "06", 3152384, 7, None, _block_params(512)),
    Reference("2017 base model, parameters by count", "07", 63082496, 8, None, _base_model_params),
    Reference(
        "one T x T float64 score matrix, T = 2048 (MiB)", "08", 32, 2, None, _score_matrix_mib
    ),
    Reference(
        "KV cache, 32 layers, T = 4096, float16 (GiB)",
        "09",
        2.0,
        4,
        None,
        _cache_gib(32, 32, 128, 4096, 1, 2),
    ),
    Reference(
        "KV cache, one shared K,V pair (GiB)",
        "09",
        0.0625,
        3,
        None,
        _cache_gib(32, 1, 128, 4096, 1, 2),
    ),
    Reference("parameters of the experiment's decoder", "10", 27253, 5, None, _experiment_params),
    Reference(
        "share of L = 6 prompts with distinct symbols", "11", 0.4361, 4, None, _distinct_share
    ),
    # The band: the lowest and highest value over six kernel settings (OpenBLAS Haswell,
    # SkylakeX, Sandybridge, Zen, Prescott; Prescott with NumPy's baseline SIMD) on AMD EPYC.
    Reference(
        "copy L = 4, 300 steps: final loss",
        "10",
        0.003442,
        3,
        (0.003442064, 0.003442175),
        _short_training,
    ),
)


def machine_kernels() -> list[str]:
    """Lines naming the machine's BLAS kernels and NumPy's SIMD extensions."""
    import platform

    lines = [f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}"]
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            lines.append(
                f"BLAS: {pool.get('internal_api')} {pool.get('version')}, "
                f"kernels {pool.get('architecture')}, {pool.get('num_threads')} thread(s)"
            )
    except ImportError:  # pragma: no cover - threadpoolctl is in the lock
        lines.append("BLAS: (threadpoolctl not installed)")
    try:
        from numpy._core._multiarray_umath import (
            __cpu_baseline__,
            __cpu_dispatch__,
            __cpu_features__,
        )

        used = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
        lines.append(
            f"NumPy SIMD: baseline {' '.join(__cpu_baseline__)}; dispatched {' '.join(used)}"
        )
    except ImportError:  # pragma: no cover - a NumPy without these names
        lines.append("NumPy SIMD: (not reported by this NumPy)")
    return lines


def verify(
    references: tuple[Reference, ...] = REFERENCES,
    overrides: Mapping[str, float] | None = None,
    stream=None,
) -> list[Verdict]:
    """Recompute every reference, print one line each, return the verdicts.

    ``overrides`` maps a reference's name to a value to use instead of recomputing it (for
    testing that a wrong value is reported as outside).
    """
    stream = sys.stdout if stream is None else stream
    overrides = dict(overrides or {})
    unknown = set(overrides) - {r.name for r in references}
    if unknown:
        raise ValueError(f"verify: overrides name unknown references {sorted(unknown)}")
    for line in machine_kernels():
        print(line, file=stream)
    verdicts = []
    for ref in references:
        value = overrides[ref.name] if ref.name in overrides else ref.compute()
        verdict = judge(ref, value)
        verdicts.append(Verdict(ref, value, verdict))
        band = f" (band {ref.band[0]:g} to {ref.band[1]:g})" if ref.band else ""
        print(
            f"ch{ref.chapter} {ref.name}: {value:.{ref.digits}g}, "
            f"book {ref.expected:.{ref.digits}g}{band}: {verdict}",
            file=stream,
        )
    outside = sum(v.verdict == "outside" for v in verdicts)
    print(f"verify: {len(verdicts) - outside} of {len(verdicts)} as in the book", file=stream)
    return verdicts


def main(argv: list[str] | None = None) -> int:
    verdicts = verify()
    return 1 if any(v.verdict == "outside" for v in verdicts) else 0
