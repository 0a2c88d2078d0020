"""Tests of npformer.training.toy_tasks: targets, encoding, gradients, a torch twin, training, bad
inputs."""

import numpy as np
import pytest

from npformer.core.gradcheck import central_difference
from npformer.training import toy_tasks as tt


def small_setup(offsets=(1, 2), d_model=4, num_heads=2, seed=0):
    task = tt.make_task(vocab_size=3, seq_len=4, offsets=offsets)
    rng = np.random.default_rng(seed)
    params = tt.init_params(task, d_model, rng)
    tokens, targets = tt.sample_batch(task, 2, rng)
    return task, params, tokens, targets


def test_targets_look_back_around_the_circle():
    task = tt.make_task(5, 4, (1, 3))
    tokens = np.array([[0, 1, 2, 3], [4, 4, 0, 1]])
    targets = tt.targets_of(task, tokens)  # (B, T, m)
    np.testing.assert_array_equal(targets[0, :, 0], [3, 0, 1, 2])  # one back, wrapping
    np.testing.assert_array_equal(targets[0, :, 1], [1, 2, 3, 0])  # three back
    np.testing.assert_array_equal(targets[1, :, 0], [1, 4, 4, 0])
    assert task.chance == 1 / 25 and task.d_in == 9


def test_encoding_is_one_hot_symbol_then_one_hot_position():
    task = tt.make_task(3, 4, (1,))
    X = tt.encode(task, np.array([[2, 0, 0, 1]]))
    assert X.shape == (1, 4, 7)
    np.testing.assert_array_equal(X[0, :, :3].argmax(-1), [2, 0, 0, 1])
    np.testing.assert_array_equal(X[0, :, 3:], np.eye(4))
    np.testing.assert_array_equal(X.sum(-1), 2.0)


@pytest.mark.parametrize("num_heads", [1, 2])
def test_backward_matches_central_differences(num_heads):
    task, params, tokens, targets = small_setup(num_heads=num_heads)
    X = tt.encode(task, tokens)

    def loss():
        logits, _ = tt.forward(X, params, num_heads, 2)
        return tt.cross_entropy(logits, targets)[0]

    logits, cache = tt.forward(X, params, num_heads, 2)
    grads = tt.backward(tt.cross_entropy(logits, targets)[1], cache)
    rng = np.random.default_rng(1)
    for name in tt.PARAM_NAMES:
        for _ in range(6):
            index = tuple(rng.integers(0, n) for n in params[name].shape)
            estimate = central_difference(loss, params[name], index, 1e-6)[0]
            assert abs(estimate - grads[name][index]) < 1e-8 + 1e-6 * abs(estimate), name


def test_matches_a_torch_twin():
    torch = pytest.importorskip("torch")
    task, params, tokens, targets = small_setup(offsets=(1, 3), d_model=6, num_heads=3)
    X = tt.encode(task, tokens)
    logits, cache = tt.forward(X, params, 3, 2)
    loss, d_logits = tt.cross_entropy(logits, targets)
    grads = tt.backward(d_logits, cache)

    tp = {n: torch.tensor(p, requires_grad=True) for n, p in params.items()}
    Xt = torch.tensor(X)
    B, T, _ = X.shape

    def heads(M):  # (B, T, d) -> (B, h, T, d_h), written without our package
        return M.reshape(B, T, 3, 2).transpose(1, 2)

    Q, K, V = (heads(Xt @ tp[n]) for n in ("W_q", "W_k", "W_v"))
    Y = torch.nn.functional.scaled_dot_product_attention(Q, K, V)  # (B, h, T, d_h)
    out = Y.transpose(1, 2).reshape(B, T, 6) @ tp["W_o"]
    ref_logits = out.reshape(B, T, 2, 3)
    ref_loss = torch.nn.functional.cross_entropy(
        ref_logits.reshape(-1, 3), torch.tensor(targets).reshape(-1)
    )
    ref_loss.backward()
    np.testing.assert_allclose(logits, ref_logits.detach().numpy(), rtol=0, atol=1e-12)
    assert abs(loss - ref_loss.item()) < 1e-12
    for n in tt.PARAM_NAMES:
        np.testing.assert_allclose(grads[n], tp[n].grad.numpy(), rtol=0, atol=1e-12)


def test_one_head_learns_one_look_back():
    task = tt.make_task(8, 8, (2,))
    result = tt.train(task, d_model=8, num_heads=1, seed=0, steps=120)
    tokens, _ = tt.sample_batch(task, 200, np.random.default_rng(5))
    evaluation = tt.evaluate(task, result.params, 1, tokens)
    assert evaluation.joint > 0.99 and task.chance == 1 / 8
    assert result.losses[-1] < 0.05 * result.losses[0]
    # the weights point two positions back
    look = evaluation.weights.mean(axis=0)[0]  # (T, T)
    np.testing.assert_array_equal(look.argmax(-1), (np.arange(8) - 2) % 8)


