"""Adam, and parameters packed in one flat buffer so that an update is a few array operations.

Taught in chapter 06 (``chapters/06_block.ipynb``); the trainer of chapters 10-11 uses it.

``pack`` stores a dict of arrays as consecutive views of ONE contiguous 1-D buffer. The dict is
still the interface (names, shapes, ``sum(p.size)`` is the parameter count), but an optimizer
that sees such a dict can update every parameter at once through the buffer instead of looping
over thirty small tensors; ``Adam`` does that, and falls back to a loop for any other dict.
"""

from __future__ import annotations

import math

import numpy as np


class Packed(dict):
    """A dict of views into one flat buffer, as made by ``pack``; behaves as a plain dict.

    It remembers its buffer and views so that ``flat_buffer`` can recognize it in a few
    identity checks; a dict that was modified or copied since falls back to the full check.
    """

    def __init__(self, views: dict, buffer: np.ndarray):
        super().__init__(views)
        self._buffer = buffer
        self._views = tuple(views.values())


def _views_of(buffer: np.ndarray, arrays: dict) -> Packed:
    views, start = {}, 0
    for name, a in arrays.items():
        views[name] = buffer[start : start + a.size].reshape(a.shape)
        start += a.size
    return Packed(views, buffer)


def pack(arrays: dict, dtype=None) -> dict:
    """Copy ``arrays`` into one contiguous 1-D buffer and return a dict of views into it.

    The views keep the names, order and shapes of ``arrays``; ``dtype`` defaults to the common
    dtype of the inputs. Returns {name: view}; ``flat_buffer`` of the result is the buffer.
    """
    arrays = {name: np.asarray(a) for name, a in arrays.items()}
    if dtype is None:
        dtype = np.result_type(*arrays.values())
    total = sum(a.size for a in arrays.values())
    buffer = np.empty(total, dtype=dtype)
    views = _views_of(buffer, arrays)
    for name, a in arrays.items():
        views[name][...] = a
    return views


def zeros_like_packed(arrays: dict) -> dict:
    """A packed dict of zeros with the names, shapes and dtype of ``arrays`` (e.g. gradients)."""
    first = next(iter(arrays.values()))
    buffer = np.zeros(sum(a.size for a in arrays.values()), dtype=first.dtype)
    return _views_of(buffer, arrays)


def flat_buffer(arrays: dict):
    """The 1-D buffer whose consecutive views are the values of ``arrays`` (in dict order).

    Returns None unless every array is a C-contiguous view of the same 1-D buffer, the views
    follow one another without gaps in dict order and together cover the whole buffer: exactly
    what ``pack`` produces. Anything else (copies, reordered dicts) gives None.
    """
    values = list(arrays.values())
    if not values:
        return None
    if isinstance(arrays, Packed) and len(values) == len(arrays._views):  # the fast path
        buffer = arrays._buffer
        if all(a is b and a.base is buffer for a, b in zip(values, arrays._views, strict=True)):
            return buffer
    if not all(isinstance(a, np.ndarray) for a in values):
        return None
    base = values[0].base
    if not isinstance(base, np.ndarray) or base.ndim != 1 or not base.flags.c_contiguous:
        return None
    address = base.__array_interface__["data"][0]
    for a in values:
        if a.base is not base or not a.flags.c_contiguous:
            return None
        if a.__array_interface__["data"][0] != address:
            return None
        address += a.nbytes
    if address != base.__array_interface__["data"][0] + base.nbytes:
        return None
    return base


