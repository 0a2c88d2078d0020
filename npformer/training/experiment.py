"""The experiment's command line and its grid runner: one process per core, one JSON line per run.

Taught in chapter 10 (``chapters/10_experiment.ipynb``); chapter 11 runs its ablations with it.

Usage::

    python -m npformer.training.experiment --task sort --length 6 --seed 0 --steps 1500
    python -m npformer.training.experiment --no-positions          # an ablation (copy, L = 6)
    python -m npformer.training.experiment --grid                  # the source's 23 runs

Each run trains from scratch (``npformer.training.train.train``), evaluates by true generation on
500 held-out prompts and prints one JSON line: the configuration, the final loss, the per-token and
per-sequence accuracy and the wall time. A progress bar goes to stderr only when stderr is a
terminal. The grid runs one process per core, at most ``NPFORMER_WORKERS`` of them when that
environment variable is set (so that parallel test runs do not oversubscribe the machine); each
process uses one BLAS thread.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from npformer.training.tasks import EVALUATION_SEED, TASKS
from npformer.training.train import (
    Evaluation,
    TrainConfig,
    evaluate,
    teacher_forced_accuracy,
    train,
)

#: Environment variable that caps the number of worker processes.
WORKERS_ENV = "NPFORMER_WORKERS"
#: What each worker process gets in its environment unless already set: one BLAS thread, and
#: no heap trimming by glibc (which otherwise page-faults on every training step).
WORKER_ENV_DEFAULTS = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_TRIM_THRESHOLD_": "1073741824",
}

#: The source's five ablations of copy at L = 6: name -> changes to the default configuration.
ABLATIONS = {
    "no scaling": {"scale": False},
    "no positions": {"positions": False},
    "post-LN": {"ln": "post"},
    "pre-LN, lr 1e-2": {"lr": 1e-2},
    "post-LN, lr 1e-2": {"ln": "post", "lr": 1e-2},
}


class Job(NamedTuple):
    """A named training run; ``record_grad_norms`` keeps each block's gradient norm per step."""

    name: str
    config: TrainConfig
    record_grad_norms: bool = False


class RunResult(NamedTuple):
    """What one run produced: its summary, and (optionally) the model and its evaluation."""

    name: str
    config: TrainConfig
    final_loss: float  # the loss of the last step's batch
    token_accuracy: float
    sequence_accuracy: float
    seconds: float  # training and evaluation, wall time
    losses: np.ndarray | None  # (steps,) the training curve
    params: dict | None  # the trained parameters
    evaluation: Evaluation | None
    grad_norms: np.ndarray | None = None  # (steps, num_layers) when the job asked for them

    def summary(self) -> dict:
        """The JSON-ready summary: name, configuration, final loss, accuracies, seconds."""
        return {
            "name": self.name,
            **self.config.to_dict(),
            "final_loss": self.final_loss,
            "token_accuracy": self.token_accuracy,
            "sequence_accuracy": self.sequence_accuracy,
            "seconds": round(self.seconds, 2),
        }


def source_grid() -> list[Job]:
    """The source's 23 runs: copy and sort at L in {4, 6, 8} x seeds {0, 1, 2}, then the five
    ablations of copy at L = 6 with seed 0."""
    jobs = [
        Job("baseline", TrainConfig(task=task, length=length, seed=seed))
        for task in TASKS
        for length in (4, 6, 8)
        for seed in (0, 1, 2)
    ]
    jobs += [
        Job(name, TrainConfig(task="copy", length=6, seed=0, **change))
        for name, change in ABLATIONS.items()
    ]
    return jobs


def seed_grid(
    tasks: Sequence[str],
    lengths: Sequence[int],
    seeds: Sequence[int],
    name: str = "baseline",
    **changes,
) -> list[Job]:
    """One job per (task, length, seed), every other setting the default or ``changes``."""
    return [
        Job(name, TrainConfig(task=task, length=length, seed=seed, **changes))
        for task in tasks
        for length in lengths
        for seed in seeds
    ]


def run_under_environments(
    configs: Sequence[TrainConfig], environments: dict[str, dict], workers: int | None = None
) -> dict[str, list[dict]]:
    """Run every config once under each named environment, each run in its own process.

    ``environments`` maps a name to environment changes (see :func:`run_in_subprocesses`),
    e.g. ``{"OpenBLAS Prescott": {"OPENBLAS_CORETYPE": "Prescott"}}``. Returns, for each
    name, the JSON summaries of the runs in the order of ``configs``.
    """
    configs = list(configs)
    runs = [(config, env) for env in environments.values() for config in configs]
    summaries = run_in_subprocesses(runs, workers)
    k = len(configs)
    return {name: summaries[i * k : (i + 1) * k] for i, name in enumerate(environments)}


