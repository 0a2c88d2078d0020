"""The QK and OV circuits of a first-layer head: where its scores come from, what it writes.

Taught in chapter 12 (``chapters/12_attention_maps.ipynb``), which uses them to explain the
pointer heads of the trained copy model (Elhage et al. 2021, *A Mathematical Framework for
Transformer Circuits*).

In layer 0 of a pre-LN decoder with learned positions, the input of every head is
a = LN(e + p), with e the token's embedding and p its position's. Centering is linear and the
division by the standard deviation is one positive number s per position, so

    a = gamma * (c(e) + c(p)) / s + beta,        c(x) = x - mean(x),

and a query q = a W_q + b_q splits exactly into a token part, a position part and a constant
part (the same for a key). The score q . k / sqrt(d_h) then splits exactly into
token-token, position-position, cross (token-position and position-token) and constant terms
(every product that involves a bias or beta): :func:`qk_terms`.

The OV circuit says what the head writes when it reads a token: for each symbol v, the value
vector of LN(e_v + p) through W_v and the head's block of W_o, read out along the direct path
to the logits (final layer norm's centering and gamma, W_out). :func:`ov_circuit` returns that
(vocab x vocab) matrix, and :func:`copying_score` the share of it that copies:
sum of eigenvalues over sum of their absolute values (1 for a pure copier, about 0 for a head
whose output says nothing about the token it read).

Its deeper page (``chapters/12_deeper_circuits.ipynb``) uses the rest, each one forward pass of
``npformer.core.model.forward`` through its ``head_edit`` and ``residual_edit`` hooks:
:func:`patch_head_outputs` and :func:`head_position_patching` (denoising one head at one
position at a time), :func:`path_patching` (a head's effect through the direct path to the
logits or through the later blocks), :func:`direct_logit_attribution` (the logit difference
split into every part of the residual stream, through the final layer norm frozen at the run's
scale) and :func:`prefix_matching_scores` (Olsson et al. 2022).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from npformer.analysis.interventions import logit_difference
from npformer.core.block import param_name
from npformer.core.model import DecoderConfig, forward


class QKTerms(NamedTuple):
    """The exact split of one layer-0 head's scores, each (B, T, T); they sum to the scores."""

    token_token: np.ndarray
    position_position: np.ndarray
    cross: np.ndarray  # token-position + position-token
    constant: np.ndarray  # every product with a bias (b_q, b_k) or beta

    def total(self) -> np.ndarray:
        return self.token_token + self.position_position + self.cross + self.constant


def _check(fn: str, config: DecoderConfig, head: int):
    """The split is exact for a pre-LN model with a learned position table only."""
    if config.ln != "pre" or config.positions != "learned" or not 0 <= head < config.num_heads:
        raise ValueError(
            f"{fn}: the split needs a pre-LN model with a learned table and head in 0.."
            f"{config.num_heads - 1}, got ln={config.ln!r}, {config.positions!r}, head={head}"
        )


def _centered(x):
    return x - x.mean(axis=-1, keepdims=True)


def qk_terms(
    params: Mapping, config: DecoderConfig, tokens, head: int, *, row_scale: bool = True
) -> QKTerms:
    """Split the layer-0 scores of ``head`` on ``tokens`` into four exact terms.

    With ``row_scale=False`` the layer norm's division by each row's standard deviation s is
    dropped (s = 1): the position-position term then depends on positions and weights alone,
    and the terms no longer sum to the scores.
    Shapes: tokens (B, T) integer ids. Returns QKTerms of (B, T, T) arrays (unmasked scores,
    divided by sqrt(d_h) when the config scales) whose sum equals the head's scores.
    """
    fn = "qk_terms"
    _check(fn, config, head)
    tokens = np.asarray(tokens)
    T = tokens.shape[1]
    d, h = config.d_model, config.num_heads
    d_h = d // h
    e = params["tok_emb"][tokens]  # (B, T, d)
    p = np.broadcast_to(params["pos_emb"][:T], e.shape)  # (B, T, d)
    x = e + p
    s = np.sqrt(_centered(x).var(axis=-1, keepdims=True) + config.ln_eps)  # (B, T, 1)
    if not row_scale:
        s = np.ones_like(s)
    gamma, beta = params[param_name(0, "ln1.gamma")], params[param_name(0, "ln1.beta")]
    W, b = params[param_name(0, "attn.W_qkv")], params[param_name(0, "attn.b_qkv")]
    cols = {
        "q": slice(head * d_h, (head + 1) * d_h),
        "k": slice(d + head * d_h, d + (head + 1) * d_h),
    }
    parts = {}
    for name, c in cols.items():
        parts[name] = (
            (gamma * _centered(e) / s) @ W[:, c],  # token part (B, T, d_h)
            (gamma * _centered(p) / s) @ W[:, c],  # position part
            np.broadcast_to(beta @ W[:, c] + b[c], e.shape[:-1] + (d_h,)),  # constant part
        )
    scale = 1.0 / math.sqrt(d_h) if config.scale else 1.0

    def dot(u, v):
        return scale * (u @ v.swapaxes(-1, -2))  # (B, T, T)

    (qe, qp, qc), (ke, kp, kc) = parts["q"], parts["k"]
    return QKTerms(
        token_token=dot(qe, ke),
        position_position=dot(qp, kp),
        cross=dot(qe, kp) + dot(qp, ke),
        constant=dot(qc, ke) + dot(qc, kp) + dot(qc, kc) + dot(qe, kc) + dot(qp, kc),
    )


