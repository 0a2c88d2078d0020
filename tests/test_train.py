"""Tests of npformer.training.train: the loss mask, generation that reads its own outputs,
evaluation, a tiny run that learns, determinism, and bad configurations."""

import numpy as np
import pytest

import npformer.training.train as train_module
from npformer.core.model import forward, init_params, loss_and_grads
from npformer.training.tasks import SEP, make_batch, with_separator
from npformer.training.train import (
    TrainConfig,
    evaluate,
    generate,
    prompt_attention_mask,
    teacher_forced_accuracy,
    train,
)


def test_the_loss_sees_the_answer_only():
    """Changing the targets of prompt positions changes neither the loss nor any gradient."""
    config = TrainConfig(length=4, d_model=16, num_heads=2, num_layers=1, dtype="float64")
    model_config = config.model_config()
    params = init_params(model_config, np.random.default_rng(0), dtype=np.float64)
    batch = make_batch(np.random.default_rng(1), 5, 4, "sort", dtype=np.float64)
    loss, grads = loss_and_grads(params, model_config, *batch)
    scrambled = batch.targets.copy()
    scrambled[:, :4] = (scrambled[:, :4] + 7) % 21  # every prompt-position target changes
    loss2, grads2 = loss_and_grads(params, model_config, batch.tokens, scrambled, batch.loss_mask)
    assert loss == loss2
    for name in grads:
        np.testing.assert_array_equal(grads[name], grads2[name])
    # ... while changing one answer target does change the loss
    changed = batch.targets.copy()
    changed[0, 6] = (changed[0, 6] + 1) % 20
    assert loss_and_grads(params, model_config, batch.tokens, changed, batch.loss_mask)[0] != loss


def successor_model(wrong_at: int, wrong_token: int):
    """A fake model: it predicts "last token + 1 (mod 20)", except at generation step
    ``wrong_at`` (counted from the separator) where it predicts ``wrong_token``. With the
    separator as the last prompt token it starts from 0."""
    calls = []

    def next_logits(tokens):
        B, t = tokens.shape
        step = len(calls)
        calls.append(tokens.copy())
        last = tokens[:, -1]
        nxt = np.where(last == SEP, 0, (last + 1) % 20)
        if step == wrong_at:
            nxt = np.full(B, wrong_token)
        logits = np.zeros((B, t, 21))
        logits[np.arange(B), -1, nxt] = 1.0
        return logits

    return next_logits, calls


def test_generation_reads_its_own_outputs():
    """A model forced to be wrong at one position: every later position sees the wrong token."""
    start = np.array([[4, 9, SEP], [1, 2, SEP]])
    next_logits, calls = successor_model(wrong_at=2, wrong_token=13)
    out = generate(next_logits, start, 5)
    # right answer would be 0 1 2 3 4; step 2 is forced to 13, and the steps after it continue
    # from 13, which only happens if the generated (wrong) token is fed back
    np.testing.assert_array_equal(out, [[0, 1, 13, 14, 15]] * 2)
    assert [c.shape[1] for c in calls] == [3, 4, 5, 6, 7]
    np.testing.assert_array_equal(calls[3][:, -1], [13, 13])  # the input after the mistake


def test_generate_accepts_last_position_logits_and_checks_shapes():
    out = generate(lambda tok: np.eye(21)[np.full(tok.shape[0], 5)], np.array([[SEP]]), 3)
    np.testing.assert_array_equal(out, [[5, 5, 5]])


def test_evaluate_counts_tokens_and_sequences(monkeypatch):
    """With a copy oracle that errs once in every prompt starting with an even symbol, the
    accuracies are exact fractions of the held-out set."""
    config = TrainConfig(task="copy", length=3)

    def fake_model_logits(params, model_config, mask_fn=None):
        def next_logits(tokens):
            B, t = tokens.shape
            k = t - (config.length + 1)  # answer position being generated
            nxt = tokens[:, k].copy()  # copy: the k-th prompt symbol
            if k == 1:
                nxt = np.where(tokens[:, 0] % 2 == 0, (nxt + 1) % 20, nxt)
            logits = np.zeros((B, t, 21))
            logits[np.arange(B), -1, nxt] = 1.0
            return logits

        return next_logits

    monkeypatch.setattr(train_module, "model_logits", fake_model_logits)
    ev = evaluate({}, config, n=200, seed=5)
    even = (ev.prompts[:, 0] % 2 == 0).mean()
    assert ev.sequence_accuracy == pytest.approx(1 - even)
    assert ev.token_accuracy == pytest.approx(1 - even / 3)
    assert ev.generated.shape == ev.expected.shape == (200, 3)


