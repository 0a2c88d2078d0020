"""The checker of chapter 06's exercise: it passes the reference and fails typical mistakes
in layer norm's backward, each at the check that names the mistake."""

import numpy as np

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch06 import CHECKS, check_layer_norm_backward


def _stats(x, eps):
    mu = x.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return (x - mu) * r, r


def right(dy, x, gamma, eps=1e-5):
    x_hat, r = _stats(x, eps)
    g = dy * gamma
    dx = r * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    lead = tuple(range(dy.ndim - 1))
    return dx, (dy * x_hat).sum(axis=lead), dy.sum(axis=lead)


def no_mean_term(dy, x, gamma, eps=1e-5):
    x_hat, r = _stats(x, eps)
    g = dy * gamma
    dx = r * (g - x_hat * (g * x_hat).mean(-1, keepdims=True))
    return dx, *right(dy, x, gamma, eps)[1:]


def no_variance_term(dy, x, gamma, eps=1e-5):
    x_hat, r = _stats(x, eps)
    g = dy * gamma
    return r * (g - g.mean(-1, keepdims=True)), *right(dy, x, gamma, eps)[1:]


def means_over_the_wrong_axis(dy, x, gamma, eps=1e-5):
    """The means of g taken over the positions (axis 0) instead of the components."""
    x_hat, r = _stats(x, eps)
    g = dy * gamma
    dx = r * (g - g.mean(0, keepdims=True) - x_hat * (g * x_hat).mean(0, keepdims=True))
    return dx, *right(dy, x, gamma, eps)[1:]


def dbeta_over_the_first_axis_only(dy, x, gamma, eps=1e-5):
    dx, dgamma, _ = right(dy, x, gamma, eps)
    return dx, dgamma, dy.sum(axis=0)


def dgamma_without_x_hat(dy, x, gamma, eps=1e-5):
    dx, _, dbeta = right(dy, x, gamma, eps)
    return dx, dy.reshape(-1, dy.shape[-1]).sum(0), dbeta


def gamma_forgotten(dy, x, gamma, eps=1e-5):
    return right(dy, x, np.ones_like(gamma), eps)[0], *right(dy, x, gamma, eps)[1:]


def rstd_squared(dy, x, gamma, eps=1e-5):
    dx, dgamma, dbeta = right(dy, x, gamma, eps)
    return dx * _stats(x, eps)[1], dgamma, dbeta


def stub(dy, x, gamma, eps=1e-5):
    raise NotImplementedError


def line(fn):
    return check_layer_norm_backward(fn, show=False).line


def test_reference_passes_and_stub_is_not_attempted(capsys):
    assert check_layer_norm_backward(right).ok
    assert capsys.readouterr().out == f"passed {len(CHECKS)} of {len(CHECKS)} checks\n"
    assert line(stub) == NOT_ATTEMPTED
    # the package's own backward passes too
    from npformer.core.block import layer_norm, layer_norm_backward

    def package(dy, x, gamma, eps=1e-5):
        return layer_norm_backward(dy, layer_norm(x, gamma, np.zeros_like(gamma), eps)[1])

    assert check_layer_norm_backward(package, show=False).ok


def test_each_mistake_fails_at_the_check_that_names_it():
    expected = {
        no_mean_term: "failed check 3 of 6 (dx when dy * gamma is constant along d",
        no_variance_term: "failed check 4 of 6 (dx when dy * gamma is mostly 2 x_hat",
        means_over_the_wrong_axis: "failed check 3 of 6 (dx when dy * gamma is constant",
        dbeta_over_the_first_axis_only: "failed check 1 of 6 (dbeta sums dy over every position):"
        " dbeta for x of shape (2, 3, 4): expected shape (4,), got shape (3, 4)",
        dgamma_without_x_hat: "failed check 2 of 6 (dgamma sums dy * x_hat",
        gamma_forgotten: "failed check 3 of 6",
        rstd_squared: "failed check 4 of 6 (dx when dy * gamma is mostly 2 x_hat",
    }
    for mistake, start in expected.items():
        assert line(mistake).startswith(start), (mistake.__name__, line(mistake))


def test_a_mistake_shows_its_numbers_and_a_crash_is_reported():
    assert "expected [" in line(no_mean_term) and "got [" in line(no_mean_term)
    assert "expected a tuple (dx, dgamma, dbeta), got ndarray" in line(lambda dy, x, g, eps: dy)
    assert "raised ZeroDivisionError" in line(lambda dy, x, g, eps: 1 / 0)