def ov_circuit(params: Mapping, config: DecoderConfig, head: int, positions, symbols) -> np.ndarray:
    """What layer-0 ``head`` adds to the logits, along the direct path, when it reads a symbol.

    Row v: the head's output for a value read from symbol v at one of ``positions`` (averaged
    over them), through W_o, the final layer norm's centering and gamma, and W_out; column u:
    the logit of symbol u. The final layer norm's division by the standard deviation is one
    positive number per position and is left out. Shapes: positions (P,), symbols (n,)
    integer. Returns (n, n), rows and columns in the order of ``symbols``.
    """
    positions = np.asarray(positions)
    symbols = np.asarray(symbols)
    d, h = config.d_model, config.num_heads
    d_h = d // h
    x = params["tok_emb"][symbols][:, None, :] + params["pos_emb"][positions][None]  # (n, P, d)
    xc = _centered(x)
    gamma, beta = params[param_name(0, "ln1.gamma")], params[param_name(0, "ln1.beta")]
    W, b = params[param_name(0, "attn.W_qkv")], params[param_name(0, "attn.b_qkv")]
    W_o = params[param_name(0, "attn.W_o")]
    a = gamma * xc / np.sqrt(xc.var(axis=-1, keepdims=True) + config.ln_eps)
    a = a + beta
    c = slice(2 * d + head * d_h, 2 * d + (head + 1) * d_h)
    v = a @ W[:, c] + b[c]  # (n, P, d_h)
    written = v.mean(axis=1) @ W_o[head * d_h : (head + 1) * d_h]  # (n, d)
    if config.final_ln:
        written = _centered(written) * params["ln_f.gamma"]
    return written @ params["W_out"][:, symbols]  # (n, n)


def copying_score(circuit) -> float:
    """sum(eigenvalues) / sum(|eigenvalues|) of a square circuit matrix (Elhage et al. 2021).

    Near 1 when the matrix maps each symbol mostly onto itself, near 0 (or negative) otherwise.
    The matrix is centered along its rows first, so a logit added to every symbol alike (which
    changes no probability) does not count as copying.
    """
    m = np.asarray(circuit, dtype=float)
    eig = np.linalg.eigvals(_centered(m))
    size = np.abs(eig).sum()
    return float(eig.real.sum() / size) if size > 0 else 0.0  # a constant matrix copies nothing


# ----------------------------------------------------------------------------- patching and
# direct logit attribution (chapters/12_deeper_circuits.ipynb)


class Run(NamedTuple):
    """One forward pass of the decoder with what each head wrote, read through its hooks."""

    logits: np.ndarray  # (B, T, vocab_size)
    heads: list  # per layer (B, h, T, d_h): each head's weighted sum A V, before W_o
    cache: object  # the DecoderCache of npformer.core.model.forward (read only)


