"""Runs of nodes that repeat whatever their sizes: the layers of a network, forward and
backward. Each node gets a token that alike nodes share (``tokens``); runs of tokens are
compared in constant time (``Windows``). Code generation cuts large graphs where they
repeat, so that alike parts are one function (``codegen.cpu._chunks``), and the rolling
of Python loops leaves unrolled a block made of alike layers of other sizes
(``rolling``)."""

import hashlib

import numpy as np

from .. import ir
from ..ir import Var

# an operand made this many nodes back or fewer is told by its distance (tokens); one
# made farther is "far": a backward layer reads its forward layer's values from farther
# back at each layer, and the layers must look alike
NEAR = 24


def tokens(nodes):
    """One int per node that equal nodes of repeated runs share: its op, parameters
    (sizes as sizes, not their values), result's dtype and rank, and where each operand
    comes from (so many nodes back, or from farther or outside the nodes)."""
    at = {n.out.id: k for k, n in enumerate(nodes)}
    out = []
    for k, n in enumerate(nodes):
        operands = []
        for v in n.inputs:
            if isinstance(v, Var):
                back = k - at.get(v.id, k + 1)
                operands.append((v.dtype.str, v.ndim, back if 0 < back <= NEAR else -1))
            else:
                operands.append(signature(v))
        key = (n.prim.name, n.out.dtype.str, n.out.ndim, tuple(operands),
               tuple(sorted((name, signature(value)) for name, value in n.params.items())
                     if n.params else ()))
        token = _TOKENS.get(key)
        if token is None:     # a hash of the key's text, not a count: the same in every
            if len(_TOKENS) > 100_000:                  # program and every process
                _TOKENS.clear()
            token = _TOKENS[key] = int.from_bytes(
                hashlib.blake2b(repr(key).encode(), digest_size=7).digest(), "little")
        out.append(token)
    return out


_TOKENS = {}                  # key -> token: few kinds of nodes, hashed once each


def signature(value):
    """A parameter as a token sees it: sizes and graphs by kind, arrays by shape class."""
    if isinstance(value, ir.Dim):
        return "size"
    if isinstance(value, (bool, int, float, complex, str, type(None))):
        return value
    if isinstance(value, (tuple, list)):
        return tuple(signature(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, signature(v)) for k, v in value.items()))
    if isinstance(value, np.dtype):
        return value.str
    if isinstance(value, ir.Graph):
        return ("graph", len(value.nodes))
    return type(value).__name__


class Windows:
    """Equality of runs of a token list in constant time: polynomial hashes of its
    prefixes (modulo a prime), checked in full where they agree."""

    MOD = (1 << 61) - 1
    BASE = 1_000_003

    def __init__(self, tokens):
        self.tokens = tokens
        self.prefix = [0]
        self.powers = [1]
        for t in tokens:
            self.prefix.append((self.prefix[-1] * self.BASE + t + 1) % self.MOD)
            self.powers.append(self.powers[-1] * self.BASE % self.MOD)

    def _hash(self, i, n):
        return (self.prefix[i + n] - self.prefix[i] * self.powers[n]) % self.MOD

    def equal(self, i, j, n):
        return (self._hash(i, n) == self._hash(j, n)
                and self.tokens[i:i + n] == self.tokens[j:j + n])
