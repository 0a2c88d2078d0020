"""Arguments are checked where readers call, and nowhere else: one case per boundary check.

Readers call the functions the chapters hand them, the decoder's and trainer's entry points
(``model.forward``, ``loss_and_grads``, ``init_params``, ``train.train`` / ``evaluate`` /
``generate``, the encoder-decoder's and seq2seq's), the config classes and the exercise
checkers. A boundary function checks an argument only where a plausible mistake would
otherwise fail confusingly or give a silently wrong answer, and raises a ValueError naming the
function, the argument and the shapes. Functions only the package calls check nothing.

``CASES`` holds one bad call per check that remains, with the words its message must contain;
``test_checks_are_at_most_a_tenth_of_the_code`` holds the package to the issue's budget.
"""

from __future__ import annotations

import re
import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from npformer.analysis import bootstrap as BS
from npformer.analysis import circuits as CI
from npformer.analysis import direction_ablation as DA
from npformer.analysis import interventions as IV
from npformer.analysis import probe as PR
from npformer.analysis import scaling as SC
from npformer.book import exercises as EX
from npformer.book import interactive as IA
from npformer.book import measuring as ME
from npformer.book import plotting as PL
from npformer.book import verify as VE
from npformer.core import attention as A
from npformer.core import block as BL
from npformer.core import blocked_attention as BA
from npformer.core import encoder_decoder as ED
from npformer.core import gradcheck as G
from npformer.core import kv_cache as KV
from npformer.core import label_smoothing as LS
from npformer.core import masks as MK
from npformer.core import model as M
from npformer.core import multi_head as MH
from npformer.core import optim as O
from npformer.core import positions as P
from npformer.training import example as EXM
from npformer.training import experiment as XP
from npformer.training import extrapolation as XT
from npformer.training import schedules as SH
from npformer.training import seq2seq as S2S
from npformer.training import tasks as TK
from npformer.training import toy_tasks as TT
from npformer.training import train as TR

ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 3, 4))  # (B, T, d_h)
CFG = M.DecoderConfig(7, 8, 2, 2, 16, 6)
PARAMS = M.init_params(CFG, np.random.default_rng(1))
TOKENS = np.array([[1, 2, 3], [4, 5, 6]])
POST = M.DecoderConfig(7, 8, 2, 2, 16, 6, ln="post")
EDC = ED.EncoderDecoderConfig(12, 16, 4, 32, 1, 1)
EDP = ED.init_encoder_decoder_params(EDC, np.random.default_rng(2))
TASK = TT.make_task(3, 4, (1,))
LAYERS = KV.init_attention_only_model(2, 8, 2, 2, np.random.default_rng(3))


def _cache(**kw):
    return KV.KVCache(**{"num_layers": 2, "batch": 1, "num_kv_heads": 2, "max_len": 4} | kw)


def _filled_cache():
    cache = _cache(d_head=4)
    cache.length = 4
    return cache


def _rolling_cache():
    return M.decoder_cache(M.DecoderConfig(7, 8, 2, 2, 16, 6, positions="rope"), 1, window=3)


def _mask_figure(**changes):
    controls, states, cols, rows = IA.mask_states()
    args = dict(fig_id="masks", controls=controls, states=states, col_labels=cols)
    return IA.interactive_figure(**(args | {"row_labels": rows} | changes))


def _extrapolation_result():
    config = XT.ExtrapolationConfig(train_length=4, longest=8)
    return XT.ExtrapolationResult(config, np.ones(1), {4: np.ones(4), 8: np.ones(8)}, None)


