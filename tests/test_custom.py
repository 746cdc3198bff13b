"""custom_vjp and custom_jvp (JAX's interface) on the one custom-rule record that
custom_gradient uses: eager tapes and compiled functions give the rule's answer."""

import numpy as np
import pytest

import jittape as jt
from jittape.custom import CustomRule
from jittape.ops.core import OpRecord


@jt.custom_vjp
def clip_gradient(x):
    return jt.identity(x)


def _clip_fwd(x):
    return clip_gradient(x), None


def _clip_bwd(res, g):
    return (jt.clip(g, -1.0, 1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


@jt.custom_vjp
def softplus(x):
    return jt.log1p(jt.exp(x))


def _softplus_fwd(x):
    return softplus(x), x


def _softplus_bwd(x, g):
    return (g * jt.sigmoid(x),)


softplus.defvjp(_softplus_fwd, _softplus_bwd)


@jt.custom_jvp
def logexp(x):
    return jt.log1p(jt.exp(x))


@logexp.defjvp
def _logexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return logexp(x), jt.sigmoid(x) * t


def test_custom_vjp_rule_is_used_on_the_tape_and_compiled():
    x = np.array([-3.0, 0.5, 4.0])
    loss = lambda x: jt.sum(clip_gradient(x) * 10.0)          # noqa: E731
    t = jt.constant(x)
    with jt.GradientTape() as tape:
        tape.watch(t)
        y = loss(t)
    np.testing.assert_array_equal(tape.gradient(y, t), np.ones(3))
    np.testing.assert_array_equal(jt.grad(loss)(x), np.ones(3))
    np.testing.assert_array_equal(jt.function(loss)(x), np.sum(x * 10.0))


def test_custom_vjp_backward_rule_is_differentiated_again():
    x = np.array([-1.0, 0.3, 2.0])
    sig = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(jt.grad(lambda x: jt.sum(softplus(x)))(x), sig, rtol=1e-12)
    np.testing.assert_allclose(jt.hessian(lambda x: jt.sum(softplus(x)))(x),
                               np.diag(sig * (1 - sig)), rtol=1e-10, atol=1e-12)


def test_custom_vjp_with_nondiff_argnums():
    def f(scale, x):
        return scale * x

    def fwd(scale, x):
        return f(scale, x), None

    def bwd(scale, res, g):
        return (g * (2 * scale),)

    g = jt.custom_vjp(f, nondiff_argnums=(0,))
    g.defvjp(fwd, bwd)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(jt.grad(lambda x: jt.sum(g(3.0, x)))(x), [6.0, 6.0])


def test_custom_jvp_rule_is_transposed_for_reverse_mode():
    x = np.array([-2.0, 0.0, 1.5])
    sig = 1 / (1 + np.exp(-x))
    t = jt.constant(x)
    with jt.GradientTape() as tape:
        tape.watch(t)
        y = jt.sum(logexp(t) * 3.0)
    np.testing.assert_allclose(tape.gradient(y, t), 3 * sig, rtol=1e-12)
    np.testing.assert_allclose(jt.grad(lambda x: jt.sum(logexp(x) * 3.0))(x), 3 * sig,
                               rtol=1e-12)
    np.testing.assert_allclose(jt.function(logexp)(x), np.log1p(np.exp(x)), rtol=1e-12)


def test_rules_are_op_records_and_missing_rules_say_so():
    assert issubclass(CustomRule, OpRecord)

    @jt.custom_vjp
    def f(x):
        return x

    with pytest.raises(TypeError, match="defvjp"):
        f(jt.constant(1.0))

    def bad_bwd(res, g):
        return (g, g)

    f.defvjp(lambda x: (f.fun(x), None), bad_bwd)
    with pytest.raises(ValueError, match="2 cotangents for 1"):
        jt.grad(lambda x: jt.sum(f(x)))(np.ones(2))


def test_a_custom_rule_before_a_reshape_and_broadcast_compiles():
    """The marker a custom rule leaves is dropped after autodiff; the broadcast rewrite
    after it must read what replaced it (it read a dropped value once)."""
    @jt.custom_gradient
    def twice(x):
        y = x * 2.0
        return y, lambda g: g * 2.0

    def f(x, m):
        return jt.sum(jt.broadcast_to(jt.reshape(twice(x), (1, -1)), m.shape) * m)

    x, m = np.linspace(-1, 1, 3), np.ones((4, 3))
    np.testing.assert_allclose(jt.function(f)(x, m), 8 * x.sum(), atol=1e-12)
    np.testing.assert_allclose(jt.grad(f)(x, m), np.full(3, 8.0))


def _block(x, w):
    return jt.tanh(jt.tanh(x @ w) @ w)


def test_checkpoint_recomputes_and_gives_the_same_gradients():
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(4, 3)), rng.normal(size=(3, 3)) * 0.5
    loss = lambda w, f: jt.sum(f(f(jt.constant(x), w), w) ** 2)      # noqa: E731
    block = jt.checkpoint(_block)
    tw = jt.constant(w)
    with jt.GradientTape() as tape:
        tape.watch(tw)
        plain = loss(tw, _block)
    want = tape.gradient(plain, tw).numpy()
    with jt.GradientTape() as tape:
        tape.watch(tw)
        kept = loss(tw, block)
    # the checkpointed blocks keep one entry each, not their ops
    assert len(tape._entries) < 6
    np.testing.assert_allclose(tape.gradient(kept, tw), want, rtol=1e-12)
    np.testing.assert_allclose(jt.grad(lambda w: loss(w, block))(w), want, rtol=1e-10)
    np.testing.assert_allclose(jt.hessian(lambda w: loss(w, block))(w),
                               jt.hessian(lambda w: loss(w, _block))(w), rtol=1e-9)


def test_checkpoint_says_what_it_takes():
    with pytest.raises(ValueError, match="policy"):
        jt.checkpoint(_block, policy="dots")
    with pytest.raises(TypeError, match="one array"):
        jt.checkpoint(lambda x: (x, x))(jt.constant([1.0]))
