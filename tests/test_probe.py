"""Tests of npformer.analysis.probe: closed form, decodable vs undecodable labels, errors."""

import numpy as np
import pytest

from npformer.analysis.probe import fit_linear_probe, probe_accuracy, probe_predict


def test_closed_form_equals_the_normal_equations():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5)) * [1, 2, 3, 4, 5] + 7  # (N, d)
    y = rng.integers(0, 3, size=200)
    probe = fit_linear_probe(X, y, 3, ridge=0.1)
    Z = (X - X.mean(0)) / X.std(0)
    A = np.hstack([Z, np.ones((200, 1))])
    P = 0.1 * 200 * np.eye(6)
    P[-1, -1] = 0
    W = np.linalg.inv(A.T @ A + P) @ A.T @ np.eye(3)[y]
    np.testing.assert_allclose(probe.weights, W, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(probe_predict(probe, X), (A @ W).argmax(1))


def test_reads_a_linearly_encoded_label_and_not_a_missing_one():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 6, size=3000)
    directions = rng.normal(size=(6, 16))
    encoded = directions[labels] + 0.3 * rng.normal(size=(3000, 16)).astype(np.float32)
    noise = rng.normal(size=(3000, 16))
    train, test = slice(0, 2000), slice(2000, None)
    good = fit_linear_probe(encoded[train], labels[train], 6)
    assert probe_accuracy(good, encoded[test], labels[test]) > 0.95
    blind = fit_linear_probe(noise[train], labels[train], 6)
    assert abs(probe_accuracy(blind, noise[test], labels[test]) - 1 / 6) < 0.05


def test_constant_columns_are_harmless():
    X = np.hstack([np.arange(10.0)[:, None], np.ones((10, 1))])
    y = (np.arange(10) >= 5).astype(int)
    probe = fit_linear_probe(X, y, 2)
    assert np.isfinite(probe.weights).all() and probe_accuracy(probe, X, y) == 1.0


def test_bad_inputs():
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match="num_classes=2 must be >= 2 and exceed every label"):
        fit_linear_probe(X, np.array([0, 1, 2, 0]), 2)
