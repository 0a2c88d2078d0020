"""Tests of npformer.training.tasks: shapes, determinism, answers, the loss mask, errors."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npformer.training.tasks import (
    ALPHABET_SIZE,
    EVALUATION_SEED,
    SEP,
    VOCAB_SIZE,
    all_distinct,
    answer,
    distinct_share,
    evaluation_prompts,
    make_batch,
    random_prompts,
    with_separator,
)


def test_vocabulary():
    assert (ALPHABET_SIZE, SEP, VOCAB_SIZE) == (20, 20, 21)


@given(
    st.integers(1, 8),  # B
    st.integers(1, 9),  # L
    st.sampled_from(["copy", "sort"]),
    st.integers(0, 2**32 - 1),
)
def test_batch_layout(B, L, task, seed):
    tokens, targets, mask = make_batch(np.random.default_rng(seed), B, L, task)
    assert tokens.shape == targets.shape == mask.shape == (B, 2 * L)
    assert np.issubdtype(tokens.dtype, np.integer) and mask.dtype == np.float32
    prompts = tokens[:, :L]
    assert ((0 <= prompts) & (prompts < ALPHABET_SIZE)).all()
    assert (tokens[:, L] == SEP).all()
    # the targets are the inputs shifted left by one
    np.testing.assert_array_equal(targets[:, :-1], tokens[:, 1:])
    # the answer positions L .. 2L-1 hold the answer; the input carries its first L - 1 tokens
    expected = np.sort(prompts, axis=1) if task == "sort" else prompts
    np.testing.assert_array_equal(targets[:, L:], expected)
    np.testing.assert_array_equal(tokens[:, L + 1 :], expected[:, :-1])


@pytest.mark.parametrize("task", ["copy", "sort"])
def test_loss_mask_is_one_on_the_answer_only(task):
    L = 5
    _, targets, mask = make_batch(np.random.default_rng(0), 4, L, task)
    np.testing.assert_array_equal(mask[:, :L], 0)
    np.testing.assert_array_equal(mask[:, L:], 1)
    # exactly the positions whose target is an answer symbol (not a prompt symbol or SEP)
    assert mask.sum() == 4 * L
    assert (targets[:, L - 1] == SEP).all() and mask[:, L - 1].sum() == 0


def test_same_seed_same_batches_and_a_fresh_batch_each_call():
    a = np.random.default_rng(7)
    b = np.random.default_rng(7)
    first_a, first_b = make_batch(a, 8, 6, "sort"), make_batch(b, 8, 6, "sort")
    for x, y in zip(first_a, first_b, strict=True):
        np.testing.assert_array_equal(x, y)
    second_a = make_batch(a, 8, 6, "sort")
    assert not np.array_equal(first_a.tokens, second_a.tokens)


def test_sort_answer_is_sorted_and_a_permutation():
    prompts = random_prompts(np.random.default_rng(1), 50, 8)
    sorted_ = answer(prompts, "sort")
    assert (np.diff(sorted_, axis=1) >= 0).all()
    for p, s in zip(prompts, sorted_, strict=True):
        assert sorted(p.tolist()) == s.tolist()
    np.testing.assert_array_equal(answer(prompts, "copy"), prompts)


def test_evaluation_prompts_are_fixed_by_their_seed():
    np.testing.assert_array_equal(
        evaluation_prompts(500, 6), evaluation_prompts(500, 6, EVALUATION_SEED)
    )
    assert not np.array_equal(evaluation_prompts(500, 6), evaluation_prompts(500, 6, 1))
    assert evaluation_prompts(500, 6).shape == (500, 6)


def test_with_separator():
    out = with_separator(np.array([[3, 1], [0, 19]]))
    np.testing.assert_array_equal(out, [[3, 1, SEP], [0, 19, SEP]])


def test_all_distinct_marks_the_prompts_with_no_repeat():
    prompts = np.array([[3, 1, 2], [3, 1, 3], [0, 0, 0], [5, 4, 5]])
    assert all_distinct(prompts).tolist() == [True, False, False, False]
    many = evaluation_prompts(4000, 6, seed=1)
    expected = [len(set(p)) == 6 for p in many.tolist()]
    assert all_distinct(many).tolist() == expected


def test_distinct_share_closed_form():
    assert math.isclose(distinct_share(6), 20 * 19 * 18 * 17 * 16 * 15 / 20**6, rel_tol=1e-15)
    assert distinct_share(1) == 1.0 and distinct_share(21) == 0.0


def test_distinct_share_matches_sampling():
    prompts = random_prompts(np.random.default_rng(3), 20000, 6)
    share = np.mean([len(set(p)) == 6 for p in prompts.tolist()])
    assert abs(share - distinct_share(6)) < 0.02  # ~5 standard errors of 0.0035


def test_bad_inputs():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="make_batch: task must be one of"):
        make_batch(rng, 2, 3, "reverse")
