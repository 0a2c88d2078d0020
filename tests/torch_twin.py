"""The decoder-only model of ``npformer.core.model`` written again in torch, for autograd to check.

torch alone: this module imports nothing from npformer. It reads the same parameter names and
shapes (a linear layer is x @ W + b with W of shape (d_in, d_out); W_qkv holds [Q | K | V]
side by side) and takes the hyper-parameters as plain arguments.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class TorchDecoder(torch.nn.Module):
    """Token + learned position embeddings, pre-/post-LN blocks, final LN, output layer."""

    def __init__(
        self,
        arrays: dict,
        num_heads: int,
        num_layers: int,
        ln: str = "pre",
        scale: bool = True,
        activation: str = "relu",
        positions: bool = True,
        final_ln: bool = True,
        ln_eps: float = 1e-5,
        dtype=torch.float64,
    ):
        super().__init__()
        self.names = list(arrays)
        self.weights = torch.nn.ParameterList(
            torch.nn.Parameter(torch.tensor(arrays[n], dtype=dtype)) for n in self.names
        )
        self.num_heads, self.num_layers, self.ln, self.scale = num_heads, num_layers, ln, scale
        self.activation, self.positions, self.final_ln = activation, positions, final_ln
        self.ln_eps = ln_eps

    def p(self, name: str) -> torch.Tensor:
        return self.weights[self.names.index(name)]

    def grads(self) -> dict:
        return {
            n: w.grad.detach().numpy().copy() for n, w in zip(self.names, self.weights, strict=True)
        }

    def _norm(self, x, name):
        d = x.shape[-1]
        return F.layer_norm(x, (d,), self.p(name + ".gamma"), self.p(name + ".beta"), self.ln_eps)

    def _attention(self, x, q):
        B, T, d = x.shape
        h = self.num_heads
        qkv = x @ self.p(q + "attn.W_qkv") + self.p(q + "attn.b_qkv")
        Q, K, V = qkv.view(B, T, 3, h, d // h).permute(2, 0, 3, 1, 4)
        ctx = F.scaled_dot_product_attention(
            Q, K, V, is_causal=True, scale=None if self.scale else 1.0
        )
        ctx = ctx.transpose(1, 2).reshape(B, T, d)
        return ctx @ self.p(q + "attn.W_o") + self.p(q + "attn.b_o")

    def _ffn(self, x, q):
        pre = x @ self.p(q + "ffn.W_1") + self.p(q + "ffn.b_1")
        if self.activation == "relu":
            hidden = torch.relu(pre)
        elif self.activation == "gelu":
            hidden = F.gelu(pre, approximate="tanh")
        else:
            hidden = F.silu(pre) * (x @ self.p(q + "ffn.W_gate") + self.p(q + "ffn.b_gate"))
        return hidden @ self.p(q + "ffn.W_2") + self.p(q + "ffn.b_2")

    def forward(self, tokens):
        T = tokens.shape[1]
        x = self.p("tok_emb")[tokens]
        if self.positions:
            x = x + self.p("pos_emb")[:T]
        for layer in range(self.num_layers):
            q = f"block{layer}."
            if self.ln == "pre":
                x = x + self._attention(self._norm(x, q + "ln1"), q)
                x = x + self._ffn(self._norm(x, q + "ln2"), q)
            else:
                x = self._norm(x + self._attention(x, q), q + "ln1")
                x = self._norm(x + self._ffn(x, q), q + "ln2")
        if self.final_ln:
            x = self._norm(x, "ln_f")
        return x @ self.p("W_out") + self.p("b_out")

    def loss(self, tokens, targets, loss_mask):
        """Cross-entropy over the positions where loss_mask is 1, averaged over them."""
        logits = self(tokens)
        per_position = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        weights = torch.broadcast_to(loss_mask, per_position.shape).to(logits.dtype)
        return (per_position * weights).sum() / weights.sum()
