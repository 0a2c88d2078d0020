"""Training runs shared between the notebooks of one session (``$NPFORMER_SHARED_RUNS``).

A shared run must be the run: read back, it equals a run trained afresh, array for array, and
so do the checkpoints it keeps; a different configuration, kernel setting or package never
reads it; a short run is never kept.
"""

import dataclasses

import numpy as np

from npformer.training import train as training
from npformer.training.train import (
    SHARED_CHECKPOINT_EVERY,
    SHARED_RUNS_ENV,
    SHARED_RUNS_MIN_STEPS,
    TrainConfig,
    train,
)

CONFIG = TrainConfig(task="copy", length=3, d_model=16, num_heads=2, steps=SHARED_RUNS_MIN_STEPS)


def same_run(a, b) -> bool:
    return (
        a.config == b.config
        and np.array_equal(a.losses, b.losses)
        and a.params.keys() == b.params.keys()
        and all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    )


def test_a_shared_run_is_the_run_trained_afresh(monkeypatch, tmp_path):
    fresh = train(CONFIG)  # no folder: trained
    monkeypatch.setenv(SHARED_RUNS_ENV, str(tmp_path))
    kept = train(CONFIG)  # trained, then kept
    assert len(list(tmp_path.glob("*.pkl"))) == 1
    read = train(CONFIG)  # read back
    assert (tmp_path / "shared.log").read_text().count("\n") == 1
    assert same_run(fresh, kept) and same_run(fresh, read)


def test_checkpoints_are_read_from_a_kept_run_when_it_has_them(monkeypatch, tmp_path):
    steps = (SHARED_CHECKPOINT_EVERY, 2 * SHARED_CHECKPOINT_EVERY)
    fresh = train(CONFIG, checkpoints=steps)  # no folder: trained
    monkeypatch.setenv(SHARED_RUNS_ENV, str(tmp_path))
    assert train(CONFIG).checkpoints is None  # trained and kept; no checkpoints asked
    read = train(CONFIG, checkpoints=steps)  # read back, with the copies it kept
    assert (tmp_path / "shared.log").read_text().count("\n") == 1
    assert same_run(fresh, read) and read.checkpoints.keys() == fresh.checkpoints.keys()
    for step in steps:
        assert all(
            np.array_equal(fresh.checkpoints[step][k], read.checkpoints[step][k])
            for k in fresh.params
        )
    odd = train(CONFIG, checkpoints=(7,))  # not kept: trained again, and kept with it
    assert list(odd.checkpoints) == [7] and same_run(fresh, odd)
    assert (tmp_path / "shared.log").read_text().count("\n") == 1
    assert list(train(CONFIG, checkpoints=(7,)).checkpoints) == [7]  # now read
    assert (tmp_path / "shared.log").read_text().count("\n") == 2


def test_what_decides_a_run_decides_its_key(monkeypatch, tmp_path):
    monkeypatch.setenv(SHARED_RUNS_ENV, str(tmp_path))
    key = training._shared_run_path(CONFIG, False)
    assert training._shared_run_path(CONFIG, True) != key
    assert training._shared_run_path(dataclasses.replace(CONFIG, seed=1), False) != key
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")
    assert training._shared_run_path(CONFIG, False) != key
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    monkeypatch.setattr(training, "_package_digest", lambda: "another package")
    assert training._shared_run_path(CONFIG, False) != key


def test_short_runs_and_sessions_without_a_folder_keep_nothing(monkeypatch, tmp_path):
    short = dataclasses.replace(CONFIG, steps=SHARED_RUNS_MIN_STEPS - 1)
    monkeypatch.setenv(SHARED_RUNS_ENV, str(tmp_path))
    assert training._shared_run_path(short, False) is None
    monkeypatch.delenv(SHARED_RUNS_ENV)
    assert training._shared_run_path(CONFIG, False) is None