def run_job(
    job: Job, keep: bool = True, eval_size: int = 500, eval_seed: int = EVALUATION_SEED
) -> RunResult:
    """Train ``job.config``, evaluate by generation; keep the model and curve if ``keep``."""
    start = time.perf_counter()
    trained = train(job.config, record_grad_norms=job.record_grad_norms)
    evaluation = evaluate(trained.params, job.config, n=eval_size, seed=eval_seed)
    return RunResult(
        job.name,
        job.config,
        float(trained.losses[-1]),
        evaluation.token_accuracy,
        evaluation.sequence_accuracy,
        time.perf_counter() - start,
        trained.losses if keep else None,
        trained.params if keep else None,
        evaluation if keep else None,
        trained.grad_norms,
    )


class CheckpointScore(NamedTuple):
    """A checkpoint scored on the held-out prompts."""

    sequence: float  # generated answers right in full
    token: float  # generated answer tokens right
    forced_token: float  # answer tokens right when handed the true prefix (teacher forcing)


def checkpoint_accuracies(
    item: tuple[TrainConfig, tuple[int, ...]],
) -> dict[int, CheckpointScore]:
    """Train ``config`` and score it at each of ``steps``: {step: CheckpointScore}.

    ``item`` is ``(config, steps)``; each checkpoint is scored on the same 500 held-out prompts
    as ``run_job``, by generation and teacher-forced. For ``map_in_processes``, one run per item.
    """
    config, steps = item
    trained = train(config, checkpoints=steps)
    scores = {}
    for step, params in sorted(trained.checkpoints.items()):
        ev = evaluate(params, config)
        forced = teacher_forced_accuracy(params, config, ev.prompts, ev.expected)
        scores[step] = CheckpointScore(ev.sequence_accuracy, ev.token_accuracy, forced)
    return scores


def worker_count(num_jobs: int, workers: int | None = None) -> int:
    """Processes to use: one per core, at most ``workers`` and at most $NPFORMER_WORKERS."""
    limit = os.cpu_count() or 1
    raw = os.environ.get(WORKERS_ENV)
    if raw is not None and raw.strip():
        try:
            cap = int(raw)
        except ValueError:
            cap = 0
        if cap < 1:
            raise ValueError(f"worker_count: {WORKERS_ENV} must be a positive integer, got {raw!r}")
        limit = min(limit, cap)
    if workers is not None:
        limit = min(limit, workers)
    return max(1, min(limit, num_jobs))


def _cost(config: TrainConfig) -> float:
    """A rough relative cost of a run, to start the longest runs first."""
    T, d = 2 * config.length, config.d_model
    d_ff = config.model_config().d_ff
    per_block = T * (4 * d * d + 2 * d * d_ff) + config.num_heads * T * T * d
    return config.steps * config.batch_size * config.num_layers * per_block


@contextlib.contextmanager
def _worker_environment() -> Iterator[None]:
    """Set ``WORKER_ENV_DEFAULTS`` (where unset) while worker processes start, then restore."""
    added = [key for key in WORKER_ENV_DEFAULTS if key not in os.environ]
    for key in added:
        os.environ[key] = WORKER_ENV_DEFAULTS[key]
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def map_in_processes(
    function: Callable,
    items: Sequence,
    workers: int | None = None,
    order: Sequence[int] | None = None,
    on_result: Callable[[int, object], None] | None = None,
) -> list:
    """``[function(item) for item in items]``, computed in parallel worker processes.

    One process per core (see ``worker_count``), started fresh ("spawn") with one BLAS thread
    each, so an item gives the same numbers inside the pool as alone; with one worker, in this
    process. ``order`` is the order in which items are started (for example longest first);
    ``on_result(i, result)`` is called as each item finishes, in completion order. ``function``
    must be importable by name (a module-level function). Returns results in the order of
    ``items``.
    """
    order = range(len(items)) if order is None else order
    tasks = [(i, function, items[i]) for i in order]
    results: list = [None] * len(items)
    n = worker_count(len(items), workers) if items else 1
    if n == 1:
        finished = map(_call_indexed, tasks)
        for i, result in finished:
            results[i] = result
            if on_result is not None:
                on_result(i, result)
        return results
    context = multiprocessing.get_context("spawn")
    with _worker_environment():
        pool = context.Pool(n)
    with pool:
        for i, result in pool.imap_unordered(_call_indexed, tasks, chunksize=1):
            results[i] = result
            if on_result is not None:
                on_result(i, result)
    return results


def _call_indexed(task):
    index, function, item = task
    return index, function(item)


def _run_kept(item):
    job, keep = item
    return run_job(job, keep=keep)