class _Hooks:
    """``head_edit`` and ``residual_edit`` for ``npformer.core.model.forward``.

    Records every head's output; writes source values into the heads and positions
    ``where`` selects; adds given arrays to the residual stream after given blocks.
    """

    def __init__(self, source=None, where=None, residual_add=None):
        self.source, self.where = source, where  # list of (B, h, T, d_h); (layers, h, T) bool
        self.residual_add = residual_add or {}  # {layer: (B, T, d)}
        self.heads = []

    def head_edit(self, layer, weights, v, heads):
        # weights (B, h, T, S), v and heads (B, h, T, d_h)
        if self.where is not None and self.where[layer].any():
            pick = self.where[layer][None, :, :, None]  # (1, h, T, 1)
            heads = np.where(pick, self.source[layer], heads)  # (B, h, T, d_h)
        self.heads.append(heads)
        return heads

    def residual_edit(self, layer, x):
        # x (B, T, d): the stream after block ``layer``
        return x + self.residual_add[layer] if layer in self.residual_add else x


def _check_model(fn: str, config: DecoderConfig):
    """Patching and attribution read a pre-LN model with a learned table and a final norm."""
    if config.ln != "pre" or config.positions != "learned" or not config.final_ln:
        raise ValueError(
            f"{fn}: config must be a pre-LN model with a learned position table and a final "
            f"layer norm, got ln={config.ln!r}, {config.positions!r}, final_ln={config.final_ln}"
        )


def _run(params, config, tokens, hooks=None) -> Run:
    hooks = _Hooks() if hooks is None else hooks
    logits, cache = forward(
        params, config, tokens, head_edit=hooks.head_edit, residual_edit=hooks.residual_edit
    )
    return Run(logits, hooks.heads, cache)


def record_run(params: Mapping, config: DecoderConfig, tokens) -> Run:
    """The decoder's forward pass (``npformer.core.model.forward``) with every head's output kept.

    Shapes: tokens (B, T) integer ids. Returns Run(logits (B, T, vocab_size), heads: one
    (B, h, T, d_h) array per layer, cache: the forward pass's DecoderCache).
    """
    return _run(params, config, np.asarray(tokens))


def patch_head_outputs(params: Mapping, config: DecoderConfig, tokens, source, where) -> Run:
    """Run ``tokens`` with the outputs of some heads, at some positions, taken from ``source``.

    Head k of layer l at position t writes source[l][:, k, t] instead of its own A V wherever
    where[l, k, t] is True; every other head and position computes as usual (and sees the
    patched values downstream). One forward pass of ``npformer.core.model.forward`` through its
    ``head_edit`` hook. Shapes: tokens (B, T); source: one (B, h, T, d_h) array per layer
    (``record_run(...).heads`` of another input); where (num_layers, h, T) bool.
    Returns the patched Run.
    """
    return _run(params, config, np.asarray(tokens), _Hooks(source, np.asarray(where)))


def _mean_D(logits, row, answer) -> float:
    return float(logit_difference(logits[:, row], answer).mean())  # over the prompts


class PatchingMap(NamedTuple):
    """What :func:`head_position_patching` measured."""

    patched: np.ndarray  # (num_layers, h, T) mean logit difference after each patch
    clean: float  # mean logit difference on the clean prompts
    corrupt: float  # ... on the corrupted prompts

    def shares(self) -> np.ndarray:
        """(patched - corrupt) / (clean - corrupt): 1 restores the clean run, 0 does nothing."""
        return (self.patched - self.corrupt) / (self.clean - self.corrupt)


def head_position_patching(
    params: Mapping, config: DecoderConfig, clean_tokens, corrupt_tokens, row: int, answer
) -> PatchingMap:
    """Denoising, one head at one position at a time, measured by the logit difference.

    For every layer l, head k and position p: run the corrupted prompts with head (l, k)'s
    output at position p taken from the clean run, and average over the prompts the logit
    difference D = z_answer - max_{v != answer} z_v at query position ``row``.
    Shapes: clean_tokens and corrupt_tokens (B, T); answer (B,) ids.
    Returns PatchingMap(patched (num_layers, h, T), clean, corrupt).
    """
    _check_model("head_position_patching", config)
    clean_tokens, answer = np.asarray(clean_tokens), np.asarray(answer)
    T = clean_tokens.shape[1]
    clean = _run(params, config, clean_tokens)
    corrupt = _run(params, config, corrupt_tokens)
    patched = np.empty((config.num_layers, config.num_heads, T))
    for index in np.ndindex(patched.shape):
        where = np.zeros(patched.shape, dtype=bool)
        where[index] = True
        out = _run(params, config, corrupt_tokens, _Hooks(clean.heads, where))
        patched[index] = _mean_D(out.logits, row, answer)
    return PatchingMap(
        patched, _mean_D(clean.logits, row, answer), _mean_D(corrupt.logits, row, answer)
    )


