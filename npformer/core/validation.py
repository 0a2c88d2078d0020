"""Input checks shared by the functions readers call.

The functions a chapter hands to readers, the model's and trainer's entry points, the configs and
the exercise checkers validate their arguments and raise ``ValueError`` with a message that names
the function and the offending shapes or dtypes, so that a wrong call fails loudly instead of
broadcasting into a silently wrong answer. The functions they call trust them and check nothing.
"""

from __future__ import annotations

import operator

import numpy as np


def float_array(func: str, name: str, x, min_rank: int = 1) -> np.ndarray:
    """Return ``x`` as a floating ndarray, or raise ValueError naming its dtype and shape."""
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(
            f"{func}: {name} must be a floating array, got dtype {arr.dtype} with shape {arr.shape}"
        )
    if arr.ndim < min_rank:
        raise ValueError(
            f"{func}: {name} must have rank >= {min_rank}, got shape {arr.shape} (rank {arr.ndim})"
        )
    return arr


def same_dtype(func: str, **arrays: np.ndarray) -> None:
    """Raise ValueError unless every array has the same dtype (no silent promotion)."""
    dtypes = {name: a.dtype for name, a in arrays.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{n} {d} {arrays[n].shape}" for n, d in dtypes.items())
        raise ValueError(f"{func}: inputs must share one dtype, got {listed}")


def bool_mask(
    func: str, mask, target_shape: tuple[int, ...], what: str, name: str = "mask"
) -> np.ndarray:
    """Return ``mask`` as a bool array that broadcasts to ``target_shape``, or raise ValueError."""
    m = np.asarray(mask)
    named = "" if name == "mask" else f" ({name})"  # the argument, when it is not ``mask``
    if m.dtype != np.bool_:
        raise ValueError(
            f"{func}: mask must be boolean (True = may attend), got dtype {m.dtype} "
            f"with shape {m.shape}{named}"
        )
    try:
        shape = np.broadcast_shapes(m.shape, target_shape)
    except ValueError:
        shape = None
    if shape != tuple(target_shape):
        raise ValueError(
            f"{func}: mask of shape {m.shape} does not broadcast to {what} "
            f"{tuple(target_shape)}{named}"
        )
    return m


def divisible(func: str, d: int, h: int, d_name: str = "d_model", h_name: str = "num_heads"):
    """Raise ValueError unless ``d`` is a positive multiple of ``h``.

    No function calls on the way through (chapter 09 counts the calls of a cached step, which
    passes here once per layer): a non-number fails the arithmetic and is reported.
    """
    try:
        ok = h > 0 and d > 0 and d % h == 0
    except TypeError:
        raise ValueError(f"{func}: {d_name}={d!r} and {h_name}={h!r} must be integers") from None
    if not ok:
        raise ValueError(f"{func}: {d_name}={d} must be a positive multiple of {h_name}={h}")


def int_at_least(func: str, name: str, value, minimum: int = 1) -> int:
    """Return ``value`` as an int >= ``minimum`` (bools refused), or raise ValueError naming it."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{func}: {name} must be an integer, got {value!r}")
    try:
        as_int = operator.index(value)
    except TypeError:
        raise ValueError(f"{func}: {name} must be an integer, got {value!r}") from None
    if as_int < minimum:
        raise ValueError(f"{func}: {name} must be an integer >= {minimum}, got {as_int}")
    return as_int


def attention_inputs(func: str, Q, K, V):
    """Validate Q (..., T, d_h), K (..., S, d_h), V (..., S, d_v) for an attention function.

    Checks: floating arrays of rank >= 2 sharing one dtype; Q and K share their last axis; K and
    V agree on all but their last axis; width d_h >= 1; at least one key; the leading axes of Q
    and K broadcast.
    Returns (Q, K, V, batch) where ``batch`` is the broadcast shape of the leading axes.
    """
    Q = float_array(func, "Q", Q, min_rank=2)
    K = float_array(func, "K", K, min_rank=2)
    V = float_array(func, "V", V, min_rank=2)
    same_dtype(func, Q=Q, K=K, V=V)
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(
            f"{func}: Q has shape {Q.shape} and K has shape {K.shape}: their last axes (d_h) "
            f"must match"
        )
    if K.shape[:-1] != V.shape[:-1]:
        raise ValueError(
            f"{func}: K has shape {K.shape} and V has shape {V.shape}: all but their last axes "
            f"(..., S) must match"
        )
    if Q.shape[-1] == 0:
        raise ValueError(
            f"{func}: Q has shape {Q.shape} and K has shape {K.shape}: queries and keys of width "
            f"d_h = 0 have no scores to compare (d_h >= 1)"
        )
    if K.shape[-2] == 0:
        raise ValueError(f"{func}: K has shape {K.shape}: there must be at least one key (S >= 1)")
    try:
        batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    except ValueError:
        raise ValueError(
            f"{func}: the leading axes of Q {Q.shape} and K {K.shape} do not broadcast"
        ) from None
    return Q, K, V, batch


def flag(func: str, name: str, value) -> bool:
    """Return ``value`` as a bool if it is True or False (NumPy's too), or raise ValueError."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{func}: {name} must be True or False, got {value!r}")
    return bool(value)


def axis_of(func: str, axis, ndim: int, shape) -> int:
    """Return ``axis`` as an int in [-ndim, ndim), or raise ValueError (floats, bools refused)."""
    if isinstance(axis, (bool, np.bool_)):
        raise ValueError(f"{func}: axis must be an integer, got {axis!r}")
    try:
        axis = operator.index(axis)
    except TypeError:
        raise ValueError(f"{func}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"{func}: axis {axis} is out of range for shape {shape}")
    return axis
