"""The running example of chapters 01-04 (npformer.training.example)."""

import numpy as np
import pytest

from npformer.training.example import PAD, SENTENCES, VOCAB, running_example


def test_the_batch_pads_the_short_sentence_with_token_zero():
    words, ids, lengths, X = running_example(d=8)
    assert ids.shape == (2, 7) and X.shape == (2, 7, 8)
    assert lengths.tolist() == [len(s) for s in SENTENCES] == [7, 4]
    assert words[1][4:] == (PAD,) * 3 and (ids[1, 4:] == 0).all() and (ids[:, :4] != 0).all()
    assert [VOCAB[i] for i in ids[0]] == list(SENTENCES[0])


def test_a_word_has_one_embedding_wherever_it_occurs():
    words, ids, _, X = running_example(d=16)
    bank = VOCAB.index("bank")
    rows = X[ids == bank]  # "bank" in both sentences
    assert len(rows) == 2 and np.array_equal(rows[0], rows[1])
    assert not np.allclose(X[0, 0], X[0, 1])


def test_the_example_is_the_same_on_every_call_and_changes_with_the_seed():
    assert np.array_equal(running_example().X, running_example().X)
    assert not np.allclose(running_example(seed=1).X, running_example().X)


def test_format_weights_names_rows_and_columns_by_the_words():
    from npformer.training.example import format_weights

    text = format_weights(np.array([[0.25, 0.75], [1.0, 0.0]]), ("storm", "bank"))
    lines = text.splitlines()
    assert lines[0].split() == ["storm", "bank"]
    assert lines[1].split() == ["storm", "0.25", "0.75"]
    assert lines[2].split() == ["bank", "1.00", "0.00"]
    with pytest.raises(ValueError, match=r"\(2, 2\).*3 row names"):
        format_weights(np.eye(2), ("a", "b", "c"))