class Adam:
    """Adam (Kingma & Ba 2014) with bias correction, updating ``params`` in place.

    At step t, for each parameter p with gradient g:
        m = beta1 m + (1 - beta1) g,         v = beta2 v + (1 - beta2) g^2,
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
    The operations are ordered as in ``torch.optim.Adam`` (its single-tensor path), so the two
    agree to rounding. Keeps the parameters' dtype (float32 stays float32). Gradients are
    matched to parameters by name. When ``params`` is a packed dict (see ``pack``) and so are
    the gradients, with their names in the same order, the update runs on the flat buffers;
    gradients packed in another order are applied name by name.
    """

    def __init__(self, params: dict, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8):
        not_arrays = [n for n, p in params.items() if not isinstance(p, np.ndarray)]
        if not_arrays:  # a list would be copied, and the update lost
            raise ValueError(f"Adam: params {not_arrays} must be ndarrays (updated in place)")
        beta1, beta2 = betas
        if not (lr > 0 and eps > 0 and 0 <= beta1 < 1 and 0 <= beta2 < 1):
            raise ValueError(f"Adam: lr={lr} and eps={eps} must be > 0, betas={betas} in [0, 1)")
        self.params = params
        self._names = tuple(params)
        self.lr, self.beta1, self.beta2, self.eps = (
            float(lr),
            float(beta1),
            float(beta2),
            float(eps),
        )
        self.t = 0
        self._v_only = 0  # gradients taken by fill_second_moment: v's count, not m's
        self._flat = flat_buffer(params)
        if self._flat is not None:
            self._m = np.zeros_like(self._flat)
            self._v = np.zeros_like(self._flat)
            self._scratch = (np.empty_like(self._flat), np.empty_like(self._flat))
        else:
            self._m = {name: np.zeros_like(p) for name, p in params.items()}
            self._v = {name: np.zeros_like(p) for name, p in params.items()}

    def _check(self, grads: dict) -> None:
        """Gradients of another shape would broadcast into the update."""
        bad = [n for n, p in self.params.items() if np.shape(grads[n]) != p.shape]
        if bad:
            raise ValueError(f"Adam.step: gradients {bad} do not have their parameters' shapes")

    def step(self, grads: dict) -> None:
        """One update of every parameter from ``grads`` (same names, shapes and dtype)."""
        self._check(grads)
        self.t += 1
        bias1 = 1.0 - self.beta1**self.t
        bias2_sqrt = math.sqrt(1.0 - self.beta2 ** (self.t + self._v_only))
        step_size = self.lr / bias1
        same_order = self._flat is not None and tuple(grads) == self._names
        g_flat = flat_buffer(grads) if same_order else None  # the buffers line up name by name
        if g_flat is not None:
            self._update(self._flat, g_flat, self._m, self._v, step_size, bias2_sqrt, self._scratch)
        else:
            for name, p in self.params.items():  # by name, whatever order the gradients come in
                scratch = (np.empty_like(p), np.empty_like(p))
                if self._flat is not None:  # packed params, unpacked grads
                    m, v = self._slice_state(p)
                else:
                    m, v = self._m[name], self._v[name]
                self._update(p, grads[name], m, v, step_size, bias2_sqrt, scratch)

    def fill_second_moment(self, grads: dict) -> None:
        """Fold ``grads`` into v only, as ``step`` would; m, the weights and m's count stay.

        v's bias correction counts these gradients, m's does not, so the next ``step`` starts m
        from zero and corrects it as a first step. Liu et al.'s Adam-2k fills v this way before
        it trains without warm-up.
        """
        self._check(grads)
        self._v_only += 1
        for name, p in self.params.items():
            v = self._slice_state(p)[1] if self._flat is not None else self._v[name]
            v *= self.beta2
            v += (1.0 - self.beta2) * grads[name] * grads[name]

    def _slice_state(self, p):
        """The views of the flat moment buffers that belong to parameter view ``p``."""
        offset = p.__array_interface__["data"][0] - self._flat.__array_interface__["data"][0]
        start = offset // p.itemsize
        m = self._m[start : start + p.size].reshape(p.shape)
        v = self._v[start : start + p.size].reshape(p.shape)
        return m, v

    def _update(self, p, g, m, v, step_size, bias2_sqrt, scratch):
        a, b = scratch
        # m <- m + (1 - beta1) (g - m): torch's lerp form of beta1 m + (1 - beta1) g
        np.subtract(g, m, out=a)
        a *= 1.0 - self.beta1
        m += a
        # v <- beta2 v + (1 - beta2) g^2
        v *= self.beta2
        np.multiply(g, g, out=a)
        a *= 1.0 - self.beta2
        v += a
        # p <- p - step_size * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
        np.sqrt(v, out=b)
        b /= bias2_sqrt
        b += self.eps
        np.divide(m, b, out=a)
        a *= step_size
        p -= a
