"""Test settings: hypothesis runs derandomized with a bounded number of examples."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "book",
    derandomize=True,
    deadline=None,
    max_examples=40 if os.environ.get("CI") else 60,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
settings.load_profile("book")
