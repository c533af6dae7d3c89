"""The millionaires' protocol on private inputs (CrypTFlow2-style) and boolean AND gates.

P0 holds ``a``, P1 holds ``b`` (unsigned, ``nbits`` bits each); they end with boolean shares of
``[a < b]``. Both inputs are cut into ``q = ceil(nbits / m)`` leaves of ``m`` bits. For each
leaf P0 is the sender of a 1-of-2^m OT whose message ``v`` is
``(lt0 ^ [a_j < v], eq0 ^ [a_j == v])`` with fresh random ``lt0, eq0``; P1 chooses ``v = b_j``.
The leaves are combined by a tree (least significant leaf first):
``lt = lt_hi ^ (eq_hi & lt_lo)``, ``eq = eq_hi & eq_lo`` (the XOR replaces the OR because the
two events are disjoint), one level per round, each AND a Beaver multiplication with a bit
triple. Triples come from two random OTs each (one per direction):
``a0 b1 = x0 ^ x_{b1}`` with ``a0 = x0 ^ x1``, and symmetrically (no trusted dealer).
Cost per comparison: ``q*m`` random OTs + ``q*2^m*2`` bits for the leaves, ``2(q-1)`` triples
(4(q-1) random OTs) and ``ceil(log2 q)`` opening rounds.
"""

from __future__ import annotations

import numpy as np

from trustlab.core.errors import InputError
from trustlab.methods.jaguar.checks import as_bits, as_ring_array, check_int
from trustlab.methods.jaguar.party import Party, check_party

__all__ = ["and_gates", "bit_triples", "millionaire"]


def bit_triples(p: Party, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` shared AND triples ``(a, b, c)`` with ``c = a & b``, from 2n random OTs."""
    check_party(p, "bit_triples")
    n = check_int(n, "n", "bit_triples", lo=0)
    if n == 0:
        z = np.zeros(0, dtype=np.uint8)
        return z, z, z
    assert p.ot is not None
    b_own = p.random_bits(n)
    k0, k1, kb = p.ot.rot_both(n, b_own)
    x0 = (k0[:, 0] & np.uint64(1)).astype(np.uint8)
    x1 = (k1[:, 0] & np.uint64(1)).astype(np.uint8)
    got = (kb[:, 0] & np.uint64(1)).astype(np.uint8)
    a_own = x0 ^ x1
    # my a * peer's b = x0 ^ (peer's got); peer's a * my b = (peer's y0) ^ got
    c_own = (a_own & b_own) ^ x0 ^ got
    return a_own, b_own, c_own


def and_gates(p: Party, x: np.ndarray, y: np.ndarray,
              triples: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """Shares of ``x & y`` (Beaver): opens ``x^a`` and ``y^b`` in one exchange."""
    check_party(p, "and_gates", setup=False)
    x = as_bits(x, "x", "and_gates")
    y = as_bits(y, "y", "and_gates", size=x.size)
    if not isinstance(triples, tuple | list) or len(triples) != 3:
        raise InputError("The 'triples' parameter of and_gates must be (a, b, c) from "
                         "bit_triples.")
    a, b, c = (as_bits(t, "triples", "and_gates", size=x.size) for t in triples)
    opened = p.ch.exchange(np.packbits(np.concatenate([x ^ a, y ^ b])))[0]
    peer = np.unpackbits(opened)[: 2 * x.size]
    d = (x ^ a) ^ peer[: x.size]
    e = (y ^ b) ^ peer[x.size :]
    z = c ^ (d & b) ^ (e & a)
    if p.role == 0:
        z = z ^ (d & e)
    return z


def _tree_and_count(q: int) -> int:
    count, n = 0, q
    while n > 1:
        count += 2 * (n // 2)
        n = n // 2 + n % 2
    return count


def millionaire(p: Party, value: np.ndarray, nbits: int, m: int = 4) -> np.ndarray:
    """Boolean shares of ``[a < b]``: P0 passes ``a``, P1 passes ``b`` (uint64, < 2^nbits)."""
    check_party(p, "millionaire")
    m = check_int(m, "m", "millionaire", lo=1, hi=8)
    nbits = check_int(nbits, "nbits", "millionaire", lo=1, hi=64)
    shape = np.shape(value)
    v = as_ring_array(value, "value", "millionaire", nbits).ravel()
    assert p.ot is not None
    n = v.size
    q = -(-nbits // m)
    leaves = ((v[:, None] >> (np.arange(q, dtype=np.uint64) * np.uint64(m)))
              & np.uint64((1 << m) - 1)).astype(np.int64)  # (n, q), leaf 0 least significant
    n_and = _tree_and_count(q) * n
    triples = bit_triples(p, n_and)
    if p.role == 0:
        lt0 = p.random_bits(n * q).reshape(n, q)
        eq0 = p.random_bits(n * q).reshape(n, q)
        vals = np.arange(1 << m)
        lt_msg = lt0[..., None] ^ (leaves[..., None] < vals).astype(np.uint8)
        eq_msg = eq0[..., None] ^ (leaves[..., None] == vals).astype(np.uint8)
        msgs = (lt_msg | (eq_msg << 1)).astype(np.uint64).reshape(n * q, 1 << m)
        p.ot.ot_n_send(msgs, 2)
        lt, eq = lt0, eq0
    else:
        got = p.ot.ot_n_receive(leaves.ravel(), m, 2).reshape(n, q)
        lt = (got & np.uint64(1)).astype(np.uint8)
        eq = ((got >> np.uint64(1)) & np.uint64(1)).astype(np.uint8)
    used = 0
    while lt.shape[1] > 1:
        pairs = lt.shape[1] // 2
        lo_lt, hi_lt = lt[:, 0 : 2 * pairs : 2], lt[:, 1 : 2 * pairs : 2]
        lo_eq, hi_eq = eq[:, 0 : 2 * pairs : 2], eq[:, 1 : 2 * pairs : 2]
        k = n * pairs
        tri = tuple(t[used : used + 2 * k] for t in triples)
        used += 2 * k
        prod = and_gates(p, np.concatenate([hi_eq.ravel(), hi_eq.ravel()]),
                         np.concatenate([lo_lt.ravel(), lo_eq.ravel()]), tri)
        new_lt = hi_lt ^ prod[:k].reshape(n, pairs)
        new_eq = prod[k:].reshape(n, pairs)
        if lt.shape[1] % 2:
            new_lt = np.concatenate([new_lt, lt[:, -1:]], axis=1)
            new_eq = np.concatenate([new_eq, eq[:, -1:]], axis=1)
        lt, eq = new_lt, new_eq
    return lt[:, 0].reshape(shape)