# (id, call, words of the message): one row per check that remains at the boundary
CASES = [
    # attention: the chapters' core (the checks of validation.py run here)
    ("sdpa Q int", lambda: A.scaled_dot_product_attention(np.ones((3, 4), int), X, X), "Q must"),
    ("sdpa Q rank", lambda: A.scaled_dot_product_attention(np.ones(4), X, X), "rank >= 2"),
    ("sdpa dtypes", lambda: A.scaled_dot_product_attention(X.astype("f4"), X, X), "one dtype"),
    ("sdpa d_h", lambda: A.scaled_dot_product_attention(X, X[..., :3], X), "last axes (d_h)"),
    ("sdpa K V", lambda: A.scaled_dot_product_attention(X, X, X[:, :2]), "(..., S) must match"),
    ("sdpa width 0", lambda: A.scaled_dot_product_attention(*[X[..., :0]] * 3), "d_h = 0"),
    ("sdpa no key", lambda: A.scaled_dot_product_attention(X, *[X[:, :0]] * 2), "S >= 1"),
    (
        "sdpa batch",
        lambda: A.scaled_dot_product_attention(X, *[np.ones((3, 3, 4))] * 2),
        "do not broadcast",
    ),
    ("sdpa scale", lambda: A.scaled_dot_product_attention(X, X, X, scale=0.5), "scale must be"),
    ("sdpa causal", lambda: A.scaled_dot_product_attention(X, X, X, causal=1), "causal must be"),
    (
        "sdpa T > S",
        lambda: A.scaled_dot_product_attention(X, X[:, :2], X[:, :2], causal=True),
        "at least as many keys",
    ),
    (
        "sdpa mask",
        lambda: A.scaled_dot_product_attention(X, X, X, mask=np.ones((3, 3))),
        "mask must be boolean",
    ),
    (
        "sdpa bias",
        lambda: A.scaled_dot_product_attention(X, X, X, bias=np.ones((2, 2, 3, 3))),
        "bias of shape (2, 2, 3, 3)",
    ),
    ("softmax axis", lambda: A.softmax(X, axis=3), "axis 3 is out of range"),
    ("softmax axis float", lambda: A.softmax(X, axis=1.0), "axis must be an integer"),
    (
        "masked_softmax mask",
        lambda: A.masked_softmax(X, np.ones((4, 4), bool)),
        "mask of shape (4, 4) does not broadcast",
    ),
    (
        "sdpa backward d_out",
        lambda: A.scaled_dot_product_attention_backward(
            X[:, :2], A.scaled_dot_product_attention(X, X, X)[1]
        ),
        "d_out has shape (2, 2, 4)",
    ),
    # block
    (
        "init_ffn activation",
        lambda: BL.init_feed_forward_params(4, 8, RNG, "tanh"),
        "activation must",
    ),
    (
        "feed_forward activation",
        lambda: BL.feed_forward(X, BL.init_feed_forward_params(4, 8, RNG), "Relu"),
        "activation must be one of",
    ),
    # blocked attention
    ("blocked lead", lambda: BA.blocked_attention(X, X[:1], X[:1]), "equal leading axes"),
    ("blocked causal", lambda: BA.blocked_attention(X, X[:, :2], X[:, :2]), "S >= T"),
    ("tile_counts", lambda: BA.tile_counts(4, 2), "a causal mask needs S >= T"),
    # bootstrap
    (
        "item_mean_interval",
        lambda: BS.item_mean_interval(np.ones((1, 5))),
        "S >= 2 runs, got (1, 5)",
    ),
    # circuits
    ("qk_terms post-LN", lambda: CI.qk_terms(PARAMS, POST, TOKENS, 0), "ln='post'"),
    ("qk_terms head", lambda: CI.qk_terms(PARAMS, CFG, TOKENS, 2), "head in 0..1"),
    (
        "patching post-LN",
        lambda: CI.head_position_patching(PARAMS, POST, TOKENS, TOKENS, 1, [1, 2]),
        "pre-LN model",
    ),
    (
        "path_patching last",
        lambda: CI.path_patching(PARAMS, CFG, TOKENS, TOKENS, (1, 0), 1, [1, 2]),
        "layer before the last",
    ),
    # the decoder's config and position scheme
    ("config size", lambda: M.DecoderConfig(0, 8, 2, 2, 16, 6), "every size must be >= 1"),
    (
        "config heads",
        lambda: M.DecoderConfig(7, 10, 4, 2, 16, 6),
        "d_model=10 must be a positive multiple of num_heads=4",
    ),
    ("config ln", lambda: M.DecoderConfig(7, 8, 2, 2, 16, 6, ln="middle"), "ln must be one of"),
    (
        "config positions",
        lambda: M.DecoderConfig(7, 8, 2, 2, 16, 6, positions="absolute"),
        "positions must be one of",
    ),
    (
        "config rope odd",
        lambda: M.DecoderConfig(7, 6, 2, 2, 16, 6, positions="rope"),
        "even d_model",
    ),
    # direction ablation
    (
        "dependent directions",
        lambda: DA.remove_directions(np.ones(3), np.ones((2, 3))),
        "(2, 3) are dependent",
    ),
    # encoder-decoder and seq2seq
    (
        "ed config size",
        lambda: ED.EncoderDecoderConfig(12, 16, 4, 32, 0, 1),
        "every size must be >= 1",
    ),
    (
        "ed config odd",
        lambda: ED.EncoderDecoderConfig(12, 15, 5, 32, 1, 1),
        "d_model an even multiple of num_heads",
    ),
    (
        "ed config ln",
        lambda: ED.EncoderDecoderConfig(12, 16, 4, 32, 1, 1, ln="mid"),
        "ln must be 'pre' or 'post'",
    ),
    (
        "embed ids",
        lambda: ED.embed(np.array([[0, 12]]), EDP["tok_emb"]),
        "outside the vocabulary [0, 11]",
    ),
    (
        "encode src_pad",
        lambda: ED.encode(np.ones((2, 3), int), EDP, EDC, np.ones((2, 3), int)),
        "src_pad must be a bool (B, S) mask",
    ),
    (
        "decode src_pad row",
        lambda: ED.decode(
            np.ones((1, 2), int), np.zeros((1, 3, 16)), EDP, EDC, np.zeros((1, 3), bool)
        ),
        "at least one True per row",
    ),
    (
        "greedy_generate",
        lambda: ED.greedy_generate(np.ones((1, 3), int), EDP, EDC, 12, 2),
        "start_token=12 must lie in the vocabulary",
    ),
    ("seq2seq run", lambda: S2S.Seq2SeqRun(steps=0), "every size, steps and warmup must be >= 1"),
    ("seq2seq smoothing", lambda: S2S.Seq2SeqRun(smoothing=1.0), "smoothing must lie in [0, 1)"),
    (
        "exposure_bias",
        lambda: S2S.exposure_bias(None, EDC, np.ones((2, 4), int), 3),
        "plant_at must lie in [1, 2]",
    ),
    # example, exercises, experiment
    (
        "format_weights",
        lambda: EXM.format_weights(np.ones((2, 3)), ["a", "b"]),
        "weights of shape (2, 3)",
    ),
    ("exercise fn", lambda: EX.run_checks("softmax", []), "fn must be a function"),
    (
        "cli positions",
        lambda: XP._scheme(Namespace(no_positions=True, positions="rope")),
        "contradicts",
    ),
    # extrapolation
    ("extrapolation offset", lambda: XT.ExtrapolationConfig(offset=16), "offset < train_length"),
    ("extrapolation lr", lambda: XT.ExtrapolationConfig(lr=0.0), "lr must be > 0"),
    (
        "past_training_accuracy",
        lambda: XT.past_training_accuracy(_extrapolation_result(), 16),
        "length=16 must be an evaluated length above n=4",
    ),
    (
        "fine_tune interpolate",
        lambda: XT.fine_tune(None, XT.ExtrapolationConfig(), 32, 1, True),
        "interpolate needs positions='rope'",
    ),
    # gradient checks
    (
        "relative_error",
        lambda: G.relative_error(np.ones(2), np.ones(3)),
        "a has shape (2,) and b has shape (3,)",
    ),
    (
        "normwise",
        lambda: G.normwise_relative_error({"a": np.ones(2)}, {"a": np.ones(3)}),
        "a and b must match",
    ),
    (
        "central_difference",
        lambda: G.central_difference(lambda: 0.0, np.ones(3, "f4"), 0, 1e-3),
        "need float64",
    ),
    (
        "gradient_check",
        lambda: G.gradient_check(
            lambda: 0.0, {"W": np.ones((3, 2)).T}, {"W": np.ones((2, 3))}, {"W": [0]}, 1e-5
        ),
        "must be contiguous",
    ),
    # interactive figures
    ("figure id", lambda: _mask_figure(fig_id="Masks!"), "fig_id must be lowercase"),
    ("figure kind", lambda: _mask_figure(kind="pie"), "kind must be 'heatmap' or 'bars'"),
    ("figure states", lambda: _mask_figure(states={}), "states has no state"),
    ("figure shape", lambda: _mask_figure(row_labels=["a"]), "has shape (5, 5), expected (1, 5)"),
    ("figure control", lambda: _mask_figure(controls=["x"]), "unknown control 'x'"),
    ("mask_states", lambda: IA.mask_states(lengths=(0, 0)), "at least one length >= 1"),
    (
        "attention_map_states",
        lambda: IA.attention_map_states(np.ones((1, 2, 3, 3)), ["a", "b"]),
        "T = len(tokens) = 2",
    ),
    # interventions
    (
        "head outside",
        lambda: IV.forward_with_interventions(PARAMS, CFG, TOKENS, ablate=[(2, 0)]),
        "outside the model: layers 0..1, heads 0..1",
    ),
    (
        "replace shape",
        lambda: IV.forward_with_interventions(PARAMS, CFG, TOKENS, replace={(0, 0): np.eye(2)}),
        "replacement weights of shape (2, 2) do not fit",
    ),
    (
        "replace sums",
        lambda: IV.forward_with_interventions(
            PARAMS, CFG, TOKENS, replace={(0, 0): 0.5 * np.eye(3)}
        ),
        "sum to one over each query's visible keys",
    ),
    (
        "patch shape",
        lambda: IV.forward_with_interventions(PARAMS, CFG, TOKENS, patch={(0, 0): np.zeros(3)}),
        "patch[(0, 0)] of shape (3,) does not fit",
    ),
    (
        "adversarial rows",
        lambda: IV.adversarial_weights(PARAMS, CFG, TOKENS, 0, 0, [1, 1]),
        "rows must be distinct",
    ),
    (
        "logit_difference",
        lambda: IV.logit_difference(np.ones((2, 5)), np.zeros(3, int)),
        "must match, got logits (2, 5) and target (3,)",
    ),
    # the KV cache (the chapter-09 step keeps its checks: it prints their calls)
    (
        "gqa X",
        lambda: KV.grouped_query_attention(np.ones((2, 8)), LAYERS[0], 2, 2),
        "X must have shape (B, n, d)",
    ),
    (
        "gqa heads",
        lambda: KV.grouped_query_attention(np.ones((1, 2, 8)), LAYERS[0], 2, 3),
        "num_kv_heads=3 must divide num_heads=2",
    ),
    (
        "gqa num_heads",
        lambda: KV.grouped_query_attention(np.ones((1, 2, 8)), LAYERS[0], 0, 1),
        "num_heads must be an integer >= 1",
    ),
    (
        "gqa d",
        lambda: KV.grouped_query_attention(np.ones((1, 2, 9)), LAYERS[0], 2, 2),
        "d_model=9 must be a positive multiple",
    ),
    (
        "gqa params",
        lambda: KV.grouped_query_attention(np.ones((1, 2, 8)), {}, 2, 2),
        "params lacks 'W_q'",
    ),
    (
        "gqa params shape",
        lambda: KV.grouped_query_attention(
            np.ones((1, 2, 8)), LAYERS[0] | {"W_o": np.ones((8, 4))}, 2, 2
        ),
        "params['W_o'] is float64 (8, 4), not float64 (8, 8)",
    ),
    (
        "model no layer",
        lambda: KV.attention_only_forward(np.ones((1, 2, 8)), [], 2, 2),
        "at least one layer",
    ),
    (
        "cache layers",
        lambda: KV.attention_only_forward(
            np.ones((1, 2, 8)), LAYERS, 2, 2, _cache(num_layers=3, d_head=4)
        ),
        "the cache holds 3 layers",
    ),
    (
        "cache type",
        lambda: M.forward(PARAMS, CFG, TOKENS, cache=object()),
        "cache must be a KVCache",
    ),
    (
        "cache shape",
        lambda: KV.attention_only_forward(np.ones((1, 2, 8)), LAYERS, 2, 2, _cache(d_head=2)),
        "the model needs (L, B, g, max_len, d_h) = (2, 1, 2, max_len, 4)",
    ),
    (
        "cache dtype",
        lambda: KV.attention_only_forward(
            np.ones((1, 2, 8)), LAYERS, 2, 2, _cache(d_head=4, dtype=np.float32)
        ),
        "cache holds float32",
    ),
    (
        "cache full",
        lambda: KV.attention_only_forward(np.ones((1, 2, 8)), LAYERS, 2, 2, _filled_cache()),
        "2 new positions overflow the cache",
    ),
    (
        "window full",
        lambda: M.forward(
            PARAMS,
            M.DecoderConfig(7, 8, 2, 2, 16, 6, positions="rope"),
            np.ones((1, 4), int),
            cache=_rolling_cache(),
        ),
        "3 slots holding 0 positions takes at most 3 new positions",
    ),
    ("advance", lambda: _cache(d_head=4).advance(5), "length 0 + 5 exceeds max_len 4"),
    ("advance n", lambda: _cache(d_head=4).advance(0), "n must be an integer >= 1"),
    (
        "repeat_kv_heads",
        lambda: KV.repeat_kv_heads(np.ones((1, 2, 3, 4)), 3),
        "num_heads=3 is not a multiple of the 2",
    ),
    (
        "generate cache",
        lambda: KV.generate_with_cache(np.ones((1, 2, 8)), LAYERS, 2, 2, 2, _filled_cache()),
        "the cache must start empty",
    ),
    # label smoothing
    (
        "smoothing",
        lambda: LS.smoothed_targets(np.array([0, 1]), 3, 1.0),
        "smoothing must lie in [0, 1)",
    ),
    (
        "smoothing targets",
        lambda: LS.smoothed_targets(np.array([0, 3]), 3, 0.1),
        "targets in [0, 3)",
    ),
    (
        "ls targets shape",
        lambda: LS.label_smoothed_cross_entropy(np.ones((2, 3, 4)), np.zeros((2, 1), int)),
        "targets of shape (2, 1) must match logits of shape (2, 3, 4)",
    ),
    (
        "ls loss_mask",
        lambda: LS.label_smoothed_cross_entropy(
            np.ones((2, 3, 4)), np.zeros((2, 3), int), loss_mask=np.zeros((2, 3))
        ),
        "must hold 0/1 values, at least one 1",
    ),
    # masks
    ("causal_mask", lambda: MK.causal_mask(4, 3), "S=3 keys is fewer than T=4 queries"),
    ("padding_mask", lambda: MK.padding_mask([2, 5], 4), "every length must lie in [0, S=4]"),
    (
        "left_padding_mask",
        lambda: MK.left_padding_mask(np.array([3]), 0, 3),
        "every pad count must lie in [0, start + n = 3)",
    ),
    # measuring
    ("run_in_child", lambda: ME.run_in_child("result = 1", "fast"), "setting must be one of"),
    # the decoder's entry points
    (
        "forward ids",
        lambda: M.forward(PARAMS, CFG, TOKENS + 1),
        "tokens must be (B, T) ids in [0, 7)",
    ),
    ("forward rank", lambda: M.forward(PARAMS, CFG, np.arange(3)), "got shape (3,)"),
    (
        "forward table",
        lambda: M.forward(PARAMS, CFG, np.zeros((1, 7), int)),
        "outside the 6 rows of the position table",
    ),
    ("hidden_states ids", lambda: M.hidden_states(PARAMS, CFG, -TOKENS), "hidden_states: tokens"),
    (
        "loss targets",
        lambda: M.loss_and_grads(PARAMS, CFG, TOKENS, TOKENS[:, :2], 1),
        "targets (2, 2) and loss_mask () must match",
    ),
    (
        "loss mask",
        lambda: M.loss_and_grads(PARAMS, CFG, TOKENS, TOKENS, 0.5),
        "must hold 0/1 values",
    ),
    (
        "masked_cross_entropy",
        lambda: M.masked_cross_entropy(np.ones((2, 3, 7)), TOKENS, np.zeros(3)),
        "at least one 1",
    ),
    (
        "decoder_cache",
        lambda: M.decoder_cache(CFG, 1, max_len=4, window=3),
        "give max_len=4 or window=3 >= 1, not both",
    ),
    (
        "generate window",
        lambda: M.generate_greedy_with_cache(PARAMS, CFG, TOKENS, 2, window=2),
        "window=2 must hold the prompt",
    ),
    (
        "generate start",
        lambda: M.generate_greedy_with_cache(PARAMS, CFG, TOKENS + 4, 2),
        "start must be",
    ),
    # multi-head attention
    (
        "split_heads",
        lambda: MH.split_heads(X, 3),
        "d_model=4 must be a positive multiple of num_heads=3",
    ),
    (
        "mha heads",
        lambda: MH.multi_head_attention(X, X, MH.init_multi_head_params(4, RNG), 3),
        "multi_head_attention: d_model=4",
    ),
    # the optimizer
    ("adam params", lambda: O.Adam({"a": [0.0]}), "params ['a'] must be ndarrays"),
    ("adam lr", lambda: O.Adam({"a": np.zeros(2)}, lr=0.0), "lr=0.0 and eps=1e-08 must be > 0"),
    (
        "adam betas",
        lambda: O.Adam({"a": np.zeros(2)}, betas=(0.9, 1.0)),
        "betas=(0.9, 1.0) in [0, 1)",
    ),
    (
        "adam step",
        lambda: O.Adam({"a": np.zeros(2)}).step({"a": np.zeros(3)}),
        "gradients ['a'] do not have",
    ),
    # plotting
    (
        "signed_heatmap",
        lambda: PL.signed_heatmap(None, np.ones((2, 3)), ["a"], ["b"], "x"),
        "values of shape (2, 3) need 1 row labels",
    ),
    # positions
    (
        "add_positions",
        lambda: P.add_positions(np.ones((1, 5, 4)), np.ones((4, 4))),
        "has T=5 positions but the table of shape (4, 4) stops at T_max=4",
    ),
    ("rope pairing", lambda: P.apply_rope(X, pairing="pairs"), "pairing must be one of"),
    ("rope odd", lambda: P.apply_rope(X[..., :3]), "odd width d_h=3"),
    (
        "shaw table",
        lambda: P.shaw_attention(X, X, X, np.ones((2, 4)), np.ones((2, 4))),
        "must be (2k+1, 4)",
    ),
    (
        "t5 buckets",
        lambda: P.t5_relative_bucket(np.arange(3), num_buckets=31),
        "num_buckets=31 must be even",
    ),
    # probes
    (
        "probe shapes",
        lambda: PR.fit_linear_probe(np.ones((4, 3)), np.zeros(3, int), 2),
        "features (N, d) and labels (N,) must match",
    ),
    (
        "probe classes",
        lambda: PR.fit_linear_probe(np.ones((4, 3)), np.array([0, 1, 2, 0]), 2),
        "num_classes=2 must be >= 2 and exceed every label",
    ),
    (
        "class means",
        lambda: PR.class_mean_directions(np.ones((4, 3)), np.array([0, 1, 0, 1]), 3),
        "labels must hold every class",
    ),
    # scaling and schedules
    (
        "softmax_backward",
        lambda: SC.softmax_backward(np.ones(3), np.ones(4)),
        "p has shape (3,) but dp has shape (4,)",
    ),
    (
        "measure_scaling",
        lambda: SC.measure_scaling(0, scale=True, seed=0),
        "d_k=0, keys=64 and draws=400 must be >= 1",
    ),
    (
        "warmup_inverse_sqrt",
        lambda: SH.warmup_inverse_sqrt(0, 512, 4000),
        "step=0, d_model=512 and warmup=4000 must be >= 1",
    ),
    # the tasks and the trainer
    (
        "make_batch",
        lambda: TK.make_batch(RNG, 2, 3, "Copy"),
        "task must be one of ('copy', 'sort'), got 'Copy'",
    ),
    (
        "with_separator",
        lambda: TK.with_separator(np.array([[1, 20]])),
        "prompts must hold symbols in [0, 20)",
    ),
    (
        "train config names",
        lambda: TR.TrainConfig(task="reverse"),
        "task, prompt_attention and dtype must be in",
    ),
    (
        "train config sizes",
        lambda: TR.TrainConfig(steps=0),
        "length, steps, batch_size must be >= 1",
    ),
    ("train config lr", lambda: TR.TrainConfig(lr=0.0), "lr and qk_init_scale > 0"),
    (
        "evaluate prompts",
        lambda: TR.evaluate(None, TR.TrainConfig(length=4), prompts=np.ones((2, 3), int)),
        "prompts must have shape (n, 4), got (2, 3)",
    ),
    # the toy tasks of chapters 01 and 04
    (
        "make_task",
        lambda: TT.make_task(3, 4, (4,)),
        "offsets (4,) must be distinct integers in 1 .. 3",
    ),
    ("toy tokens", lambda: TT.encode(TASK, np.zeros((2, 5), int)), "tokens must have shape (B, 4)"),
    (
        "position_blind",
        lambda: TT.position_blind_accuracy(TT.make_task(3, 4, (1, 2)), np.zeros((1, 4), int)),
        "needs a task with one offset",
    ),
    (
        "one_job",
        lambda: TT.one_job_plus_commonest_accuracy(TASK, np.zeros((1, 4), int)),
        "needs two or more offsets",
    ),
    # verify
    (
        "verify overrides",
        lambda: VE.verify((), overrides={"x": 1.0}),
        "overrides name unknown references ['x']",
    ),
]


@pytest.mark.parametrize("call, words", [pytest.param(c, w, id=i) for i, c, w in CASES])
def test_a_bad_argument_raises_a_value_error_naming_it(call, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        call()


def test_the_cases_have_distinct_ids():
    ids = [i for i, _, _ in CASES]
    assert len(ids) == len(set(ids))


def test_checks_are_at_most_a_tenth_of_the_code():
    """The issue's budget: ``scripts/count_checks.py`` over the package, checks <= 10%."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import count_checks
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    counts = count_checks.count_package(ROOT / "npformer")
    code = sum(c.code for c in counts.values())
    checks = sum(c.checks for c in counts.values())
    assert checks <= code / 10, f"{checks} check lines of {code} ({checks / code:.1%})"


def test_inner_functions_have_no_checked_twin():
    """No public function has an unchecked private twin ``_name`` in its module."""
    import importlib
    import inspect
    import pkgutil

    import npformer

    twins = []
    for info in pkgutil.walk_packages(npformer.__path__, "npformer."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isfunction(obj) and obj.__module__ == info.name and not name[0] == "_":
                if inspect.isfunction(getattr(module, "_" + name, None)):
                    twins.append(f"{info.name}.{name}")
    assert not twins, f"checked/unchecked twins: {twins}"
