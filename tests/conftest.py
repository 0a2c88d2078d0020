"""Test settings: hypothesis runs derandomized with a bounded number of examples; no test
reads a training run another one kept (the notebooks share runs; the tests compute theirs)."""

import os

import pytest
from hypothesis import HealthCheck, settings

from npformer.training.train import SHARED_RUNS_ENV

settings.register_profile(
    "book",
    derandomize=True,
    deadline=None,
    max_examples=40 if os.environ.get("CI") else 60,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
settings.load_profile("book")


@pytest.fixture(autouse=True)
def _train_for_real(monkeypatch):
    monkeypatch.delenv(SHARED_RUNS_ENV, raising=False)
