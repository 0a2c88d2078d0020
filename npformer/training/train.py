"""Training the decoder on copy and sort, and evaluating it by true generation.

Taught in chapter 10 (``chapters/10_experiment.ipynb``); chapter 11 uses it for the ablations.

Training: Adam on the masked cross-entropy of ``npformer.core.model``, a fresh seeded batch of
``npformer.training.tasks`` at every step (no fixed training set, so nothing to overfit).
Evaluation: the model receives only the prompt and the separator and writes the answer itself, one
token at a time, each new token chosen by argmax and appended to its own input: it reads its own
previous outputs, never the true answer (teacher forcing would hide the errors that compound).

Training runs in float32: on one CPU thread the step is about 1.5x faster than in float64, and
a training run does not need float64 (the gradient checks of chapter 06 stay in float64).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from itertools import product
from pathlib import Path
from typing import NamedTuple

import numpy as np

from npformer.core.block import param_name
from npformer.core.model import (
    DecoderConfig,
    forward,
    init_params,
    loss_and_grads,
    position_scheme,
)
from npformer.core.optim import Adam
from npformer.training.tasks import (
    EVALUATION_SEED,
    TASKS,
    VOCAB_SIZE,
    answer,
    evaluation_prompts,
    make_batch,
    with_separator,
)

#: Prompt attention patterns: "causal" everywhere, or "bidirectional" among the L prompt
#: symbols (a prefix language model; the separator and the answer stay causal).
PROMPT_ATTENTION = ("causal", "bidirectional")

#: A directory where ``train`` keeps the runs it computes, so that the notebooks of one test
#: session share a run (chapter 10's grid holds most of the runs chapters 09, 11 and 12 train
#: again) instead of training it anew. Unset, nothing is kept: a reader's notebook always
#: trains. The root conftest.py sets it for one pytest session and removes the directory after.
SHARED_RUNS_ENV = "NPFORMER_SHARED_RUNS"
#: Runs shorter than this are always trained again: they take under a second, and a short run
#: may be the thing a cell times.
SHARED_RUNS_MIN_STEPS = 200
#: A kept run also keeps a copy of its parameters every this many steps, so that a notebook
#: asking for checkpoints of a run another notebook trained (chapter 10's going-deeper page
#: scores chapter 10's sort runs at steps 1100 to 1500) reads them instead of training again.
SHARED_CHECKPOINT_EVERY = 100
#: What, besides the configuration and the package's code, decides a run's numbers.
_KERNEL_SETTINGS = ("OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True)
class TrainConfig:
    """One training run: the task, the model, the optimizer. Defaults are the source's run.

    ``d_ff`` of None means 4 d_model. ``ln`` is "pre" or "post"; ``scale`` divides scores by
    sqrt(d_h); ``positions`` picks the position scheme of ``npformer.core.model.POSITION_SCHEMES``
    ("learned", "sinusoidal", "rope", "alibi", "none"; True and False mean "learned" and "none",
    so ``positions=False`` drops the learned position table); ``prompt_attention``
    "bidirectional" lets the prompt symbols attend to each other both ways. ``warmup_steps``
    > 0 raises the step size linearly from lr / warmup_steps to lr over the first
    ``warmup_steps`` steps (see :func:`learning_rate`). ``qk_init_scale`` multiplies the
    initial query and key weights (the Q and K columns of every block's W_qkv), and so every
    initial query-key product by its square: an intervention on the attention at initialization only
    (chapter 11), 1 by default.
    """

    task: str = "copy"
    length: int = 6
    seed: int = 0
    steps: int = 1500
    batch_size: int = 32
    lr: float = 3e-3
    d_model: int = 32
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int | None = None
    ln: str = "pre"
    scale: bool = True
    positions: bool | str = True
    prompt_attention: str = "causal"
    dtype: str = "float32"
    warmup_steps: int = 0
    qk_init_scale: float = 1.0

    def __post_init__(self):
        fn = "TrainConfig"
        names = (self.task, self.prompt_attention, self.dtype)
        if names not in product(TASKS, PROMPT_ATTENTION, ("float32", "float64")):
            raise ValueError(
                f"{fn}: task, prompt_attention and dtype must be in {TASKS}, {PROMPT_ATTENTION} "
                f"and ('float32', 'float64'), got {names}"
            )
        counts = (self.length, self.steps, self.batch_size, self.warmup_steps + 1, self.seed + 1)
        if min(counts) < 1 or not (self.lr > 0 and self.qk_init_scale > 0):
            raise ValueError(
                f"{fn}: length, steps, batch_size must be >= 1, warmup_steps and seed >= 0, lr "
                f"and qk_init_scale > 0, got {self}"
            )
        if isinstance(self.positions, str):  # a PositionScheme: false only for "none"
            object.__setattr__(self, "positions", position_scheme(fn, self.positions))
        else:
            position_scheme(fn, self.positions)
        # the model validates the rest (ln placement) when it is built
        self.model_config()

    def model_config(self) -> DecoderConfig:
        """The model's hyper-parameters: vocabulary 21, a position table of 2L + 1 rows."""
        return DecoderConfig(
            vocab_size=VOCAB_SIZE,
            d_model=self.d_model,
            num_heads=self.num_heads,
            num_layers=self.num_layers,
            d_ff=4 * self.d_model if self.d_ff is None else self.d_ff,
            max_len=2 * self.length + 1,
            ln=self.ln,
            scale=self.scale,
            positions=self.positions,
        )

    def to_dict(self) -> dict:
        """The configuration as plain JSON-ready values (d_ff resolved)."""
        out = asdict(self)
        out["d_ff"] = self.model_config().d_ff
        return out

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def one_blas_thread():
    """A context in which BLAS uses one thread (via threadpoolctl, when it is installed).

    The model's matrices are tiny (32 x 128): a second BLAS thread only adds synchronization,
    and it changes the floating-point results. Without threadpoolctl this does nothing; set
    OPENBLAS_NUM_THREADS=1 before starting Python instead.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl is in the lock file
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


class TrainResult(NamedTuple):
    """A trained model: its parameters, the loss of every step, the wall time.

    ``grad_norms`` (steps, num_layers), when recorded, holds the Euclidean norm of the gradient
    of each block's parameters (all of them together) at each step, before the update.
    """

    config: TrainConfig
    params: dict
    losses: np.ndarray  # (steps,) the training loss of each step's batch
    seconds: float
    grad_norms: np.ndarray | None = None
    checkpoints: dict | None = None  # step -> a copy of the parameters after that step


def learning_rate(config: TrainConfig, step: int) -> float:
    """The step size of step ``step`` (0-based): lr min(1, (step + 1) / warmup_steps).

    Without warm-up (``warmup_steps`` 0) it is ``config.lr`` at every step.
    """
    if config.warmup_steps == 0:
        return config.lr
    return config.lr * min(1.0, (step + 1) / config.warmup_steps)


def block_grad_norms(grads: dict, num_layers: int) -> np.ndarray:
    """The norm of the gradient of each block's parameters together: (num_layers,) float64."""
    norms = np.zeros(num_layers)
    for layer in range(num_layers):
        prefix = param_name(layer)
        for name, g in grads.items():
            if name.startswith(prefix):
                norms[layer] += float(np.sum(np.square(g, dtype=np.float64)))
    return np.sqrt(norms)


def prompt_attention_mask(length: int, total: int, bidirectional: bool) -> np.ndarray | None:
    """The (T, T) attention mask of a sequence of ``total`` tokens whose first L are the prompt.

    Causal (True where key j <= query i) everywhere; with ``bidirectional`` the L prompt
    symbols also see each other both ways. Returns None for the plain causal mask (the model's
    default).
    """
    if not bidirectional:
        return None
    mask = np.tril(np.ones((total, total), dtype=bool))  # (T, T) causal
    mask[:length, :length] = True  # the prompt block: both ways
    return mask


def initial_params(config: TrainConfig, rng: np.random.Generator) -> dict:
    """A run's initial weights: ``init_params`` of the config's model in its dtype, drawn from
    ``rng``, with the query and key weights of every block multiplied by
    ``config.qk_init_scale``. ``train`` calls it with the generator seeded by ``config.seed``.
    """
    params = init_params(config.model_config(), rng, dtype=np.dtype(config.dtype))
    if config.qk_init_scale != 1:
        d = config.d_model
        for layer in range(config.num_layers):
            params[param_name(layer, "attn.W_qkv")][:, : 2 * d] *= config.qk_init_scale  # Q | K
    return params


def train(
    config: TrainConfig,
    progress: Callable[[int, int], None] | None = None,
    record_grad_norms: bool = False,
    checkpoints: Sequence[int] = (),
) -> TrainResult:
    """Train from scratch: init from ``config.seed``, then ``config.steps`` Adam steps.

    One generator, seeded once, draws the initial weights and then every batch, so a run is a
    function of its configuration (and of the machine's floating-point kernels).
    ``progress(step, steps)`` is called every 1% of the run when given. With
    ``record_grad_norms`` the result also holds each block's gradient norm at every step; with
    ``checkpoints`` (step counts), a copy of the parameters after each of those steps.
    Returns a :class:`TrainResult`.
    """
    shared = _shared_run_path(config, record_grad_norms)
    if shared is not None and shared.exists():
        with shared.open("rb") as f:
            result = pickle.load(f)
        if set(checkpoints) <= set(result.checkpoints):  # else trained again, keeping them
            with (shared.parent / "shared.log").open("a") as log:
                log.write(f"{shared.stem}\n")
            if progress is not None:
                progress(config.steps, config.steps)
            return _asked(result, checkpoints)
    start = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    model_config = config.model_config()
    dtype = np.dtype(config.dtype)
    params = initial_params(config, rng)
    optimizer = Adam(params, lr=config.lr)
    attn_mask = prompt_attention_mask(
        config.length, 2 * config.length, config.prompt_attention == "bidirectional"
    )
    losses = np.empty(config.steps)
    norms = np.empty((config.steps, config.num_layers)) if record_grad_norms else None
    kept = {}  # step -> parameters after it
    keep = set(checkpoints)
    if shared is not None:
        keep |= set(range(SHARED_CHECKPOINT_EVERY, config.steps + 1, SHARED_CHECKPOINT_EVERY))
    every = max(1, config.steps // 100)
    with one_blas_thread():
        for step in range(config.steps):
            batch = make_batch(rng, config.batch_size, config.length, config.task, dtype=dtype)
            loss, grads = loss_and_grads(
                params, model_config, batch.tokens, batch.targets, batch.loss_mask, attn_mask
            )
            if norms is not None:
                norms[step] = block_grad_norms(grads, config.num_layers)
            optimizer.lr = learning_rate(config, step)
            optimizer.step(grads)
            losses[step] = loss
            if step + 1 in keep:
                kept[step + 1] = {name: p.copy() for name, p in params.items()}
            if progress is not None and ((step + 1) % every == 0 or step + 1 == config.steps):
                progress(step + 1, config.steps)
    seconds = time.perf_counter() - start
    result = TrainResult(config, params, losses, seconds, norms, kept)
    if shared is not None:
        partial = shared.with_suffix(f".{os.getpid()}.part")
        with partial.open("wb") as f:
            pickle.dump(result, f)
        partial.replace(shared)  # atomic: a reader sees the whole run or none
        with (shared.parent / "trained.log").open("a") as log:  # a run trained twice shows
            log.write(f"{shared.stem} {seconds:.1f}\n")
    return _asked(result, checkpoints)


def _asked(result: TrainResult, checkpoints: Sequence[int]) -> TrainResult:
    """``result`` with only the checkpoints asked for that the run reached (None: none)."""
    kept = result.checkpoints
    asked = {step: kept[step] for step in sorted(set(checkpoints)) if step in kept}
    return result._replace(checkpoints=asked or None)


def _shared_run_path(config: TrainConfig, record_grad_norms: bool) -> Path | None:
    """Where a run of ``config`` is kept under ``$NPFORMER_SHARED_RUNS`` (None: not kept).

    The key is everything that decides the run's numbers: the configuration, whether gradient
    norms are recorded, the floating-point kernel settings, NumPy's version and the package's
    source code (so a changed package, or an injected bug, never reads an older run).
    """
    folder = os.environ.get(SHARED_RUNS_ENV)
    if not folder or config.steps < SHARED_RUNS_MIN_STEPS:
        return None
    what = [
        config.to_dict(),
        record_grad_norms,
        {name: os.environ.get(name) for name in _KERNEL_SETTINGS},
        np.__version__,
        _package_digest(),
    ]
    key = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()
    return Path(folder) / f"{key[:32]}.pkl"


@functools.cache
def _package_digest() -> str:
    """A digest of every source file of the package (all its layers)."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parents[1].rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def generate(next_logits: Callable[[np.ndarray], np.ndarray], start, num_new: int) -> np.ndarray:
    """Greedy generation: append argmax of the last position's logits, ``num_new`` times.

    ``next_logits(tokens)`` maps the current (B, t) token array to logits (B, t, V) (or to the
    last position's (B, V)). Each new token is appended to the input of the next call, so the
    model reads its own previous outputs, right or wrong.
    Shapes: start (B, t0) integer. Returns the generated tokens only, (B, num_new) int64.
    """
    tokens = np.asarray(start).astype(np.int64)
    B, t0 = tokens.shape
    for _ in range(num_new):
        logits = np.asarray(next_logits(tokens))
        last = logits[:, -1, :] if logits.ndim == 3 else logits  # (B, V)
        new = last.argmax(axis=-1)[:, None]  # (B, 1) ties go to the lowest id
        tokens = np.concatenate([tokens, new], axis=1)  # (B, t + 1)
    return tokens[:, t0:]


class Evaluation(NamedTuple):
    """Generation on held-out prompts, compared with the true answers."""

    token_accuracy: float  # share of answer tokens right
    sequence_accuracy: float  # share of answers right in full
    prompts: np.ndarray  # (n, L)
    expected: np.ndarray  # (n, L)
    generated: np.ndarray  # (n, L)


def model_logits(params: dict, model_config: DecoderConfig, attn_mask_fn=None):
    """``next_logits`` for ``generate``: the model's forward pass on the current tokens.

    ``attn_mask_fn(T)``, when given, returns the (T, T) attention mask to use at length T.
    """

    def next_logits(tokens):
        T = tokens.shape[1]
        mask = None if attn_mask_fn is None else attn_mask_fn(T)
        return forward(params, model_config, tokens, mask)[0]

    return next_logits


def teacher_forced_predictions(params: dict, config: TrainConfig, prompts, expected):
    """The model's answer when handed the true prefix at every step: (n, L) token ids.

    One forward pass over [prompt, SEP, expected[:, :-1]] (n, 2L); the prediction for answer
    token t is the argmax at position L + t. Unlike generation, a wrong token never feeds the
    next step, so each error shows at the one position where it is made.
    """
    L = config.length
    full = np.concatenate([with_separator(prompts), expected[:, :-1]], axis=1)  # (n, 2L)
    mask = prompt_attention_mask(L, full.shape[1], config.prompt_attention == "bidirectional")
    with one_blas_thread():
        logits = forward(params, config.model_config(), full, mask)[0]  # (n, 2L, vocab)
    return logits[:, L:].argmax(axis=-1)  # (n, L)


def teacher_forced_accuracy(params: dict, config: TrainConfig, prompts, expected) -> float:
    """Share of answer tokens right when the model is handed the true prefix at every step
    (see :func:`teacher_forced_predictions`): each decision counted once."""
    predicted = teacher_forced_predictions(params, config, prompts, expected)
    return float((predicted == expected).mean())


def evaluate(
    params: dict, config: TrainConfig, n: int = 500, seed: int = EVALUATION_SEED, prompts=None
) -> Evaluation:
    """Per-token and per-sequence accuracy of true generation on ``n`` held-out prompts.

    The prompts come from their own generator (``seed``), never from the training stream;
    ``prompts`` (n, L) overrides them. The model sees [prompt, SEP] and generates L tokens.
    Returns an :class:`Evaluation`.
    """
    if prompts is None:
        prompts = evaluation_prompts(n, config.length, seed)  # (n, L)
    prompts = np.asarray(prompts)
    if prompts.ndim != 2 or prompts.shape[1] != config.length:  # else scored against others
        raise ValueError(
            f"evaluate: prompts must have shape (n, {config.length}), got {prompts.shape}"
        )
    expected = answer(prompts, config.task)  # (n, L)
    bidirectional = config.prompt_attention == "bidirectional"
    mask_fn = lambda T: prompt_attention_mask(config.length, T, bidirectional)
    next_logits = model_logits(params, config.model_config(), mask_fn)
    with one_blas_thread():
        generated = generate(next_logits, with_separator(prompts), config.length)  # (n, L)
    right = generated == expected  # (n, L)
    return Evaluation(
        float(right.mean()), float(right.all(axis=1).mean()), prompts, expected, generated
    )