def test_two_look_backs_need_two_heads():
    task = tt.make_task(8, 8, (1, 2))
    tokens, _ = tt.sample_batch(task, 200, np.random.default_rng(5))
    joint = {}
    for h in (1, 2):
        result = tt.train(task, d_model=16, num_heads=h, seed=1, steps=300)
        joint[h] = tt.evaluate(task, result.params, h, tokens).joint
    assert joint[2] > 0.99 and joint[1] < 0.5


def test_training_is_reproducible():
    task = tt.make_task(4, 5, (1,))
    a = tt.train(task, d_model=4, num_heads=1, seed=3, steps=5)
    b = tt.train(task, d_model=4, num_heads=1, seed=3, steps=5)
    np.testing.assert_array_equal(a.losses, b.losses)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: tt.make_task(3, 4, (4,)), "offsets"),
        (lambda: tt.make_task(3, 4, (1, 1)), "offsets"),
        (lambda: tt.encode(tt.make_task(3, 4, (1,)), np.zeros((2, 5), int)), r"\(2, 5\)"),
        (lambda: tt.encode(tt.make_task(3, 4, (1,)), np.full((2, 4), 3)), "0 .. 2"),
    ],
)
def test_bad_inputs_raise_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_forward_and_backward_check_their_arguments():
    task, params, tokens, targets = small_setup()
    X = tt.encode(task, tokens)
    with pytest.raises(ValueError, match="num_heads"):
        tt.forward(X, params, 3, 2)
    logits, cache = tt.forward(X, params, 2, 2)


def test_most_frequent_accuracy_guesses_the_commonest_symbol():
    task = tt.make_task(3, 4, (1,))
    # row 0: symbol 2 is commonest, and the token one back is 2 at 3 of 4 positions;
    # row 1: symbol 0 is commonest, and the token one back is 0 at 2 of 4 positions
    tokens = np.array([[2, 2, 2, 1], [0, 1, 0, 2]])
    assert tt.most_frequent_accuracy(task, tokens) == (3 + 2) / 8
    # the targets of one offset are the tokens in another order: accuracy = largest count / T
    tokens = np.random.default_rng(3).integers(0, 3, size=(50, 4))
    largest = max(np.bincount(row, minlength=3).max() for row in tokens[:1])
    assert tt.most_frequent_accuracy(task, tokens[:1]) == largest / 4
    with pytest.raises(ValueError, match="tokens"):
        tt.most_frequent_accuracy(task, np.array([[0, 1, 2]]))


def test_a_backward_without_the_row_sum_still_trains_but_fails_finite_differences():
    """Training is weak evidence for a gradient; finite differences are strong evidence.

    With the softmax backward's row-sum term dropped (dZ = P * dP), the one-head layer still
    learns to read two places back (accuracy >= 0.99 after 150 steps), while its gradient
    misses central differences by more than 1e-2 (relative) at every seed, against < 1e-5 for
    the right backward.
    """
    from unittest import mock

    def row_sum_forgotten(d_out, cache):  # the bug: dZ = P * dP
        Q, K, V, P, factor = cache.Q, cache.K, cache.V, cache.weights, cache.scale
        dZ = P * (d_out @ V.swapaxes(-1, -2)) * factor  # (..., T, S)
        return dZ @ K, dZ.swapaxes(-1, -2) @ Q, P.swapaxes(-1, -2) @ d_out

    def gradient_error(task, seed, probes=8):
        rng = np.random.default_rng(seed)
        params = tt.init_params(task, 8, rng)
        tokens, targets = tt.sample_batch(task, 4, rng)
        X = tt.encode(task, tokens)  # (4, T, d_in)

        def loss():
            return tt.cross_entropy(tt.forward(X, params, 1)[0], targets)[0]

        logits, cache = tt.forward(X, params, 1)
        grads = tt.backward(tt.cross_entropy(logits, targets)[1], cache)
        estimated, computed = [], []
        for name in tt.PARAM_NAMES:
            for _ in range(probes):
                index = tuple(int(rng.integers(0, n)) for n in params[name].shape)
                estimated.append(central_difference(loss, params[name], index, 1e-6)[0])
                computed.append(grads[name][index])
        estimated, computed = np.array(estimated), np.array(computed)
        return np.linalg.norm(estimated - computed) / np.linalg.norm(estimated)

    task = tt.make_task(vocab_size=8, seq_len=8, offsets=(2,))
    tokens, _ = tt.sample_batch(task, 500, np.random.default_rng(100))
    right = [gradient_error(task, seed) for seed in range(3)]
    with mock.patch.object(tt, "scaled_dot_product_attention_backward", row_sum_forgotten):
        wrong = [gradient_error(task, seed) for seed in range(3)]
        run = tt.train(task, 8, num_heads=1, seed=0, steps=150)
    assert max(right) < 1e-5 and min(wrong) > 1e-2
    assert tt.evaluate(task, run.params, 1, tokens).joint >= 0.99


