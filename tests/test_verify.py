"""``python -m npformer verify``: every number as in the book here, and a wrong one is caught."""

import io
import os
import subprocess
import sys

import pytest

from npformer.book.verify import REFERENCES, Reference, judge, machine_kernels, verify

NAMES = [r.name for r in REFERENCES]


def test_at_least_a_dozen_numbers_from_several_chapters():
    assert len(REFERENCES) >= 12
    assert len({r.chapter for r in REFERENCES}) >= 6
    assert any(r.band is not None for r in REFERENCES), "one training run with a kernel band"


def test_this_machine_agrees_with_the_book():
    verdicts = verify(stream=io.StringIO())
    bad = [(v.reference.name, v.value) for v in verdicts if v.verdict == "outside"]
    assert not bad


@pytest.mark.parametrize("name", ["parameters of one block, d = 512", NAMES[-1]])
def test_a_perturbed_value_is_reported_outside(name):
    ref = next(r for r in REFERENCES if r.name == name)
    out = io.StringIO()
    verdicts = verify(overrides={name: ref.expected * 1.01 + 1}, stream=out)
    assert [v.verdict for v in verdicts if v.reference.name == name] == ["outside"]
    assert f"{name}: " in out.getvalue() and ": outside" in out.getvalue()
    assert f"verify: {len(REFERENCES) - 1} of {len(REFERENCES)} as in the book" in out.getvalue()


def test_judge_equal_band_outside():
    ref = Reference("x", "00", 0.5, 2, (0.45, 0.56), lambda: 0.0)
    assert judge(ref, 0.5012) == "equal"
    assert judge(ref, 0.46) == "within band"
    assert judge(ref, 0.6) == "outside"
    assert judge(ref, float("nan")) == "outside"
    exact = ref._replace(band=None)
    assert judge(exact, 0.46) == "outside"


def test_kernels_are_named():
    lines = machine_kernels()
    assert any(line.startswith("BLAS: ") for line in lines)
    assert any(line.startswith("NumPy SIMD: ") for line in lines)


def test_unknown_override_is_refused():
    with pytest.raises(ValueError, match="unknown references"):
        verify(overrides={"no such number": 1.0}, stream=io.StringIO())


def test_command_line_exit_status():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    run = subprocess.run(
        [sys.executable, "-m", "npformer", "verify"], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"verify: {len(REFERENCES)} of {len(REFERENCES)} as in the book" in run.stdout
