"""``python -m npformer`` is the experiment's command line under the package's own name."""

import subprocess
import sys


def test_package_entry_point_runs_the_experiment_cli():
    help_text = subprocess.run(
        [sys.executable, "-m", "npformer", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--task" in help_text and "--grid" in help_text


def test_package_entry_point_rejects_bad_arguments():
    result = subprocess.run(
        [sys.executable, "-m", "npformer", "--task", "nope"], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "invalid choice: 'nope'" in result.stderr
