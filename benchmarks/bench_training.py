"""One training step of the experiment's decoder: ours (NumPy) against torch autograd.

The model of chapter 10 (copy, L = 6: d = 32, 4 heads, 2 pre-LN blocks, d_ff = 128, batch 32,
vocabulary 21) takes one step: forward, masked cross-entropy, backward, Adam.

- ``train_step_vs_torch``: the same model, the same initial weights and the same batches in
  torch (torch alone, the straightforward fast way: float32, one thread,
  ``F.scaled_dot_product_attention(is_causal=True)``, ``torch.optim.Adam(fused=True)``, the
  output layer applied to the answer positions only) over ours (float32, one thread).
- ``train_step_matmul_share``: the matrix products of one of our steps, recorded at their exact
  shapes, dtypes and memory layouts and replayed alone, over the time of the whole step. The
  rest of the step is elementwise passes, reductions and Python: the closer this share is to
  one, the less time goes anywhere but the products.
- ``train_step_float64_vs_float32`` and ``train_step_matmul_float64_vs_float32``: our step in
  float64 over our step in float32 (the same weights, cast, and the same batches), and the
  same for the step's matrix products alone, replayed as above. Raw speedups, so loose sanity
  bounds (1.2 each): chapter 10 asserts only that float32 is more than 1.1 times faster, a
  margin that held on a loaded machine with the oldest kernels (1.34 at worst, 30-step runs of
  ``npformer.training.train.train``). Measured idle on AMD EPYC, 2026-12-01: step 1.65, products
  alone 1.93 (the rest of the step, elementwise passes and Python, gains less).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F
from harness import median_time_ratio
from threadpoolctl import threadpool_limits

from npformer.core.model import init_params, loss_and_grads
from npformer.core.optim import Adam
from npformer.training.tasks import make_batch
from npformer.training.train import TrainConfig

CONFIG = TrainConfig(task="copy", length=6)
STEPS_PER_CALL = 40
NUM_BATCHES = 40


# ----------------------------------------------------------------------------- the torch twin


class TorchDecoder(torch.nn.Module):
    """Pre-LN decoder in plain torch: x @ W + b layers, fused causal attention, final LN."""

    def __init__(self, arrays: dict, num_heads: int, num_layers: int):
        super().__init__()
        self.p = torch.nn.ParameterDict(
            {n.replace(".", "_"): torch.nn.Parameter(torch.tensor(a)) for n, a in arrays.items()}
        )
        self.num_heads, self.num_layers = num_heads, num_layers

    def forward(self, tokens: torch.Tensor, answer_from: int) -> torch.Tensor:
        p, h = self.p, self.num_heads
        B, T = tokens.shape
        x = p["tok_emb"][tokens] + p["pos_emb"][:T]  # (B, T, d)
        d = x.shape[-1]
        for layer in range(self.num_layers):
            q = f"block{layer}_"
            n1 = F.layer_norm(x, (d,), p[q + "ln1_gamma"], p[q + "ln1_beta"])
            qkv = torch.addmm(p[q + "attn_b_qkv"], n1.reshape(B * T, d), p[q + "attn_W_qkv"])
            qh, kh, vh = qkv.view(B, T, 3, h, d // h).permute(2, 0, 3, 1, 4)  # (B, h, T, d_h)
            ctx = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
            merged = ctx.transpose(1, 2).reshape(B * T, d)
            x = x + torch.addmm(p[q + "attn_b_o"], merged, p[q + "attn_W_o"]).view(B, T, d)
            n2 = F.layer_norm(x, (d,), p[q + "ln2_gamma"], p[q + "ln2_beta"]).reshape(B * T, d)
            hidden = F.relu(torch.addmm(p[q + "ffn_b_1"], n2, p[q + "ffn_W_1"]))
            x = x + torch.addmm(p[q + "ffn_b_2"], hidden, p[q + "ffn_W_2"]).view(B, T, d)
        x = x[:, answer_from:]  # only the answer positions reach the loss
        x = F.layer_norm(x, (d,), p["ln_f_gamma"], p["ln_f_beta"])
        return x @ p["W_out"] + p["b_out"]  # (B, T - answer_from, V)


def torch_stepper(arrays: dict, batches: list, length: int):
    torch.manual_seed(0)
    model = TorchDecoder(arrays, CONFIG.num_heads, CONFIG.num_layers)
    optimizer = torch.optim.Adam(model.parameters(), lr=CONFIG.lr, fused=True)
    data = [(torch.from_numpy(b.tokens), torch.from_numpy(b.targets[:, length:])) for b in batches]
    state = {"i": 0, "loss": None}

    def steps(n: int) -> None:
        for _ in range(n):
            tokens, targets = data[state["i"] % len(data)]
            state["i"] += 1
            logits = model(tokens, length)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            state["loss"] = loss.detach()

    return steps, state


# ----------------------------------------------------------------------------- ours


def numpy_stepper(arrays: dict, batches: list, model_config):
    from npformer.core.optim import pack

    params = pack(arrays)
    optimizer = Adam(params, lr=CONFIG.lr)
    state = {"i": 0, "loss": None}

    def steps(n: int) -> None:
        for _ in range(n):
            batch = batches[state["i"] % len(batches)]
            state["i"] += 1
            loss, grads = loss_and_grads(params, model_config, *batch)
            optimizer.step(grads)
            state["loss"] = loss

    return steps, state, params


# ----------------------------------------------------------------------------- matmul replay


class _Recorder(np.ndarray):
    """An ndarray subclass that records every matrix product it takes part in."""

    calls: list = []

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [np.asarray(x) if isinstance(x, _Recorder) else x for x in inputs]
        outs = kwargs.get("out")
        if outs is not None:
            kwargs["out"] = tuple(np.asarray(o) if isinstance(o, _Recorder) else o for o in outs)
        if ufunc is np.matmul and method == "__call__":
            _Recorder.calls.append((plain[0], plain[1], None if outs is None else kwargs["out"][0]))
        result = getattr(ufunc, method)(*plain, **kwargs)
        if outs is not None:  # in place (x += y): hand back the recording array itself
            return outs[0] if len(outs) == 1 else outs
        return result.view(_Recorder) if isinstance(result, np.ndarray) else result


def _same_layout(a: np.ndarray) -> np.ndarray:
    """A fresh array with the shape, dtype, strides (and so the memory layout) of ``a``."""
    if a.ndim == 0 or a.size == 0:
        return a.copy()
    if any(s < 0 for s in a.strides):
        raise ValueError(f"_same_layout: negative strides {a.strides} are not replayed")
    extent = sum((n - 1) * s for n, s in zip(a.shape, a.strides, strict=True)) + a.itemsize
    base = np.empty(extent // a.itemsize + 1, dtype=a.dtype)
    out = np.lib.stride_tricks.as_strided(base, a.shape, a.strides, writeable=True)
    out[...] = a
    return out


def record_matmuls(params: dict, model_config, batch) -> tuple[list, int]:
    """The (a, b, out) operands of every matrix product of one loss-and-gradient step.

    Products with a vector or a single column (the model sums rows and columns by multiplying
    with a vector of ones: a reduction, not a matrix product) are left out and counted apart.
    Returns (calls, number of matrix-vector products left out).
    """
    recorded = {name: p.view(_Recorder) for name, p in params.items()}
    _Recorder.calls = []
    loss_and_grads(recorded, model_config, *batch)
    calls, vector_products = [], 0
    for a, b, out in _Recorder.calls:
        if min(a.ndim, b.ndim) < 2 or 1 in (a.shape[-2], b.shape[-1]):
            vector_products += 1
            continue
        calls.append((_same_layout(a), _same_layout(b), None if out is None else _same_layout(out)))
    _Recorder.calls = []
    return calls, vector_products


def replay(calls: list, n: int) -> None:
    for _ in range(n):
        for a, b, out in calls:
            if out is None:
                np.matmul(a, b)
            else:
                np.matmul(a, b, out=out)


def run(report) -> None:
    torch.set_num_threads(1)
    model_config = CONFIG.model_config()
    rng = np.random.default_rng(0)
    arrays = init_params(model_config, rng, dtype=np.float32)
    arrays = {name: np.array(a) for name, a in arrays.items()}  # plain copies
    batches = [make_batch(rng, CONFIG.batch_size, CONFIG.length, CONFIG.task) for _ in range(40)]
    n = STEPS_PER_CALL
    with threadpool_limits(limits=1):
        ours, ours_state, params = numpy_stepper(arrays, batches, model_config)
        theirs, theirs_state = torch_stepper(arrays, batches, CONFIG.length)
        # both learn the same thing from the same start: a sanity check, not a timing
        ours(200)
        theirs(200)
        assert abs(ours_state["loss"] - float(theirs_state["loss"])) < 0.05, (
            ours_state["loss"],
            float(theirs_state["loss"]),
        )
        ratio, t_torch, t_ours = median_time_ratio(
            lambda: theirs(n), lambda: ours(n), pairs=9, warmup=1
        )
        print(f"  torch twin (float32, fused SDPA, fused Adam): {t_torch / n * 1e3:.2f} ms/step")
        print(f"  ours (NumPy, float32):                        {t_ours / n * 1e3:.2f} ms/step")
        report("train_step_vs_torch", ratio, 1.5)

        calls, vector_products = record_matmuls(params, model_config, batches[0])
        print(
            f"  matrix products per step: {len(calls)} (and {vector_products} sums written "
            "as products with a vector of ones, not counted)"
        )
        shares = []
        for _ in range(9):
            start = time.perf_counter()
            ours(n)
            t_step = time.perf_counter() - start
            start = time.perf_counter()
            replay(calls, n)
            t_mm = time.perf_counter() - start
            shares.append(t_mm / t_step)
        print(f"  products alone: {statistics.median(shares) * t_ours / n * 1e3:.2f} ms/step")
        report("train_step_matmul_share", statistics.median(shares), 0.33)

        doubles = {name: a.astype(np.float64) for name, a in arrays.items()}
        ours64, _, params64 = numpy_stepper(doubles, batches, model_config)
        ratio, t64, t32 = median_time_ratio(lambda: ours64(n), lambda: ours(n), pairs=9)
        print(f"  ours in float64: {t64 / n * 1e3:.2f} ms/step, float32 {t32 / n * 1e3:.2f}")
        report("train_step_float64_vs_float32", ratio, 1.2)
        calls64, _ = record_matmuls(params64, model_config, batches[0])
        ratio, m64, m32 = median_time_ratio(
            lambda: replay(calls64, n), lambda: replay(calls, n), pairs=9
        )
        print(f"  products alone: float64 {m64 / n * 1e3:.2f} ms/step, float32 {m32 / n * 1e3:.2f}")
        report("train_step_matmul_float64_vs_float32", ratio, 1.2)