def run_grid(
    jobs: Sequence[Job],
    workers: int | None = None,
    keep: bool = True,
    on_result: Callable[[int, RunResult], None] | None = None,
) -> list[RunResult]:
    """Run ``jobs`` in parallel, one process per core (see ``map_in_processes``), longest first.

    A run gives the same numbers inside the pool as alone. ``on_result(i, result)`` is called
    as each run finishes (in completion order). Returns the results in the order of ``jobs``.
    """
    jobs = list(jobs)
    order = sorted(range(len(jobs)), key=lambda i: -_cost(jobs[i].config))
    items = [(job, keep) for job in jobs]
    return map_in_processes(_run_kept, items, workers, order=order, on_result=on_result)


# ----------------------------------------------------------------------------- subprocesses


def cli_arguments(config: TrainConfig) -> list[str]:
    """The command-line arguments that make ``python -m npformer.training.experiment`` run
    ``config``."""
    default = TrainConfig()
    args = [
        "--task", config.task, "--length", str(config.length), "--seed", str(config.seed),
        "--steps", str(config.steps), "--batch-size", str(config.batch_size),
        "--lr", repr(config.lr), "--d-model", str(config.d_model),
        "--heads", str(config.num_heads), "--blocks", str(config.num_layers),
        "--dtype", config.dtype,
    ]  # fmt: skip
    if config.d_ff is not None:
        args += ["--d-ff", str(config.d_ff)]
    if not config.scale:
        args.append("--no-scale")
    scheme = config.model_config().positions
    if scheme == "none":
        args.append("--no-positions")
    elif scheme != "learned":
        args += ["--positions", scheme]
    if config.ln != default.ln:
        args.append("--post-ln")
    if config.prompt_attention != default.prompt_attention:
        args.append("--bidirectional-prompt")
    if config.warmup_steps:
        args += ["--warmup", str(config.warmup_steps)]
    if config.qk_init_scale != default.qk_init_scale:
        args += ["--qk-init-scale", repr(config.qk_init_scale)]
    return args


def run_in_subprocesses(
    runs: Sequence[tuple[TrainConfig, dict]], workers: int | None = None
) -> list[dict]:
    """Run each (config, environment changes) through the command line in its own process.

    The environment changes map a variable to a value, or to None to remove it: e.g.
    ``{"OPENBLAS_CORETYPE": "Prescott"}``. At most ``worker_count`` processes run at once,
    each with one BLAS thread. Returns each run's JSON summary (a dict), in order.
    """
    n = worker_count(len(runs), workers) if runs else 1
    summaries: list[dict | None] = [None] * len(runs)
    running: dict[int, subprocess.Popen] = {}
    pending = list(range(len(runs)))

    def finish(i: int) -> None:
        out, err = running.pop(i).communicate()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"run_in_subprocesses: run {i} printed no result; stderr: {err}")
        summaries[i] = json.loads(lines[-1])

    while pending or running:
        while pending and len(running) < n:
            i = pending.pop(0)
            config, changes = runs[i]
            env = dict(os.environ)
            env.update({k: v for k, v in WORKER_ENV_DEFAULTS.items() if k not in env})
            for key, value in changes.items():
                if value is None:
                    env.pop(key, None)
                else:
                    env[key] = str(value)
            cmd = [sys.executable, "-m", "npformer.training.experiment", *cli_arguments(config)]
            running[i] = subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        done = [i for i, proc in running.items() if proc.poll() is not None]
        for i in done:
            finish(i)
        if not done:
            time.sleep(0.05)
    return summaries


# ----------------------------------------------------------------------------- command line