def test_a_tiny_run_learns_copy():
    config = TrainConfig(task="copy", length=2, steps=100, d_model=16, num_heads=2,
                         num_layers=1, lr=1e-2)  # fmt: skip
    untrained = train(TrainConfig(**{**config.__dict__, "steps": 1}))
    assert evaluate(untrained.params, config).token_accuracy < 0.5
    result = train(config)
    assert result.losses.shape == (100,)
    assert result.losses[-10:].mean() < 0.1 * result.losses[:10].mean()
    ev = evaluate(result.params, config)
    assert ev.sequence_accuracy >= 0.95


def test_training_is_a_function_of_the_config():
    config = TrainConfig(task="sort", length=3, steps=15, d_model=16, num_heads=2, num_layers=1)
    a, b = train(config), train(config)
    np.testing.assert_array_equal(a.losses, b.losses)
    for name in a.params:
        np.testing.assert_array_equal(a.params[name], b.params[name])
    assert a.params["tok_emb"].dtype == np.float32
    other = train(TrainConfig(**{**config.__dict__, "seed": 1}))
    assert not np.array_equal(a.losses, other.losses)


def test_checkpoints_are_the_parameters_of_the_shorter_runs():
    config = TrainConfig(task="sort", length=3, steps=12, d_model=16, num_heads=2, num_layers=1)
    full = train(config, checkpoints=(5, 12))
    assert sorted(full.checkpoints) == [5, 12]
    shorter = train(TrainConfig(**{**config.__dict__, "steps": 5}))
    for name in full.params:
        np.testing.assert_array_equal(full.checkpoints[5][name], shorter.params[name])
        np.testing.assert_array_equal(full.checkpoints[12][name], full.params[name])
    assert full.checkpoints[12]["tok_emb"] is not full.params["tok_emb"]  # a copy
    assert train(config).checkpoints is None


def test_checkpoint_accuracies_score_each_checkpoint():
    from npformer.training.experiment import checkpoint_accuracies

    config = TrainConfig(task="copy", length=2, steps=6, d_model=8, num_heads=2, num_layers=1)
    scores = checkpoint_accuracies((config, (3, 6)))
    assert list(scores) == [3, 6]
    params = train(config).params
    final = evaluate(params, config)
    forced = teacher_forced_accuracy(params, config, final.prompts, final.expected)
    assert scores[6] == (final.sequence_accuracy, final.token_accuracy, forced)
    assert scores[6].forced_token == forced


def test_teacher_forced_accuracy_is_one_step_per_prefix():
    # one pass over the true sequence gives, at answer position t, the prediction a step-by-step
    # run makes from the true prefix [prompt, SEP, answer[:t]]; half-trained, so errors occur
    config = TrainConfig(task="sort", length=4, steps=60, d_model=16, num_heads=2, num_layers=1)
    params = train(config).params
    ev = evaluate(params, config, n=64)
    model = config.model_config()
    right = []
    for t in range(config.length):
        prefix = np.concatenate([with_separator(ev.prompts), ev.expected[:, :t]], axis=1)
        logits = forward(params, model, prefix)[0][:, -1]  # (n, vocab)
        right.append(logits.argmax(axis=-1) == ev.expected[:, t])
    by_steps = float(np.mean(right))
    assert 0 < by_steps < 1
    assert teacher_forced_accuracy(params, config, ev.prompts, ev.expected) == by_steps


def test_progress_is_reported():
    seen = []
    train(TrainConfig(length=2, steps=10, d_model=8, num_heads=2, num_layers=1),
          progress=lambda done, total: seen.append((done, total)))  # fmt: skip
    assert seen[-1] == (10, 10) and len(seen) == 10


def test_bidirectional_prompt_mask():
    mask = prompt_attention_mask(3, 6, bidirectional=True)
    assert mask.shape == (6, 6)
    assert mask[:3, :3].all()  # the prompt sees itself both ways
    np.testing.assert_array_equal(mask[3:], np.tril(np.ones((6, 6), bool))[3:])  # rest causal
    assert prompt_attention_mask(3, 6, bidirectional=False) is None


def test_bidirectional_prompt_run_and_evaluation():
    config = TrainConfig(length=3, steps=5, d_model=8, num_heads=2, num_layers=1,
                         prompt_attention="bidirectional", positions=False)  # fmt: skip
    result = train(config)
    ev = evaluate(result.params, config, n=20)
    assert 0 <= ev.token_accuracy <= 1


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"task": "reverse"}, r"task, prompt_attention and dtype must be in.*'reverse'"),
        ({"dtype": "float16"}, r"task, prompt_attention and dtype must be in.*'float16'"),
        ({"prompt_attention": "full"}, r"task, prompt_attention and dtype must be in.*'full'"),
        ({"length": 0}, "length, steps, batch_size must be >= 1"),
        ({"steps": -3}, "length, steps, batch_size must be >= 1"),
        ({"seed": -1}, "warmup_steps and seed >= 0"),
        ({"lr": 0.0}, "lr and qk_init_scale > 0"),
        ({"lr": float("nan")}, "lr and qk_init_scale > 0"),
        ({"qk_init_scale": 0.0}, "lr and qk_init_scale > 0"),
        ({"d_model": 30, "num_heads": 4}, "d_model=30 must be a positive multiple of num_heads=4"),
        ({"ln": "middle"}, "ln must be one of"),
    ],
)
def test_bad_configurations(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**changes)


