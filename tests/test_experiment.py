"""Tests of npformer.training.experiment: the command line, its errors, JSON output, the grid
runner."""

import io
import json
import math

import pytest

from npformer.training.experiment import (
    ABLATIONS,
    WORKERS_ENV,
    Job,
    _ProgressBar,
    build_parser,
    cli_arguments,
    config_from_args,
    main,
    map_in_processes,
    run_grid,
    run_in_subprocesses,
    source_grid,
    worker_count,
)
from npformer.training.train import TrainConfig

TINY = ["--length", "2", "--steps", "5", "--d-model", "8", "--heads", "2", "--blocks", "1",
        "--eval-size", "10"]  # fmt: skip


def test_one_run_prints_one_json_line_and_no_bar_off_a_terminal(capsys):
    assert main(["--task", "sort", *TINY]) == 0
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    for key in ("task", "length", "seed", "steps", "d_model", "num_heads", "num_layers", "ln",
                "scale", "positions", "final_loss", "token_accuracy", "sequence_accuracy",
                "seconds"):  # fmt: skip
        assert key in record
    assert record["task"] == "sort" and record["length"] == 2 and record["steps"] == 5
    assert 0 <= record["sequence_accuracy"] <= record["token_accuracy"] <= 1
    assert err == ""  # stderr is not a terminal under pytest: no progress bar


def test_ablation_switches_reach_the_configuration():
    switches = "--no-scale --no-positions --post-ln --lr 0.01 --d-model 64 --heads 1 --blocks 6"
    args = build_parser().parse_args([*switches.split(), "--bidirectional-prompt"])
    config = config_from_args(args)
    assert (config.scale, config.positions, config.ln, config.lr) == (False, False, "post", 0.01)
    assert (config.d_model, config.num_heads, config.num_layers) == (64, 1, 6)
    assert config.prompt_attention == "bidirectional"