class _ProgressBar:
    """A one-line bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, stream=None):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.label = label

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / total)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done == total:
            self.stream.write("\n")
        self.stream.flush()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m npformer.training.experiment",
        description=(
            "Train the book's decoder on copy or sort and evaluate it by true generation; "
            "print one JSON line per run."
        ),
    )
    d = TrainConfig()
    run = parser.add_argument_group("one run")
    run.add_argument("--task", choices=TASKS, default=d.task, help="default: %(default)s")
    run.add_argument("--length", type=int, default=d.length, help="L, default: %(default)s")
    run.add_argument("--seed", type=int, default=d.seed, help="default: %(default)s")
    run.add_argument("--steps", type=int, default=d.steps, help="default: %(default)s")
    run.add_argument("--batch-size", type=int, default=d.batch_size, help="default: %(default)s")
    run.add_argument("--lr", type=float, default=d.lr, help="Adam step, default: %(default)s")
    run.add_argument("--d-model", type=int, default=d.d_model, help="default: %(default)s")
    run.add_argument("--heads", type=int, default=d.num_heads, help="default: %(default)s")
    run.add_argument("--blocks", type=int, default=d.num_layers, help="default: %(default)s")
    run.add_argument("--d-ff", type=int, default=None, help="default: 4 d_model")
    run.add_argument("--no-scale", action="store_true", help="drop the 1/sqrt(d_h) scale")
    run.add_argument("--no-positions", action="store_true", help="drop the position table")
    run.add_argument(
        "--positions",
        choices=("learned", "sinusoidal", "rope", "alibi", "none"),
        default=None,
        help="the position scheme, default: learned (--no-positions means none)",
    )
    run.add_argument("--post-ln", action="store_true", help="LN(x + f(x)) instead of pre-LN")
    run.add_argument(
        "--bidirectional-prompt",
        action="store_true",
        help="prompt symbols attend to each other both ways (a prefix LM)",
    )
    run.add_argument("--dtype", choices=("float32", "float64"), default=d.dtype)
    run.add_argument(
        "--warmup", type=int, default=d.warmup_steps, help="linear warm-up steps, default: 0"
    )
    run.add_argument(
        "--qk-init-scale",
        type=float,
        default=d.qk_init_scale,
        help="multiply the initial query and key weights, default: 1",
    )
    parser.add_argument("--eval-size", type=int, default=500, help="held-out prompts")
    parser.add_argument(
        "--eval-seed", type=int, default=EVALUATION_SEED, help="seed of the held-out prompts"
    )
    parser.add_argument(
        "--grid",
        action="store_true",
        help="run the source's 23 configurations instead of one (one process per core, "
        f"capped by ${WORKERS_ENV})",
    )
    parser.add_argument("--workers", type=int, default=None, help="at most this many processes")
    return parser


_RUN_OPTIONS = (
    "task", "length", "seed", "steps", "batch_size", "lr", "d_model", "heads", "blocks",
    "d_ff", "no_scale", "no_positions", "positions", "post_ln", "bidirectional_prompt", "dtype",
    "warmup",
)  # fmt: skip


def _scheme(args: argparse.Namespace) -> bool | str:
    """The positions field: True / False for the learned table or none (the defaults' form)."""
    if args.no_positions and args.positions not in (None, "none"):
        raise ValueError(f"--no-positions contradicts --positions {args.positions}")
    scheme = "none" if args.no_positions else (args.positions or "learned")
    return {"learned": True, "none": False}.get(scheme, scheme)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig the parsed arguments describe (raises ValueError when inconsistent)."""
    return TrainConfig(
        task=args.task,
        length=args.length,
        seed=args.seed,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        d_model=args.d_model,
        num_heads=args.heads,
        num_layers=args.blocks,
        d_ff=args.d_ff,
        ln="post" if args.post_ln else "pre",
        scale=not args.no_scale,
        positions=_scheme(args),
        prompt_attention="bidirectional" if args.bidirectional_prompt else "causal",
        dtype=args.dtype,
        warmup_steps=args.warmup,
        qk_init_scale=args.qk_init_scale,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.eval_size < 1:
        parser.error(f"--eval-size must be a positive integer, got {args.eval_size}")
    if args.eval_seed < 0:
        parser.error(f"--eval-seed must be >= 0, got {args.eval_seed}")
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be a positive integer, got {args.workers}")
    try:
        worker_count(1, args.workers)
    except ValueError as error:
        parser.error(str(error))
    if args.grid:
        defaults = parser.parse_args([])
        changed = [f"--{o.replace('_', '-')}" for o in _RUN_OPTIONS
                   if getattr(args, o) != getattr(defaults, o)]  # fmt: skip
        if changed:
            parser.error(
                f"--grid runs the source's 23 fixed configurations; it cannot be combined with "
                f"{', '.join(changed)}"
            )
        jobs = source_grid()
        bar = _ProgressBar("grid")
        done = [0]

        def on_result(i: int, result: RunResult) -> None:
            done[0] += 1
            bar(done[0], len(jobs))

        bar(0, len(jobs))
        results = run_grid(jobs, workers=args.workers, keep=False, on_result=on_result)
        for result in results:
            print(json.dumps(result.summary()), flush=True)
        return 0
    try:
        config = config_from_args(args)
    except ValueError as error:
        parser.error(str(error).replace("TrainConfig: ", ""))
    start = time.perf_counter()
    trained = train(config, progress=_ProgressBar(f"{config.task} L={config.length}"))
    evaluation = evaluate(trained.params, config, n=args.eval_size, seed=args.eval_seed)
    result = RunResult(
        "run",
        config,
        float(trained.losses[-1]),
        evaluation.token_accuracy,
        evaluation.sequence_accuracy,
        time.perf_counter() - start,
        None,
        None,
        None,
    )
    print(json.dumps(result.summary()), flush=True)
    return 0


if __name__ == "__main__":
    # Run the imported module's main, so that the functions the worker processes unpickle
    # belong to ``npformer.training.experiment`` and not to ``__main__``.
    from npformer.training.experiment import main as _main

    sys.exit(_main())
