"""Layer norm, the feed-forward network and the attention backward pass (chapter 06)."""

import numpy as np
import pytest

from npformer.core.attention import (
    scaled_dot_product_attention,
    scaled_dot_product_attention_backward,
)
from npformer.core.block import (
    feed_forward,
    feed_forward_backward,
    feed_forward_num_params,
    gelu,
    gelu_backward,
    init_feed_forward_params,
    layer_norm,
    layer_norm_backward,
)
from npformer.core.gradcheck import central_difference


def numeric_grad(f, x, eps=1e-6):
    """Central differences of the scalar f() with respect to every entry of x (in place)."""
    flat = x.reshape(-1)
    return np.array([central_difference(f, flat, i, eps)[0] for i in range(flat.size)]).reshape(
        x.shape
    )


def assert_grad_close(analytic, numeric, rtol=1e-5, atol=1e-8):
    np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- layer norm


@pytest.mark.parametrize("shape", [(5,), (3, 6), (2, 3, 4)])
def test_layer_norm_backward_matches_central_differences(shape):
    rng = np.random.default_rng(0)
    d = shape[-1]
    x = rng.normal(size=shape)
    gamma, beta = rng.normal(size=d), rng.normal(size=d)
    w = rng.normal(size=shape)  # L = sum(w * out)
    f = lambda: float(np.sum(w * layer_norm(x, gamma, beta)[0]))
    _, cache = layer_norm(x, gamma, beta)
    dx, dgamma, dbeta = layer_norm_backward(w, cache)
    assert_grad_close(dx, numeric_grad(f, x))
    assert_grad_close(dgamma, numeric_grad(f, gamma))
    assert_grad_close(dbeta, numeric_grad(f, beta))


def test_layer_norm_normalizes_and_keeps_float32():
    rng = np.random.default_rng(1)
    x = rng.normal(3.0, 2.0, size=(4, 7)).astype(np.float32)
    out, cache = layer_norm(x, np.ones(7, np.float32), np.zeros(7, np.float32))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-6)
    np.testing.assert_allclose(out.var(-1), 1, rtol=1e-3)  # eps = 1e-5 shrinks it a little
    grads = layer_norm_backward(np.ones_like(x), cache)
    assert all(g.dtype == np.float32 for g in grads)


def test_layer_norm_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    for shape in [(3, 8), (2, 5, 16)]:
        x = rng.normal(size=shape)
        gamma, beta, d_out = (
            rng.normal(size=shape[-1]),
            rng.normal(size=shape[-1]),
            rng.normal(size=shape),
        )
        xt, gt, bt = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
        out_t = torch.nn.functional.layer_norm(xt, (shape[-1],), gt, bt, eps=1e-5)
        out_t.backward(torch.tensor(d_out))
        out, cache = layer_norm(x, gamma, beta)
        dx, dgamma, dbeta = layer_norm_backward(d_out, cache)
        np.testing.assert_allclose(out, out_t.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(dx, xt.grad.numpy(), atol=1e-12)
        np.testing.assert_allclose(dgamma, gt.grad.numpy(), atol=1e-12)
        np.testing.assert_allclose(dbeta, bt.grad.numpy(), atol=1e-12)


# ----------------------------------------------------------------------------- feed-forward


@pytest.mark.parametrize("activation", ["relu", "gelu", "swiglu"])
def test_feed_forward_backward_matches_central_differences(activation):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 4))
    params = init_feed_forward_params(4, 6, rng, activation)
    for name in params:
        params[name] += 0.1 * rng.normal(size=params[name].shape)
    w = rng.normal(size=(2, 3, 4))
    f = lambda: float(np.sum(w * feed_forward(x, params, activation)[0]))
    _, cache = feed_forward(x, params, activation)
    dx, grads = feed_forward_backward(w, cache)
    assert grads.keys() == params.keys()
    assert_grad_close(dx, numeric_grad(f, x))
    for name in params:
        assert_grad_close(grads[name], numeric_grad(f, params[name]))


def test_feed_forward_parameter_counts():
    for d in (64, 256, 512):
        rng = np.random.default_rng(0)
        relu = init_feed_forward_params(d, 4 * d, rng)
        assert (
            sum(p.size for p in relu.values())
            == feed_forward_num_params(d, 4 * d)
            == (8 * d * d + 5 * d)
        )
        d_ff = 8 * d // 3  # SwiGLU keeps 8 d^2 weights
        swiglu = init_feed_forward_params(d, d_ff, rng, "swiglu")
        weights = sum(p.size for name, p in swiglu.items() if name.startswith("W"))
        assert weights == 3 * d * d_ff
        assert abs(weights - 8 * d * d) <= 3 * d  # exact when 3 divides d