def test_train_and_evaluate_check_their_inputs():
    with pytest.raises(ValueError, match=r"prompts must have shape \(n, 6\), got \(4, 5\)"):
        evaluate({}, TrainConfig(), prompts=np.zeros((4, 5), dtype=int))


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rope", "alibi", "none"])
def test_a_run_picks_its_position_scheme(positions):
    config = TrainConfig(length=4, d_model=16, num_heads=2, num_layers=1, steps=60, lr=1e-2,
                         positions=positions)  # fmt: skip
    assert config.model_config().positions == positions
    assert bool(config.positions) == (positions != "none")
    result = train(config)
    assert ("pos_emb" in result.params) == (positions == "learned")
    assert result.losses[-10:].mean() < result.losses[:10].mean()  # it learns something
    assert TrainConfig(positions=True).model_config().positions == "learned"
    assert TrainConfig(positions=False).model_config().positions == "none"
    with pytest.raises(ValueError, match="positions must be one of"):
        TrainConfig(positions="relative")


def test_warmup_is_linear_and_off_by_default():
    from npformer.training.train import learning_rate

    plain = TrainConfig(lr=0.01)
    assert all(learning_rate(plain, s) == 0.01 for s in (0, 5, 1000))
    warm = TrainConfig(lr=0.01, warmup_steps=100)
    assert learning_rate(warm, 0) == pytest.approx(1e-4)
    assert learning_rate(warm, 49) == pytest.approx(5e-3)
    assert learning_rate(warm, 99) == learning_rate(warm, 500) == 0.01
    # warm-up changes the run; warmup_steps=0 gives the run of a config without the field set
    small = dict(length=2, steps=5, d_model=8, num_heads=2, num_layers=1)
    a = train(TrainConfig(**small)).losses
    np.testing.assert_array_equal(a, train(TrainConfig(**small, warmup_steps=0)).losses)
    assert not np.array_equal(a, train(TrainConfig(**small, warmup_steps=3)).losses)


def test_qk_init_scale_gives_an_unscaled_head_the_scaled_heads_initial_scores():
    # c^2 = 1 / sqrt(d_h): c Q (c K)^T equals Q K^T / sqrt(d_h), so the first forward pass
    # (the first loss, before any update) of an unscaled head with Q and K shrunk by c is the
    # scaled head's; with c = 1 it is not
    wide = dict(d_model=16, num_heads=1, steps=2, dtype="float64")
    scaled = train(TrainConfig(**wide)).losses
    shrunk = train(TrainConfig(**wide, scale=False, qk_init_scale=16**-0.25)).losses
    unscaled = train(TrainConfig(**wide, scale=False)).losses
    assert abs(shrunk[0] - scaled[0]) < 1e-12 < abs(unscaled[0] - scaled[0])
    assert shrunk[1] != scaled[1]  # the parametrization differs once Adam moves the weights
    # only the Q and K columns of W_qkv change, in every block
    two = dict(d_model=16, num_heads=2, num_layers=2, dtype="float64")
    plain = train_module.initial_params(TrainConfig(**two), np.random.default_rng(0))
    half = train_module.initial_params(
        TrainConfig(**two, qk_init_scale=0.5), np.random.default_rng(0)
    )
    for name, value in plain.items():
        if name.endswith("attn.W_qkv"):
            np.testing.assert_array_equal(half[name][:, :32], 0.5 * value[:, :32])
            np.testing.assert_array_equal(half[name][:, 32:], value[:, 32:])
        else:
            np.testing.assert_array_equal(half[name], value)


def test_grad_norms_are_each_blocks_gradient_norm():
    from npformer.training.train import block_grad_norms

    config = TrainConfig(length=2, steps=3, d_model=8, num_heads=2, num_layers=2)
    result = train(config, record_grad_norms=True)
    assert result.grad_norms.shape == (3, 2)
    # the first step's norms from the initial parameters, recomputed by hand
    rng = np.random.default_rng(config.seed)
    params = init_params(config.model_config(), rng, dtype=np.float32)
    batch = make_batch(rng, config.batch_size, 2, config.task)
    _, grads = loss_and_grads(params, config.model_config(), *batch)
    by_hand = [
        np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for n, g in grads.items()
                    if n.startswith(f"block{layer}.")))
        for layer in (0, 1)
    ]  # fmt: skip
    np.testing.assert_allclose(result.grad_norms[0], by_hand, rtol=1e-6)
    np.testing.assert_allclose(block_grad_norms(grads, 2), by_hand, rtol=1e-12)
    assert train(config).grad_norms is None
