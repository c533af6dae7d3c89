"""Oblivious transfer: a DH base OT over X25519 and IKNP OT extension with AES, in numpy.

**Base OT** (``KAPPA = 128`` of them, once per direction and session). Chou–Orlandi's
"simplest OT" needs point addition, which X25519 (an x-only Montgomery ladder, the curve API
``cryptography`` offers) does not provide, so we use the two-key Diffie–Hellman OT of the
Even–Goldreich–Lempel / Bellare–Micali family with *oblivious key sampling*: the sender
publishes ``A = aG``; for choice ``c`` the receiver sends ``(pk_0, pk_1)`` with
``pk_c = bG`` (a fresh X25519 key) and ``pk_{1-c} = k_pub * U`` for a uniformly sampled curve
point ``U`` whose discrete log nobody knows (``k_pub`` is a fixed public clamped scalar, so
both keys lie in the prime-order subgroup). The sender's keys are ``k_i = H(i, A, pk_i, a*pk_i)``
(SHA-256), the receiver computes ``k_c = H(c, A, pk_c, b*A)``. Receiver privacy: both keys are
points of the prime-order subgroup with unknown-to-the-sender logs (computationally
indistinguishable under DDH). Sender privacy against a semi-honest receiver: ``a*pk_{1-c}`` is a
CDH value (random oracle). Semi-honest only — a malicious receiver could pick both logs.

**IKNP extension** (Ishai–Kilian–Nissim–Petrank 2003). The extension *sender* is the base-OT
*receiver* with random ``s`` in {0,1}^128 and seeds ``k_i^{s_i}``; the extension receiver holds
both seeds. For choices ``r`` (m bits) the receiver sends ``u_i = G(k_i^0) ^ G(k_i^1) ^ r``
(G = AES-128-CTR); the sender gets ``q_i = G(k_i^{s_i}) ^ s_i u_i``, so row-wise
``q_j = t_j ^ r_j s``. Random-OT keys are ``H(j, q_j)``, ``H(j, q_j ^ s)`` and the receiver's
``H(j, t_j)``, with the tweakable correlation-robust hash
``H(j, x) = pi(pi(x) ^ j) ^ pi(x)`` (pi = fixed-key AES-128; Guo et al., S&P 2020). The bit
transpose and all hashing are vectorised (one AES-ECB call per batch).

On top: random OT (``rot_*``), chosen-message OT (``ot_*``, 2 flights), correlated OT over
``Z_{2^bits}`` (``cot_*``: the sender sends one value per OT) and 1-of-2^m OT built from ``m``
random OTs (``ot_n_*``: the message for ``v`` is padded with the XOR of PRG bytes of the keys
``k_{i, v_i}``; the receiver lacks at least one key of every other ``v``, Naor–Pinkas 1999).

A ``DealerOT`` (labelled **test-only**: a trusted dealer hands out the correlations) has the
same interface, so the protocols can be tested without the base OTs.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from trustlab.core.errors import InputError, NotFittedError
from trustlab.methods.jaguar.channel import Channel, ChannelError
from trustlab.methods.jaguar.checks import as_bits, as_ring_array, check_instance, check_int
from trustlab.methods.jaguar.sampling import Sampler

__all__ = [
    "KAPPA",
    "IKNPReceiver",
    "IKNPSender",
    "OTSuite",
    "base_ot_receive",
    "base_ot_send",
    "oblivious_x25519_point",
    "tccr_hash",
]

KAPPA = 128
_P25519 = 2**255 - 19
_A25519 = 486662
#: The fixed-key permutation pi (a public constant key, as in fixed-key-AES garbling).
_FIXED_KEY = hashlib.sha256(b"trustlab.jaguar fixed-key AES").digest()[:16]
#: A public clamped scalar that maps a random curve point into the prime-order subgroup.
_K_PUB = bytearray(hashlib.sha256(b"trustlab.jaguar oblivious key").digest())
_K_PUB[0] &= 248
_K_PUB[31] = (_K_PUB[31] & 127) | 64
_K_PUB = bytes(_K_PUB)
_ECB = Cipher(algorithms.AES(_FIXED_KEY), modes.ECB())
_CHUNK = 1 << 16  # columns per bit-transpose chunk (bounds memory)


# -- primitives ---------------------------------------------------------------------------
def _pi(blocks: np.ndarray) -> np.ndarray:
    """Fixed-key AES on (n, 2) uint64 blocks."""
    if blocks.shape[0] == 0:
        return blocks.copy()
    enc = _ECB.encryptor()
    raw = enc.update(np.ascontiguousarray(blocks, dtype="<u8").tobytes()) + enc.finalize()
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(-1, 2)


def tccr_hash(blocks: np.ndarray, tweaks: np.ndarray) -> np.ndarray:
    """``H(j, x) = pi(pi(x) ^ j) ^ pi(x)`` on (n, 2) uint64 blocks with (n,) uint64 tweaks."""
    px = _pi(blocks)
    t = px.copy()
    t[:, 0] ^= np.asarray(tweaks, dtype=np.uint64)
    return _pi(t) ^ px


def _prg(key: bytes, nonce: int, nbytes: int) -> np.ndarray:
    enc = Cipher(algorithms.AES(key), modes.CTR(struct.pack("<QQ", nonce, 0))).encryptor()
    return np.frombuffer(enc.update(bytes(nbytes)), dtype=np.uint8)


def _transpose(cols: np.ndarray, m: int) -> np.ndarray:
    """(128, nbytes) bit matrix (column j = bit j of each row) -> (m, 2) uint64 rows."""
    out = np.empty((m, 2), dtype=np.uint64)
    step = _CHUNK // 8
    for start in range(0, cols.shape[1], step):
        part = np.unpackbits(cols[:, start : start + step], axis=1, bitorder="little")
        rows = np.packbits(np.ascontiguousarray(part.T), axis=1, bitorder="little")
        lo, hi = start * 8, min(m, start * 8 + rows.shape[0])
        if lo >= m:
            break
        out[lo:hi] = rows[: hi - lo].view("<u8").astype(np.uint64)
    return out


def _legendre_is_square(v: int) -> bool:
    return v != 0 and pow(v, (_P25519 - 1) // 2, _P25519) == 1


def oblivious_x25519_point(sampler: Sampler) -> bytes:
    """A uniform point of the prime-order subgroup whose discrete log nobody learns."""
    while True:
        u = int.from_bytes(sampler.bytes(32), "little") & ((1 << 255) - 1)
        if u >= _P25519 or not _legendre_is_square((u * u * u + _A25519 * u * u + u) % _P25519):
            continue  # not the x-coordinate of a point on the curve (twist or out of range)
        try:
            return X25519PrivateKey.from_private_bytes(_K_PUB).exchange(
                X25519PublicKey.from_public_bytes(u.to_bytes(32, "little")))
        except ValueError:  # pragma: no cover - small-order point, probability ~2^-250
            continue


def _kdf(index: int, bit: int, a_pub: bytes, pk: bytes, shared: bytes) -> bytes:
    return hashlib.sha256(struct.pack("<QB", index, bit) + a_pub + pk + shared).digest()[:16]


# -- base OT --------------------------------------------------------------------------------
class _BaseSenderState:
    def __init__(self, sampler: Sampler) -> None:
        self.a = X25519PrivateKey.from_private_bytes(sampler.bytes(32))
        self.a_pub = self.a.public_key().public_bytes_raw()

    def finish(self, pks: bytes, n: int) -> tuple[list[bytes], list[bytes]]:
        if not isinstance(pks, bytes) or len(pks) != 64 * n:
            raise ChannelError(f"Base OT: expected {64 * n} bytes of receiver keys.")
        k0, k1 = [], []
        for i in range(n):
            for bit, out in ((0, k0), (1, k1)):
                pk = pks[64 * i + 32 * bit : 64 * i + 32 * bit + 32]
                try:
                    shared = self.a.exchange(X25519PublicKey.from_public_bytes(pk))
                except ValueError as exc:
                    raise ChannelError("Base OT: the receiver sent a small-order key.") from exc
                out.append(_kdf(i, bit, self.a_pub, pk, shared))
        return k0, k1


class _BaseReceiverState:
    def __init__(self, choices: np.ndarray, sampler: Sampler) -> None:
        self.choices = [int(c) for c in np.asarray(choices).ravel()]
        self.keys = [X25519PrivateKey.from_private_bytes(sampler.bytes(32)) for _ in self.choices]
        parts = []
        for c, key in zip(self.choices, self.keys, strict=True):
            mine, other = key.public_key().public_bytes_raw(), oblivious_x25519_point(sampler)
            parts.append(mine + other if c == 0 else other + mine)
        self.message = b"".join(parts)

    def finish(self, a_pub: bytes) -> list[bytes]:
        if not isinstance(a_pub, bytes) or len(a_pub) != 32:
            raise ChannelError("Base OT: expected the sender's 32-byte key.")
        try:
            a_key = X25519PublicKey.from_public_bytes(a_pub)
            out = []
            for i, (c, key) in enumerate(zip(self.choices, self.keys, strict=True)):
                pk = self.message[64 * i + 32 * c : 64 * i + 32 * c + 32]
                out.append(_kdf(i, c, a_pub, pk, key.exchange(a_key)))
        except ValueError as exc:
            raise ChannelError("Base OT: the sender sent a small-order key.") from exc
        return out


def base_ot_send(ch: Channel, n: int, sampler: Sampler) -> tuple[list[bytes], list[bytes]]:
    """Sender of ``n`` base OTs with random 16-byte messages: returns ``(k0, k1)``."""
    check_instance(ch, Channel, "ch", "base_ot_send")
    n = check_int(n, "n", "base_ot_send", lo=1, hi=1 << 20)
    check_instance(sampler, Sampler, "sampler", "base_ot_send")
    st = _BaseSenderState(sampler)
    ch.send(st.a_pub)
    return st.finish(ch.recv_one(), n)


def base_ot_receive(ch: Channel, choices: np.ndarray, sampler: Sampler) -> list[bytes]:
    """Receiver of base OTs: returns ``k_{c_i}`` for each choice bit."""
    check_instance(ch, Channel, "ch", "base_ot_receive")
    choices = as_bits(choices, "choices", "base_ot_receive", allow_empty=False)
    check_instance(sampler, Sampler, "sampler", "base_ot_receive")
    st = _BaseReceiverState(choices, sampler)
    ch.send(st.message)
    return st.finish(ch.recv_one())


# -- IKNP -----------------------------------------------------------------------------------
def _check_seeds(seeds: list[bytes], name: str, where: str) -> None:
    if (not isinstance(seeds, list | tuple) or len(seeds) != KAPPA
            or not all(isinstance(k, bytes) and len(k) == 16 for k in seeds)):
        raise InputError(f"The '{name}' parameter of {where} must be {KAPPA} base-OT keys of 16 "
                         "bytes each (from base_ot_send / base_ot_receive).")


def _bits_to_block(bits: np.ndarray) -> np.ndarray:
    return np.packbits(np.asarray(bits, dtype=np.uint8), bitorder="little").view("<u8").astype(
        np.uint64)


class IKNPSender:
    """The extension sender (base-OT receiver). ``s_``: (128,) choice bits; ``seeds_``: keys."""

    def __init__(self, s: np.ndarray, seeds: list[bytes]) -> None:
        s = as_bits(s, "s", "IKNPSender", size=KAPPA)
        _check_seeds(seeds, "seeds", "IKNPSender")
        self.s_ = s
        self.s_block_ = _bits_to_block(self.s_)
        self.seeds_ = seeds
        self.batch_ = 0
        self.count_ = 0

    def extend(self, u: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Given the receiver's ``u`` (128, nbytes), return ``(q rows (m, 2), tweaks (m,))``."""
        m = check_int(m, "m", "IKNPSender.extend", lo=0)
        nbytes = -(-m // 8)
        if not isinstance(u, np.ndarray) or u.shape != (KAPPA, nbytes) or u.dtype != np.uint8:
            raise ChannelError(f"IKNP: expected a (128, {nbytes}) uint8 matrix from the receiver.")
        g = np.stack([_prg(k, self.batch_, nbytes) for k in self.seeds_])
        q = g ^ (u * self.s_[:, None])
        self.batch_ += 1
        tweaks = np.arange(self.count_, self.count_ + m, dtype=np.uint64)
        self.count_ += m
        return _transpose(q, m), tweaks

    def rot(self, u: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Random-OT keys ``(k0, k1)``, each (m, 2) uint64."""
        q, tw = self.extend(u, m)
        return tccr_hash(q, tw), tccr_hash(q ^ self.s_block_[None, :], tw)


class IKNPReceiver:
    """The extension receiver (base-OT sender): holds both seeds of every base OT."""

    def __init__(self, seeds0: list[bytes], seeds1: list[bytes]) -> None:
        _check_seeds(seeds0, "seeds0", "IKNPReceiver")
        _check_seeds(seeds1, "seeds1", "IKNPReceiver")
        self.seeds0_, self.seeds1_ = seeds0, seeds1
        self.batch_ = 0
        self.count_ = 0

    def extend(self, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Returns ``(u to send (128, nbytes), t rows (m, 2), tweaks (m,))``."""
        r = as_bits(choices, "choices", "IKNPReceiver.extend")
        m = r.size
        nbytes = -(-m // 8)
        g0 = np.stack([_prg(k, self.batch_, nbytes) for k in self.seeds0_])
        g1 = np.stack([_prg(k, self.batch_, nbytes) for k in self.seeds1_])
        u = g0 ^ g1 ^ np.packbits(r, bitorder="little")[None, :]
        self.batch_ += 1
        tweaks = np.arange(self.count_, self.count_ + m, dtype=np.uint64)
        self.count_ += m
        return u, _transpose(g0, m), tweaks

    def rot(self, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Returns ``(u, k_r)``: the message to send and the chosen random-OT keys."""
        u, t, tw = self.extend(choices)
        return u, tccr_hash(t, tw)


def _low_bits(keys: np.ndarray, bits: int) -> np.ndarray:
    v = keys[:, 0]
    return v if bits >= 64 else v & np.uint64((1 << bits) - 1)


def _mask(v: np.ndarray, bits: int) -> np.ndarray:
    return v if bits >= 64 else v & np.uint64((1 << bits) - 1)


class OTSuite:
    """One party's OT machinery in both directions over a channel.

    ``setup`` runs the 2 x 128 base OTs (both directions in one exchange). Then each method is
    called by *both* parties with matching arguments: the sender's and the receiver's halves of
    the same OTs. Messages are ring elements mod ``2^bits`` (``bits <= 64``) as uint64.
    dealer: **test-only** trusted-dealer mode (no base OT, correlations from a shared seed).
    """

    def __init__(self, ch: Channel, sampler: Sampler | None = None, dealer: bool = False) -> None:
        self.ch = check_instance(ch, Channel, "ch", "OTSuite")
        self.sampler = sampler if sampler is None else check_instance(
            sampler, Sampler, "sampler", "OTSuite")
        if not isinstance(dealer, bool):
            raise InputError(f"The 'dealer' parameter of OTSuite must be a bool. Got {dealer!r}.")
        self.dealer = dealer

    def _ready(self, where: str) -> None:
        if not (hasattr(self, "_dealer") or hasattr(self, "sender_")):
            raise NotFittedError(f"Call OTSuite.setup() before OTSuite.{where}.")

    def setup(self) -> OTSuite:
        sampler = self.sampler or Sampler.from_os()
        if self.dealer:
            self._dealer = _Dealer(self.ch, sampler)
            return self
        s = sampler.bits(KAPPA, 1).astype(np.uint8)
        as_sender = _BaseSenderState(sampler)          # I am base sender -> IKNP receiver
        as_receiver = _BaseReceiverState(s, sampler)   # I am base receiver -> IKNP sender
        a_peer, pks_peer = self.ch.exchange(as_sender.a_pub, as_receiver.message)
        k0, k1 = as_sender.finish(pks_peer, KAPPA)
        self.receiver_ = IKNPReceiver(k0, k1)
        self.sender_ = IKNPSender(s, as_receiver.finish(a_peer))
        return self

    # -- random OT ------------------------------------------------------------------------
    def rot_send(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Sender of ``m`` random OTs: ``(k0, k1)`` (m, 2) uint64 (receiver sends one message)."""
        self._ready("rot_send")
        m = check_int(m, "m", "OTSuite.rot_send", lo=0)
        if self.dealer:
            return self._dealer.rot_send(m)
        u = self.ch.recv_one()
        return self.sender_.rot(u, m)

    def rot_receive(self, choices: np.ndarray) -> np.ndarray:
        self._ready("rot_receive")
        choices = as_bits(choices, "choices", "OTSuite.rot_receive")
        if self.dealer:
            return self._dealer.rot_receive(choices)
        u, k = self.receiver_.rot(choices)
        self.ch.send(u)
        return k

    def rot_both(self, m_send: int, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Random OTs in both directions at once (one latency): ``(k0, k1, k_r)``."""
        self._ready("rot_both")
        m_send = check_int(m_send, "m_send", "OTSuite.rot_both", lo=0)
        choices = as_bits(choices, "choices", "OTSuite.rot_both")
        if self.dealer:
            return (*self._dealer.rot_both(m_send, choices),)
        u, k = self.receiver_.rot(choices)
        u_peer = self.ch.exchange(u)[0]
        k0, k1 = self.sender_.rot(u_peer, m_send)
        return k0, k1, k

    # -- chosen-message OT -----------------------------------------------------------------
    def ot_send(self, m0: np.ndarray, m1: np.ndarray, bits: int) -> None:
        """Send ``m0[j]`` or ``m1[j]`` (mod ``2^bits``) by the receiver's choice bit ``j``."""
        self._ready("ot_send")
        bits = check_int(bits, "bits", "OTSuite.ot_send", lo=1, hi=64)
        m0 = as_ring_array(m0, "m0", "OTSuite.ot_send", bits).ravel()
        m1 = as_ring_array(m1, "m1", "OTSuite.ot_send", bits).ravel()
        if m0.size != m1.size:
            raise InputError(f"The 'm0' and 'm1' parameters of OTSuite.ot_send must have the same "
                             f"size. Got {m0.size} and {m1.size}.")
        k0, k1 = self.rot_send(m0.size)
        self.ch.send_ring(np.concatenate([_mask(m0 ^ _low_bits(k0, bits), bits),
                                          _mask(m1 ^ _low_bits(k1, bits), bits)]), bits)

    def ot_receive(self, choices: np.ndarray, bits: int) -> np.ndarray:
        self._ready("ot_receive")
        bits = check_int(bits, "bits", "OTSuite.ot_receive", lo=1, hi=64)
        c = as_bits(choices, "choices", "OTSuite.ot_receive")
        k = self.rot_receive(c)
        y = self.ch.recv_ring(bits, (2, c.size))
        return _mask(np.where(c == 1, y[1], y[0]) ^ _low_bits(k, bits), bits)

    # -- correlated OT over Z_{2^bits} ------------------------------------------------------
    def cot_send(self, delta: np.ndarray, bits: int) -> np.ndarray:
        """Correlated OT: the receiver gets ``x0 + c*delta``; returns the sender's random ``x0``."""
        self._ready("cot_send")
        bits = check_int(bits, "bits", "OTSuite.cot_send", lo=1, hi=64)
        d = as_ring_array(delta, "delta", "OTSuite.cot_send", bits).ravel()
        k0, k1 = self.rot_send(d.size)
        x0 = _low_bits(k0, bits)
        self.ch.send_ring(_mask(x0 + d - _low_bits(k1, bits), bits), bits)
        return x0

    def cot_receive(self, choices: np.ndarray, bits: int) -> np.ndarray:
        self._ready("cot_receive")
        bits = check_int(bits, "bits", "OTSuite.cot_receive", lo=1, hi=64)
        c = as_bits(choices, "choices", "OTSuite.cot_receive")
        k = _low_bits(self.rot_receive(c), bits)
        y = self.ch.recv_ring(bits, (c.size,))
        return _mask(k + c.astype(np.uint64) * y, bits)

    def cot_both(self, delta: np.ndarray, choices: np.ndarray, bits: int) -> tuple[np.ndarray,
                                                                                   np.ndarray]:
        """COT as sender (``delta``) and receiver (``choices``) at once: ``(x0, x_c)``."""
        self._ready("cot_both")
        bits = check_int(bits, "bits", "OTSuite.cot_both", lo=1, hi=64)
        d = as_ring_array(delta, "delta", "OTSuite.cot_both", bits).ravel()
        c = as_bits(choices, "choices", "OTSuite.cot_both")
        k0, k1, k = self.rot_both(d.size, c)
        x0 = _low_bits(k0, bits)
        y = self.ch.exchange_ring(_mask(x0 + d - _low_bits(k1, bits), bits), bits)
        return x0, _mask(_low_bits(k, bits) + c.astype(np.uint64) * y, bits)

    # -- 1-of-2^m OT ------------------------------------------------------------------------
    def ot_n_send(self, messages: np.ndarray, bits: int) -> None:
        """``messages``: (n_ot, 2^m) values mod ``2^bits``; the receiver picks one per row."""
        self._ready("ot_n_send")
        bits = check_int(bits, "bits", "OTSuite.ot_n_send", lo=1, hi=8)
        msgs = as_ring_array(messages, "messages", "OTSuite.ot_n_send", bits)
        if msgs.ndim != 2:
            raise InputError("The 'messages' parameter of OTSuite.ot_n_send must be 2-D (n_ot, "
                             f"2^m). Got shape {msgs.shape}.")
        n_ot, n_msg = msgs.shape
        m = n_msg.bit_length() - 1
        if n_msg != 1 << m or m < 1 or bits > 8:
            raise InputError(
                f"1-of-N OT needs N = 2^m >= 2 and messages of <= 8 bits. Got N={n_msg}, {bits}.")
        k0, k1 = self.rot_send(n_ot * m)
        keys = np.stack([k0.reshape(n_ot, m, 2), k1.reshape(n_ot, m, 2)])  # (2, n_ot, m, 2)
        pads = _ot_n_pads(keys, np.arange(n_msg), n_ot, m)
        self.ch.send_ring(_mask(msgs ^ pads, bits), bits)

    def ot_n_receive(self, choices: np.ndarray, m: int, bits: int) -> np.ndarray:
        self._ready("ot_n_receive")
        where = "OTSuite.ot_n_receive"
        m = check_int(m, "m", where, lo=1, hi=16)
        bits = check_int(bits, "bits", where, lo=1, hi=8)
        c = as_ring_array(choices, "choices", where, m).astype(np.int64).ravel()
        n_ot = c.size
        bit_choices = ((c[:, None] >> np.arange(m)) & 1).astype(np.uint8)  # (n_ot, m)
        k = self.rot_receive(bit_choices.ravel()).reshape(n_ot, m, 2)
        y = self.ch.recv_ring(bits, (n_ot, 1 << m))
        pad = _ot_n_pad_one(k, c, m)
        return _mask(y[np.arange(n_ot), c] ^ pad, bits)


def _expand_keys(keys: np.ndarray, nbytes: int) -> np.ndarray:
    """(..., 2) uint64 random keys -> (..., nbytes) uint8 pseudo-random bytes.

    Block ``t`` is the Even–Mansour value ``pi(k ^ t) ^ k`` (a PRF of ``t`` under the secret,
    uniformly random key ``k``).
    """
    lead = keys.shape[:-1]
    flat = keys.reshape(-1, 2)
    nblk = -(-nbytes // 16)
    blocks = np.repeat(flat, nblk, axis=0)
    blocks[:, 0] ^= np.tile(np.arange(nblk, dtype=np.uint64), flat.shape[0])
    out = _pi(blocks) ^ np.repeat(flat, nblk, axis=0)
    return out.view(np.uint8).reshape(*lead, nblk * 16)[..., :nbytes]


def _slot(v: np.ndarray, i: int) -> np.ndarray:
    """Index of ``v`` among the values whose bit ``i`` equals ``v``'s."""
    return ((v >> (i + 1)) << i) | (v & ((1 << i) - 1))


def _ot_n_pads(keys: np.ndarray, values: np.ndarray, n_ot: int, m: int) -> np.ndarray:
    """``pad_v = XOR_i byte_{slot(v,i)}(PRG(k_{i, v_i}))`` for every row and v: (n_ot, 2^m).

    Each key pads only the ``2^(m-1)`` values that use it, with disjoint bytes, and the
    receiver lacks at least one key of every value but its choice.
    """
    stream = _expand_keys(keys, 1 << (m - 1))  # (2, n_ot, m, 2^(m-1))
    pads = np.zeros((n_ot, values.size), dtype=np.uint8)
    for i in range(m):
        bit = (values >> i) & 1
        pads ^= stream[bit, :, i, _slot(values, i)].T
    return pads.astype(np.uint64)


def _ot_n_pad_one(k: np.ndarray, c: np.ndarray, m: int) -> np.ndarray:
    stream = _expand_keys(k, 1 << (m - 1))  # (n_ot, m, 2^(m-1))
    pad = np.zeros(c.size, dtype=np.uint8)
    rows = np.arange(c.size)
    for i in range(m):
        pad ^= stream[rows, i, _slot(c, i)]
    return pad.astype(np.uint64)


class _Dealer:
    """**Test-only** trusted dealer: both parties derive the same correlations from a seed.

    The seed is sent in the clear, so this mode has no security at all; it only exists to
    test the protocols above the OT layer quickly.
    """

    def __init__(self, ch: Channel, sampler: Sampler) -> None:
        mine = sampler.bytes(16)
        peer = ch.exchange(mine)[0]
        seed = mine + peer if ch.role == 0 else peer + mine
        self.rng = np.random.default_rng(np.frombuffer(seed, dtype=np.uint32))
        self.ch = ch

    def _draw(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        raw = np.frombuffer(self.rng.bytes(32 * m), dtype="<u8").astype(np.uint64)
        return raw[: 2 * m].reshape(m, 2), raw[2 * m :].reshape(m, 2)

    def rot_send(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        c = self.ch.recv_one()  # the receiver tells the dealer its choices (in the clear)
        k0, k1 = self._draw(m)
        del c
        return k0, k1

    def rot_receive(self, choices: np.ndarray) -> np.ndarray:
        c = np.asarray(choices, np.uint8).ravel()
        self.ch.send(c)
        k0, k1 = self._draw(c.size)
        return np.where(c[:, None] == 1, k1, k0)

    def rot_both(self, m_send: int, choices: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
        c = np.asarray(choices, np.uint8).ravel()
        self.ch.exchange(c)
        first, second = (m_send, c.size) if self.ch.role == 0 else (c.size, m_send)
        a0, a1 = self._draw(first)
        b0, b1 = self._draw(second)
        if self.ch.role == 0:
            return a0, a1, np.where(c[:, None] == 1, b1, b0)
        return b0, b1, np.where(c[:, None] == 1, a1, a0)