class PathPatching(NamedTuple):
    """Mean logit differences of :func:`path_patching` (corrupted prompts, clean head)."""

    clean: float
    corrupt: float
    total: float  # the head patched: everything after it sees the clean output
    direct: float  # only the final layer norm sees it (the residual stream straight on)
    later_blocks: float  # only the blocks after the head's own see it, not the logits directly
    own_ffn: float  # only the head's own block's feed-forward layer sees it (then its output
    # goes on to everything after)

    def shares(self) -> dict:
        """Each path's (D - corrupt) / (clean - corrupt), and what the three paths leave out
        (the interactions between paths)."""
        gap = self.clean - self.corrupt
        paths = ("total", "direct", "later_blocks", "own_ffn")
        out = {name: (getattr(self, name) - self.corrupt) / gap for name in paths}
        out["rest"] = out["total"] - out["direct"] - out["later_blocks"] - out["own_ffn"]
        return out


def path_patching(
    params: Mapping,
    config: DecoderConfig,
    clean_tokens,
    corrupt_tokens,
    head,
    row: int,
    answer,
) -> PathPatching:
    """Split a head's denoising effect into its direct path, its path through later blocks and
    its path through its own block's feed-forward layer.

    On the corrupted prompts, the head's clean output changes what it adds to the residual
    stream by delta = (o_clean - o_corrupt) W_o[head's rows], (B, T, d) at every position.
      - total: the head patched (``patch_head_outputs``);
      - direct: the corrupted run with delta added to the stream after the last block only,
        so the logits see it and no block does;
      - later_blocks: delta added after the head's own block and removed again after the last,
        so blocks l+1 ... see it and the logits do not see it directly;
      - own_ffn: the head patched and delta removed again after its own block, so the
        block's feed-forward layer sees it (pre-LN: its input is x + attention + delta) and
        only what that layer writes goes on.
    What the three leave out (total - direct - later_blocks - own_ffn) is the interactions
    between paths. Each is one forward pass through the hooks. ``head`` = (layer, k) with
    layer before the last.
    Shapes: clean_tokens, corrupt_tokens (B, T); answer (B,). Returns PathPatching (means).
    """
    fn = "path_patching"
    _check_model(fn, config)
    clean_tokens, answer = np.asarray(clean_tokens), np.asarray(answer)
    layer, k = (int(i) for i in head)
    last = config.num_layers - 1
    if not (0 <= layer < last and 0 <= k < config.num_heads):
        raise ValueError(
            f"{fn}: head {head!r} must be in a layer before the last (0..{last - 1}), "
            f"head 0..{config.num_heads - 1}: a head of the last layer has only the direct path"
        )
    d_h = config.d_model // config.num_heads
    clean = _run(params, config, clean_tokens)
    corrupt = _run(params, config, corrupt_tokens)
    W_o = params[param_name(layer, "attn.W_o")][k * d_h : (k + 1) * d_h]  # (d_h, d)
    delta = (clean.heads[layer][:, k] - corrupt.heads[layer][:, k]) @ W_o  # (B, T, d)
    where = np.zeros((config.num_layers, config.num_heads, clean_tokens.shape[1]), dtype=bool)
    where[layer, k] = True
    total = _run(params, config, corrupt_tokens, _Hooks(clean.heads, where))
    direct = _run(params, config, corrupt_tokens, _Hooks(residual_add={last: delta}))
    later = _run(params, config, corrupt_tokens, _Hooks(residual_add={layer: delta, last: -delta}))
    own = _run(params, config, corrupt_tokens, _Hooks(clean.heads, where, {layer: -delta}))
    runs = (clean, corrupt, total, direct, later, own)
    return PathPatching(*(_mean_D(r.logits, row, answer) for r in runs))


class LogitAttribution(NamedTuple):
    """What :func:`direct_logit_attribution` returns."""

    names: tuple  # (C,) the components, in the order of the columns of ``values``
    values: np.ndarray  # (B, C) each component's share of the logit difference
    logit_difference: np.ndarray  # (B,) z_answer - z_rival from the model's own logits
    rival: np.ndarray  # (B,) the rival token of each prompt


