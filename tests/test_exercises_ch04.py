"""Chapter 04's checkers pass a right split/merge and fail typical mistakes on their checks."""

from npformer.book.exercises import NOT_ATTEMPTED
from npformer.book.exercises.ch04 import (
    MERGE_CHECKS,
    SPLIT_CHECKS,
    check_merge_heads,
    check_split_heads,
)


def split_reference(X, num_heads):
    B, T, d = X.shape
    return X.reshape(B, T, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def merge_reference(H):
    B, h, T, d_h = H.shape
    return H.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


def split_reshape_only(X, num_heads):  # right shape, tokens mixed into heads
    B, T, d = X.shape
    return X.reshape(B, num_heads, T, d // num_heads)


def split_strided(X, num_heads):  # cuts the width as (d_h, h): head k gets every h-th column
    B, T, d = X.shape
    return X.reshape(B, T, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_wrong_transpose(X, num_heads):  # (B, h, d_h, T): the head axis moved, tokens last
    B, T, d = X.shape
    return X.reshape(B, T, num_heads, d // num_heads).transpose(0, 2, 3, 1)


def merge_reshape_only(H):  # does not undo the transpose
    B, h, T, d_h = H.shape
    return H.reshape(B, T, h * d_h)


def merge_wrong_transpose(H):  # swaps the last two axes instead of T and h
    B, h, T, d_h = H.shape
    return H.transpose(0, 1, 3, 2).reshape(B, T, h * d_h)


def merge_transpose_only(H):  # forgets the reshape: (B, T, h, d_h)
    return H.transpose(0, 2, 1, 3)


def stub(*args):
    raise NotImplementedError


def test_the_references_pass(capsys):
    assert check_split_heads(split_reference).ok and len(SPLIT_CHECKS) == 5
    assert check_merge_heads(merge_reference).ok and len(MERGE_CHECKS) == 5
    assert capsys.readouterr().out == "passed 5 of 5 checks\npassed 5 of 5 checks\n"


def test_the_stubs_are_not_attempted(capsys):
    assert not check_split_heads(stub).attempted
    assert not check_merge_heads(stub).attempted
    assert capsys.readouterr().out == f"{NOT_ATTEMPTED}\n{NOT_ATTEMPTED}\n"


def test_a_reshape_without_transpose_fails_on_column_ownership():
    line = check_split_heads(split_reshape_only, show=False).line
    assert line.startswith("failed check 2 of 5 (head k owns columns")
    assert "head 0 should hold columns 0-1 of every token, [[0.0, 1.0], [10.0, 11.0]" in line


def test_a_strided_split_fails_on_column_ownership():
    line = check_split_heads(split_strided, show=False).line
    assert line.startswith("failed check 2 of 5 (head k owns columns")
    assert "got [[0.0, 3.0], [10.0, 13.0], [20.0, 23.0]]" in line


def test_a_wrong_transpose_fails_on_the_shape():
    line = check_split_heads(split_wrong_transpose, show=False).line
    assert line == (
        "failed check 1 of 5 (shape (1, 3, 4), h = 2 -> (1, 2, 3, 2)): "
        "expected shape (1, 2, 3, 2), got shape (1, 2, 2, 3)"
    )


def test_a_merge_that_only_reshapes_is_not_the_inverse():
    line = check_merge_heads(merge_reshape_only, show=False).line
    assert line.startswith("failed check 2 of 5 (merge(split(X)) = X, T = 3, d = 4, h = 2)")
    assert "merge(split(X)) is not X" in line


def test_a_merge_with_the_wrong_transpose_fails():
    line = check_merge_heads(merge_wrong_transpose, show=False).line
    assert line.startswith("failed check 2 of 5 (merge(split(X)) = X")


def test_a_merge_without_the_reshape_fails_on_the_shape():
    line = check_merge_heads(merge_transpose_only, show=False).line
    assert line.endswith("expected shape (1, 3, 4), got shape (1, 3, 2, 2)")
