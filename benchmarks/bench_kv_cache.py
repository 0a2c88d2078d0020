"""KV cache (chapter 09): generating with the cache against generating without it.

The toy attention-only model of the chapter (4 layers, 8 heads, d = 256, float64, seed 5)
generates after a 32-row prompt. "Without" is ``generate_without_cache``: at every step the same
layer code runs over the whole prefix, as a model without a cache must; "with" is
``generate_with_cache``: one prefill, then one row per step through a preallocated cache.

- kv_cache_speedup_128: 128 vectors, the source's configuration. Target >= 40 (the issue's;
  the source's own listing reaches 28x on a 2-core machine of this class).
- kv_cache_speedup_512: 512 vectors. Running the uncached generation to 512 takes ~45 s per
  run, too long to alternate several times, so its time is measured step by step on a sample:
  step t of that generation is one forward pass over the 32 + t rows before it (plus one
  concatenation), and since the cached run produces the very same rows (checked), the step can
  be timed on them. Every STRIDE-th step is timed (its midpoint) and counted STRIDE times; the
  step cost is a smooth function of t, so this sums the real run to within a few percent (the
  benchmark prints the same estimate for the 128-vector run next to the measured time: 1.73 s
  against 1.69 s in one run).
  Target >= 100: the ratio must grow with length, because the mean prefix an uncached step
  processes triples from 128 to 512 vectors (96 -> 288 rows, and its attention grows with the
  square of that) while a cached step only reads a longer cache (its mean time grows about
  1.2x); 2.5 x the 128 target is what the linear term alone gives. Measured 189-197 on a quiet
  2-core machine of this class (159 with the machine heavily loaded by other work), against
  46-48 for kv_cache_speedup_128.

Both targets hold in the environment of `make bench`, where every large score array of the
uncached path is fresh pages from the kernel (see ``allocator_note``); the last line printed
gives, without a target, the 128-vector ratio when glibc keeps freed memory instead.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import time

import numpy as np
from harness import median_time_ratio

from npformer.kv_cache import (
    attention_only_forward,
    generate_with_cache,
    generate_without_cache,
    init_attention_only_model,
    next_input,
)

NUM_LAYERS, D_MODEL, NUM_HEADS, NUM_KV_HEADS, PROMPT = 4, 256, 8, 8, 32
STRIDE = 8


def run(report) -> None:
    rng = np.random.default_rng(5)
    layers = init_attention_only_model(NUM_LAYERS, D_MODEL, NUM_HEADS, NUM_KV_HEADS, rng)
    prompt = rng.standard_normal((1, PROMPT, D_MODEL))
    heads = (NUM_HEADS, NUM_KV_HEADS)

    def without_128():
        return generate_without_cache(prompt, layers, 128, *heads)

    def with_128():
        return generate_with_cache(prompt, layers, 128, *heads)

    diff = np.abs(without_128() - with_128()).max()
    if not diff < 1e-12:
        raise AssertionError(f"cached and uncached generations differ by {diff:.1e}")
    ratio, t_without, t_with = median_time_ratio(without_128, with_128, pairs=5)
    print(f"  128 vectors: without cache {t_without:.2f} s, with {t_with * 1e3:.1f} ms (medians)")
    report("kv_cache_speedup_128", ratio, 40)

    sequence = generate_with_cache(prompt, layers, 512, *heads)  # (1, 544, d)
    sampled = np.arange(STRIDE // 2, 512, STRIDE)  # the timed steps
    step_seconds = np.zeros(len(sampled))

    def without_512_sampled():
        for i, t in enumerate(sampled):
            start = time.perf_counter()
            prefix = sequence[:, : PROMPT + t]  # the rows step t of the uncached run sees
            Y = attention_only_forward(prefix, layers, *heads)  # (1, 32 + t, d)
            np.concatenate([prefix, next_input(Y)], axis=1)
            step_seconds[i] = time.perf_counter() - start

    def with_512():
        return generate_with_cache(prompt, layers, 512, *heads)

    # The generation without a cache must itself produce these rows: check a few steps.
    for t in (0, 255, 511):
        step = next_input(attention_only_forward(sequence[:, : PROMPT + t], layers, *heads))
        if not np.abs(step - sequence[:, PROMPT + t : PROMPT + t + 1]).max() < 1e-12:
            raise AssertionError(f"step {t} of the uncached run differs from the cached run")
    ratio, t_sampled, t_with = median_time_ratio(without_512_sampled, with_512, pairs=3)
    estimate_128 = STRIDE * step_seconds[sampled < 128].sum()
    print(
        f"  512 vectors: without cache ~{STRIDE * t_sampled:.1f} s (every {STRIDE}th step timed),"
        f" with {t_with * 1e3:.0f} ms (medians)\n"
        f"  the same estimate for the 128-vector run: {estimate_128:.2f} s "
        f"(measured above: {t_without:.2f} s)"
    )
    report("kv_cache_speedup_512", STRIDE * ratio, 100)
    allocator_note(without_128, with_128)


def allocator_note(without_128, with_128) -> None:
    """Print (no target) the 128-vector ratio when glibc keeps freed memory for reuse.

    Under `make bench` (MALLOC_TRIM_THRESHOLD_ set, so glibc's mmap threshold stays at 128 KiB)
    every score array of the uncached path is fresh pages from the kernel; the cached path
    allocates almost nothing. This shows how much of the ratio that is (chapter 09 measures it
    side by side), then puts the allocator back as it was for the benchmarks that follow.
    """
    libc_path = ctypes.util.find_library("c")
    libc = ctypes.CDLL(libc_path) if libc_path else None
    if libc is None or not hasattr(libc, "mallopt") or not hasattr(libc, "malloc_trim"):
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
    trim = int(os.environ.get("MALLOC_TRIM_THRESHOLD_", 128 * 1024))
    libc.mallopt(M_TRIM_THRESHOLD, 2**30)
    libc.mallopt(M_MMAP_THRESHOLD, 2**30)
    try:
        ratio, t_without, t_with = median_time_ratio(without_128, with_128, pairs=3)
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, 128 * 1024)
        libc.mallopt(M_TRIM_THRESHOLD, trim)
        libc.malloc_trim(0)
    print(
        f"  information, no target: with glibc keeping freed memory (mallopt), 128 vectors: "
        f"without cache {t_without:.2f} s, with {t_with * 1e3:.1f} ms, ratio {ratio:.1f}"
    )
