"""Chapter 11's checker passes a right projection and fails each typical mistake on its check."""

import numpy as np

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch11 import CHECKS, check_remove_directions


def reference(x, directions, center):
    Q = np.linalg.qr(directions.T)[0].T  # (k, d) orthonormal
    return x - ((x - center) @ Q.T) @ Q


def not_normalized(x, directions, center):  # x - (x u) u with |u| != 1
    for u in directions:
        x = x - ((x - center) @ u)[..., None] * u
    return x


def centre_ignored(x, directions, center):  # projects around zero
    Q = np.linalg.qr(directions.T)[0].T
    return x - (x @ Q.T) @ Q


def one_after_the_other(x, directions, center):  # normalized but never orthogonalized
    for u in directions:
        u = u / np.linalg.norm(u)
        x = x - ((x - center) @ u)[..., None] * u
    return x


def kept_instead_of_removed(x, directions, center):  # returns the part along the directions
    Q = np.linalg.qr(directions.T)[0].T
    return center + ((x - center) @ Q.T) @ Q


def stub(x, directions, center):
    raise NotImplementedError


def test_the_reference_passes_every_check(capsys):
    report = check_remove_directions(reference)
    assert report.ok and report.total == len(CHECKS) == 6
    assert capsys.readouterr().out == "passed 6 of 6 checks\n"


def test_the_stub_is_not_attempted(capsys):
    assert not check_remove_directions(stub).attempted
    assert capsys.readouterr().out == NOT_ATTEMPTED + "\n"


def test_a_direction_not_normalized_fails_check_2():
    line = check_remove_directions(not_normalized, show=False).line
    assert line.startswith("failed check 2 of 6 (the same direction not normalized, [2, 0])")
    assert "expected [0., 4.], got [-9.,  4.]" in line


def test_the_centre_ignored_fails_check_3():
    line = check_remove_directions(centre_ignored, show=False).line
    assert line.startswith("failed check 3 of 6 (a centre c = [1, 1]")
    assert "expected [1., 4.], got [0., 4.]" in line


def test_directions_not_orthogonalized_fail_check_4():
    line = check_remove_directions(one_after_the_other, show=False).line
    assert line.startswith("failed check 4 of 6 (two directions not orthogonal")
    assert "expected [0., 0., 3.], got [-1.,  1.,  3.]" in line


def test_the_component_kept_fails_check_1():
    line = check_remove_directions(kept_instead_of_removed, show=False).line
    assert line.startswith("failed check 1 of 6") and "got [3., 0.]" in line