def direct_logit_attribution(
    params: Mapping, config: DecoderConfig, tokens, row: int, answer, rival=None
) -> LogitAttribution:
    """Split the logit difference z_answer - z_rival at ``row`` into what each part wrote.

    The residual stream before the final layer norm is a sum: token embedding + position
    embedding + for every layer, each head's output o_k W_o[k's rows], the attention bias b_o
    and the feed-forward output. The final layer norm is linear once its division by the
    standard deviation s is frozen at this run's value, so each part x_c contributes
    (gamma * (x_c - mean(x_c)) / s) . (W_out[:, answer] - W_out[:, rival]), and the constant
    beta . (W_out[:, a] - W_out[:, r]) + b_out[a] - b_out[r] ("final bias") completes the sum.
    The parts are read from one forward pass (its head hook and its cache), not recomputed,
    so their sum equals the model's logit difference only if the split is right.
    ``rival`` (B,) defaults to the largest logit other than the answer's, so the total is
    ``npformer.analysis.interventions.logit_difference``. Shapes: tokens (B, T); answer (B,).
    Returns LogitAttribution(names, values (B, C), logit_difference (B,), rival (B,)).
    """
    _check_model("direct_logit_attribution", config)
    tokens, answer = np.asarray(tokens), np.asarray(answer)
    B = tokens.shape[0]
    run = _run(params, config, tokens)
    logits = run.logits[:, row]  # (B, V)
    if rival is None:
        others = logits.copy()
        others[np.arange(B), answer] = -np.inf
        rival = others.argmax(axis=-1)  # (B,)
    rival = np.asarray(rival)
    d, h = config.d_model, config.num_heads
    d_h = d // h
    parts = {
        "embedding": params["tok_emb"][tokens[:, row]],  # (B, d)
        "position": np.broadcast_to(params["pos_emb"][row], (B, d)),
    }
    for layer, block in enumerate(run.cache.blocks):
        W_o = params[param_name(layer, "attn.W_o")]  # (d, d), head k owns rows k d_h ... (k+1) d_h
        for k in range(h):
            rows = slice(k * d_h, (k + 1) * d_h)
            parts[f"({layer}, {k})"] = run.heads[layer][:, k, row] @ W_o[rows]  # (B, d)
        parts[f"attention bias {layer}"] = np.broadcast_to(
            params[param_name(layer, "attn.b_o")], (B, d)
        )
        hidden = block.ffn.hidden[:, row]  # (B, d_ff) the feed-forward layer's activation
        parts[f"feed-forward {layer}"] = (
            hidden @ params[param_name(layer, "ffn.W_2")] + params[param_name(layer, "ffn.b_2")]
        )
    rstd = run.cache.ln_f.rstd[:, row]  # (B, 1) 1 / s, frozen at this run's value
    direction = params["W_out"][:, answer] - params["W_out"][:, rival]  # (d, B)
    gamma = params["ln_f.gamma"]
    values = [np.einsum("bd,db->b", gamma * _centered(x) * rstd, direction) for x in parts.values()]
    bias = params["ln_f.beta"] @ direction + params["b_out"][answer] - params["b_out"][rival]
    values.append(bias)  # (B,)
    D = logits[np.arange(B), answer] - logits[np.arange(B), rival]  # (B,)
    return LogitAttribution((*parts, "final bias"), np.stack(values, axis=1), D, rival)


def prefix_matching_scores(
    params: Mapping,
    config: DecoderConfig,
    first: int,
    repeat: int,
    symbols: int,
    *,
    batch: int,
    seed: int = 0,
) -> np.ndarray:
    """Attention each head pays to the token after the previous occurrence of the current one.

    Sequences of ``first`` distinct random symbols from 0 ... ``symbols`` - 1, followed by their
    first ``repeat`` symbols again (Olsson et al. 2022). At position t = first + i of the
    repeat, the current symbol occurred before at i; the prefix-matching score is the weight on
    key i + 1, averaged over the repeat's positions and ``batch`` sequences (seeded).
    Returns (num_layers, h).
    """
    _check_model("prefix_matching_scores", config)
    rng = np.random.default_rng(seed)
    part = np.argsort(rng.random((batch, symbols)), axis=1)[:, :first]  # (batch, first)
    tokens = np.concatenate([part, part[:, :repeat]], axis=1)  # (batch, first + repeat)
    run = _run(params, config, tokens)
    queries = first + np.arange(repeat)  # (repeat,)
    keys = np.arange(repeat) + 1  # the token after the previous occurrence
    weights = [c.attn.weights for c in run.cache.blocks]  # per layer (batch, h, T, T)
    return np.stack([w[:, :, queries, keys].mean(axis=(0, 2)) for w in weights])  # (layers, h)