@pytest.mark.parametrize(
    "config",
    [
        TrainConfig(),
        TrainConfig(task="sort", length=8, seed=2),
        TrainConfig(positions="rope"),
        TrainConfig(positions="alibi", length=4),
        TrainConfig(
            scale=False,
            positions=False,
            ln="post",
            lr=1e-2,
            d_model=64,
            num_heads=1,
            num_layers=6,
            d_ff=100,
            prompt_attention="bidirectional",
            dtype="float64",
            warmup_steps=50,
            qk_init_scale=64**-0.25,
        ),
    ],
)
def test_cli_arguments_round_trip(config):
    assert config_from_args(build_parser().parse_args(cli_arguments(config))) == config


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--task", "reverse"], "invalid choice: 'reverse'"),
        (["--length", "six"], "invalid int value: 'six'"),
        (["--length", "0"], "length, steps, batch_size must be >= 1"),
        (["--steps", "0"], "length, steps, batch_size must be >= 1"),
        (["--d-model", "30"], "d_model=30 must be a positive multiple of num_heads=4"),
        (["--lr", "-1"], "lr and qk_init_scale > 0"),
        (["--seed", "-2"], "warmup_steps and seed >= 0"),
        (["--eval-size", "0"], "--eval-size must be a positive integer"),
        (["--workers", "0"], "--workers must be a positive integer"),
        (["--grid", "--task", "sort"], "--grid runs the source's 23 fixed configurations"),
        (["--grid", "--no-positions"], "cannot be combined with --no-positions"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_exit_non_zero_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert message in err and "usage:" in err


def test_bad_worker_cap(monkeypatch, capsys):
    monkeypatch.setenv(WORKERS_ENV, "many")
    with pytest.raises(ValueError, match="NPFORMER_WORKERS must be a positive integer, got 'many'"):
        worker_count(4)
    with pytest.raises(SystemExit) as exit_info:
        main(TINY)
    assert exit_info.value.code != 0
    assert "NPFORMER_WORKERS must be a positive integer" in capsys.readouterr().err


def test_worker_count_is_capped(monkeypatch):
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert worker_count(1) == 1
    assert 1 <= worker_count(100) <= 100
    monkeypatch.setenv(WORKERS_ENV, "1")
    assert worker_count(100) == 1
    monkeypatch.setenv(WORKERS_ENV, "64")
    assert worker_count(3, workers=2) == 2


def test_the_source_grid():
    jobs = source_grid()
    assert len(jobs) == 23
    baseline = [j.config for j in jobs if j.name == "baseline"]
    assert len(baseline) == 18
    assert {(c.task, c.length, c.seed) for c in baseline} == {
        (t, L, s) for t in ("copy", "sort") for L in (4, 6, 8) for s in (0, 1, 2)
    }
    ablations = {j.name: j.config for j in jobs if j.name != "baseline"}
    assert set(ablations) == set(ABLATIONS)
    assert not ablations["no scaling"].scale and not ablations["no positions"].positions
    assert ablations["post-LN, lr 1e-2"].ln == "post" and ablations["post-LN, lr 1e-2"].lr == 1e-2
    assert all((c.task, c.length, c.seed) == ("copy", 6, 0) for c in ablations.values())


def tiny_job(name, seed, task="copy"):
    return Job(name, TrainConfig(task=task, length=2, steps=5, d_model=8, num_heads=2,
                                 num_layers=1, seed=seed))  # fmt: skip


def test_run_grid_in_processes_equals_in_process_and_keeps_the_order(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "2")
    jobs = [tiny_job("a", 0), tiny_job("b", 1, "sort"), tiny_job("c", 2)]
    seen = []
    parallel = run_grid(jobs, on_result=lambda i, r: seen.append(i))
    serial = run_grid(jobs, workers=1)
    assert sorted(seen) == [0, 1, 2]
    assert [r.name for r in parallel] == ["a", "b", "c"]
    for p, s in zip(parallel, serial, strict=True):
        assert p.config == s.config
        assert p.final_loss == s.final_loss  # one BLAS thread everywhere: the same numbers
        assert p.token_accuracy == s.token_accuracy
        assert p.losses.shape == (5,) and p.params is not None


def test_run_in_subprocesses_runs_the_command_line():
    config = tiny_job("x", 0).config
    [summary] = run_in_subprocesses([(config, {"OPENBLAS_CORETYPE": None})], workers=1)
    assert summary["length"] == 2 and summary["steps"] == 5
    assert 0 <= summary["token_accuracy"] <= 1


def test_progress_bar_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    quiet, loud = io.StringIO(), Terminal()
    _ProgressBar("x", quiet)(3, 10)
    _ProgressBar("x", loud)(10, 10)
    assert quiet.getvalue() == ""
    assert "10/10" in loud.getvalue() and "#" in loud.getvalue()


def test_seed_grid_and_grad_norms_through_the_pool(monkeypatch):
    from npformer.training.experiment import seed_grid

    jobs = seed_grid(("copy", "sort"), (4, 6), (0, 1, 2), steps=7)
    assert len(jobs) == 12 and all(j.config.steps == 7 for j in jobs)
    assert [(j.config.task, j.config.length, j.config.seed) for j in jobs[:4]] == [
        ("copy", 4, 0), ("copy", 4, 1), ("copy", 4, 2), ("copy", 6, 0)]  # fmt: skip
    monkeypatch.setenv(WORKERS_ENV, "2")
    job = tiny_job("g", 0)._replace(record_grad_norms=True)
    [with_norms, without] = run_grid([job, tiny_job("h", 0)])
    assert with_norms.grad_norms.shape == (5, 1) and without.grad_norms is None
    assert with_norms.final_loss == without.final_loss  # recording does not change the run


def test_run_under_environments_groups_by_environment():
    from npformer.training.experiment import run_under_environments

    config = tiny_job("x", 0).config
    environments = {"a": {}, "b": {"OPENBLAS_CORETYPE": None}}
    out = run_under_environments([config, config], environments, workers=2)
    assert list(out) == ["a", "b"] and all(len(v) == 2 for v in out.values())
    assert out["a"][0]["final_loss"] == out["b"][1]["final_loss"]
    assert "--warmup" in cli_arguments(TrainConfig(warmup_steps=10))


def test_map_in_processes_keeps_the_order_of_items_and_reports_each_result(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "2")  # `make test` caps notebooks at one process
    seen = []
    squares = map_in_processes(
        math.factorial,
        [3, 5, 1, 4],
        workers=2,
        order=[1, 3, 0, 2],
        on_result=lambda i, r: seen.append((i, r)),
    )
    assert squares == [6, 120, 1, 24]
    assert sorted(seen) == [(0, 6), (1, 120), (2, 1), (3, 24)]
    assert map_in_processes(math.factorial, [], workers=2) == []