def test_position_blind_accuracy_is_the_commonest_of_the_other_tokens():
    task = tt.make_task(3, 4, (1,))
    # row 0: at position 3 (token 1) the others are 2, 2, 2: the guess 2 is right for sure;
    # at positions 0-2 (token 2) the others hold two 2s and one 1: right with probability 2/3
    tokens = np.array([[2, 2, 2, 1]])
    assert tt.position_blind_accuracy(task, tokens) == (3 * 2 / 3 + 1) / 4
    # it is never below the sequence's commonest symbol, which is one position-blind guess
    tokens = np.random.default_rng(4).integers(0, 3, size=(300, 4))
    assert tt.position_blind_accuracy(task, tokens) > tt.most_frequent_accuracy(task, tokens)
    with pytest.raises(ValueError, match="one offset"):
        tt.position_blind_accuracy(tt.make_task(3, 4, (1, 2)), tokens)


# --- the ReLU readout of chapter 04's deeper page ----------------------------------------


def test_mlp_readout_backward_matches_central_differences():
    task = tt.make_task(vocab_size=3, seq_len=4, offsets=(1, 2))
    rng = np.random.default_rng(5)
    params = tt.train_mlp_readout(task, 4, 2, seed=3, hidden=6, steps=0).params
    params["b_1"] = rng.standard_normal(6)  # no ReLU input exactly at its kink
    params["b_2"] = rng.standard_normal(6)
    tokens, targets = tt.sample_batch(task, 2, rng)
    X = tt.encode(task, tokens)

    def loss():
        return tt.cross_entropy(tt._forward_mlp(X, params, 2, 2)[0], targets)[0]

    logits, cache = tt._forward_mlp(X, params, 2, 2)
    grads = tt._backward_mlp(tt.cross_entropy(logits, targets)[1], cache)
    for name in tt.MLP_PARAM_NAMES:
        for _ in range(6):
            index = tuple(rng.integers(0, n) for n in params[name].shape)
            estimate = central_difference(loss, params[name], index, 1e-6)[0]
            assert abs(estimate - grads[name][index]) < 1e-8 + 1e-6 * abs(estimate), name


def test_one_head_with_a_relu_readout_learns_both_look_backs():
    task = tt.make_task(vocab_size=8, seq_len=8, offsets=(1, 2))
    tokens, _ = tt.sample_batch(task, 200, np.random.default_rng(100))
    run = tt.train_mlp_readout(task, 16, 1, seed=0, steps=1500)
    assert tt.evaluate_mlp_readout(task, run.params, 1, tokens).joint > 0.99
    assert run.losses[-50:].mean() < 0.1 * run.losses[:50].mean()


def test_one_job_plus_commonest_guesses_from_the_six_unknown_tokens():
    task = tt.make_task(3, 4, (1, 2))
    # position 0 knows tokens 0 (itself) and 3 (one back); the unknown ones are 1 and 2,
    # symbols 1 and 1: the guess 1 is the token two back (position 2) -> right
    # position 1 knows 1 and 0; unknown 2, 3 = symbols 1, 2 -> tie, smallest 1; two back is
    # position 3 = symbol 2 -> wrong. Positions 2 and 3 likewise.
    tokens = np.array([[0, 1, 1, 2]])
    # pos 2: knows 2, 1; unknown 3, 0 = 2, 0 -> guess 0; two back = pos 0 = 0 -> right
    # pos 3: knows 3, 2; unknown 0, 1 = 0, 1 -> guess 0; two back = pos 1 = 1 -> wrong
    assert tt.one_job_plus_commonest_accuracy(task, tokens) == 2 / 4
    # the bar lies above the commonest symbol of the whole sequence: it knows two tokens
    task8 = tt.make_task(8, 8, (1, 2))
    tokens8, _ = tt.sample_batch(task8, 300, np.random.default_rng(7))
    bar = tt.one_job_plus_commonest_accuracy(task8, tokens8)
    assert bar > tt.most_frequent_accuracy(task8, tokens8) + 0.02
    with pytest.raises(ValueError, match="two or more offsets"):
        tt.one_job_plus_commonest_accuracy(tt.make_task(3, 4, (1,)), tokens)