def test_feed_forward_matches_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(4)
    for activation in ("relu", "gelu", "swiglu"):
        x = rng.normal(size=(2, 5, 8))
        params = init_feed_forward_params(8, 12, rng, activation)
        d_out = rng.normal(size=(2, 5, 8))
        tp = {n: torch.tensor(p, requires_grad=True) for n, p in params.items()}
        xt = torch.tensor(x, requires_grad=True)
        pre = xt @ tp["W_1"] + tp["b_1"]
        if activation == "relu":
            hidden = torch.relu(pre)
        elif activation == "gelu":
            hidden = F.gelu(pre, approximate="tanh")
        else:
            hidden = F.silu(pre) * (xt @ tp["W_gate"] + tp["b_gate"])
        out_t = hidden @ tp["W_2"] + tp["b_2"]
        out_t.backward(torch.tensor(d_out))
        out, cache = feed_forward(x, params, activation)
        dx, grads = feed_forward_backward(d_out, cache)
        np.testing.assert_allclose(out, out_t.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(dx, xt.grad.numpy(), atol=1e-12)
        for name in params:
            np.testing.assert_allclose(grads[name], tp[name].grad.numpy(), atol=1e-12)


def test_gelu_and_its_derivative():
    x = np.linspace(-4, 4, 101)
    np.testing.assert_allclose(gelu(x)[x > 3.5], x[x > 3.5], rtol=1e-3)  # ~identity for x >> 0
    np.testing.assert_allclose(gelu(x)[x < -3.5], 0, atol=1e-3)
    eps = 1e-6
    numeric = (gelu(x + eps) - gelu(x - eps)) / (2 * eps)
    np.testing.assert_allclose(gelu_backward(np.ones_like(x), x), numeric, atol=1e-8)
    assert gelu(x.astype(np.float32)).dtype == np.float32


def test_feed_forward_keeps_float32():
    rng = np.random.default_rng(5)
    for activation in ("relu", "gelu", "swiglu"):
        params = init_feed_forward_params(4, 8, rng, activation, dtype=np.float32)
        x = rng.normal(size=(3, 4)).astype(np.float32)
        out, cache = feed_forward(x, params, activation)
        dx, grads = feed_forward_backward(np.ones_like(out), cache)
        assert out.dtype == dx.dtype == np.float32
        assert all(g.dtype == np.float32 for g in grads.values())


def test_feed_forward_bad_inputs():
    rng = np.random.default_rng(6)
    params = init_feed_forward_params(4, 8, rng)
    with pytest.raises(ValueError, match="activation must be one of"):
        feed_forward(np.zeros((2, 4)), params, "tanh")
    _, cache = feed_forward(np.ones((2, 4)), params)


# ----------------------------------------------------------------------------- attention


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize(
    "q_shape, kv_shape", [((4, 3), (5, 3)), ((2, 4, 3), (2, 5, 3)), ((2, 2, 4, 3), (2, 5, 3))]
)
def test_attention_backward_matches_central_differences(scale, q_shape, kv_shape):
    rng = np.random.default_rng(7)
    Q, K = rng.normal(size=q_shape), rng.normal(size=kv_shape)
    V = rng.normal(size=kv_shape[:-1] + (2,))
    mask = np.tril(np.ones((4, 5), dtype=bool), 1)
    out, cache = scaled_dot_product_attention(Q, K, V, mask, scale)
    w = rng.normal(size=out.shape)
    f = lambda: float(np.sum(w * scaled_dot_product_attention(Q, K, V, mask, scale)[0]))
    dQ, dK, dV = scaled_dot_product_attention_backward(w, cache)
    assert dQ.shape == Q.shape and dK.shape == K.shape and dV.shape == V.shape
    assert_grad_close(dQ, numeric_grad(f, Q))
    assert_grad_close(dK, numeric_grad(f, K))
    assert_grad_close(dV, numeric_grad(f, V))


def test_attention_backward_masked_keys_get_no_gradient():
    rng = np.random.default_rng(8)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    mask = np.ones((3, 5), dtype=bool)
    mask[:, 3:] = False  # keys 3 and 4 are never read
    out, cache = scaled_dot_product_attention(Q, K, V, mask)
    _, dK, dV = scaled_dot_product_attention_backward(np.ones_like(out), cache)
    assert np.all(dK[3:] == 0) and np.all(dV[3:] == 0)


def test_attention_backward_matches_torch_float32_and_float64():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        Q, K, V = (rng.normal(size=(2, 3, 6, 4)).astype(dtype) for _ in range(3))
        d_out = rng.normal(size=(2, 3, 6, 4)).astype(dtype)
        out, cache = scaled_dot_product_attention(Q, K, V, np.tril(np.ones((6, 6), bool)))
        dQ, dK, dV = scaled_dot_product_attention_backward(d_out, cache)
        assert dQ.dtype == dK.dtype == dV.dtype == dtype
        tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (Q, K, V))
        out_t = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        out_t.backward(torch.tensor(d_out))
        np.testing.assert_allclose(out, out_t.detach().numpy(), atol=tol)
        for ours, theirs in ((dQ, tq), (dK, tk), (dV, tv)):
            np.testing.assert_allclose(ours, theirs.grad.numpy(), atol=tol)


def test_attention_backward_bad_inputs():
    rng = np.random.default_rng(10)
    out, cache = scaled_dot_product_attention(*(rng.normal(size=(3, 4)) for _ in range(3)))
    with pytest.raises(ValueError, match=r"d_out has shape \(3, 5\).*\(3, 4\)"):
        scaled_dot_product_attention_backward(np.zeros((3, 5)), cache)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_silu_does_not_overflow_and_keeps_the_dtype(dtype):
    from npformer.core.block import silu

    x = np.array([-1000.0, -100.0, -1.0, 0.0, 1.0, 100.0, 1000.0], dtype=dtype)
    with np.errstate(over="raise"):
        y = silu(x)
    assert y.dtype == dtype
    np.testing.assert_allclose(y[[2, 3, 4]], x[[2, 3, 4]] / (1 + np.exp(-x[[2, 3, 4]])), rtol=1e-6)
    assert y[0] == 0 and y[-1] == x[-1]
