"""scipy.special's digamma and polygamma for generated CPU code (the derivatives of
``gammaln``), on Python's math functions, in float64 (the float32 versions round the
float64 result).

- ``digamma``: for x < 0 the reflection psi(x) = psi(1 - x) - pi / tan(pi x); then the
  recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, and the asymptotic series
  ln x - 1/(2x) - sum B_2k / (2k x^2k) (seven terms: below float64's rounding there).
- ``polygamma(n, x)``, n >= 1: (-1)^(n+1) n! zeta(n + 1, x), Hurwitz's zeta by the
  recurrence (the terms (x + k)^-s, which also bring a negative x up) until x >= 10 + s,
  then the Euler-Maclaurin tail with eight Bernoulli terms.

At the poles (x a non-positive integer) they give what SciPy gives: digamma -inf at
+0 (+inf at -0) and NaN at the negative integers, polygamma +inf for odd n and -inf for even n.
"""

import math

import numpy as np

from .runtime import _jit

# B_2k / (2k) for the digamma series, and B_2k / (2k)! for the zeta tail
_PSI = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)
_ZETA = (1.0 / 12, -1.0 / 720, 1.0 / 30240, -1.0 / 1209600, 1.0 / 47900160,
         -691.0 / 1307674368000, 1.0 / 74724249600, -3617.0 / 10670622842880000)


@_jit
def digamma_f64(x):
    x = float(x)
    if x <= 0.0 and x == math.floor(x):
        return -math.copysign(math.inf, x) if x == 0.0 else math.nan
    shift = 0.0
    if x < 0.0:                   # reflection: psi(x) = psi(1 - x) - pi / tan(pi x)
        shift = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < 10.0:
        shift -= 1.0 / x
        x += 1.0
    inv2 = 1.0 / (x * x)
    series = 0.0
    power = inv2
    for c in _PSI:
        series += c * power
        power *= inv2
    return shift + math.log(x) - 0.5 / x - series


@_jit
def polygamma_f64(n, x):
    x = float(x)
    if n == 0:
        return digamma_f64(x)
    s = n + 1.0
    if x <= 0.0 and x == math.floor(x):
        return math.inf if n % 2 == 1 else -math.inf
    total = 0.0
    while x < 10.0 + s:            # zeta(s, x) = x^-s + zeta(s, x + 1)
        total += x ** -s
        x += 1.0
    # Euler-Maclaurin: x^(1-s)/(s-1) + x^-s/2 + sum B_2k/(2k)! (s)_(2k-1) x^(-s-2k+1)
    tail = x ** (1.0 - s) / (s - 1.0) + 0.5 * x ** -s
    rising = s                      # s (s+1) ... (s + 2k - 2)
    power = x ** (-s - 1.0)
    for k in range(len(_ZETA)):
        tail += _ZETA[k] * rising * power
        rising *= (s + 2 * k + 1.0) * (s + 2 * k + 2.0)
        power /= x * x
    sign = 1.0 if n % 2 == 1 else -1.0
    return sign * math.gamma(n + 1.0) * (total + tail)


@_jit
def digamma_f32(x):
    return np.float32(digamma_f64(x))


@_jit
def polygamma_f32(n, x):
    return np.float32(polygamma_f64(n, x))
