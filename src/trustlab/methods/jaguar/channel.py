"""A counted, length-prefixed message channel between the two parties (TCP or a socket pair).

Wire format (version 1). On connect each side sends ``b"TLJG" + uint16 version + uint8 role``
and checks the peer's: a wrong magic, version or a second party of the same role is an error.
Then every message is one frame ``uint32 length | uint32 depth | payload``. ``depth`` is a
Lamport-style latency clock: a sender stamps its clock, a receiver sets its clock to
``max(own, stamp + 1)``, so the final clock is the number of one-way message latencies on the
protocol's critical path (``rounds``); simultaneous sends in both directions count once.
The payload is a tagged list of items (bytes, int, str, numpy arrays of fixed-width integer
dtypes) — no pickle, so a malformed or hostile message can only raise ``ChannelError``.

Bytes are counted on the socket (headers included). Sends go through a writer thread, so two
parties sending at the same time never deadlock on full socket buffers; every receive waits at
most ``timeout`` seconds.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import struct
import threading
import time
from dataclasses import dataclass

import numpy as np

from trustlab.core.errors import InputError, TrustlabError
from trustlab.core.validation import check_scalar

__all__ = [
    "PROTOCOL_VERSION",
    "Channel",
    "ChannelError",
    "ChannelStats",
    "accept",
    "channel_pair",
    "connect",
    "listen",
    "pack_ring",
    "unpack_ring",
]

PROTOCOL_VERSION = 1
_MAGIC = b"TLJG"
_HELLO = struct.Struct("<4sHB")
_HEADER = struct.Struct("<II")
_MAX_FRAME = 1 << 31
_DTYPES = {b"u1": np.uint8, b"u8": np.uint64, b"i8": np.int64, b"u4": np.uint32, b"?1": np.bool_}


class ChannelError(TrustlabError, ConnectionError):
    """The peer dropped the connection, timed out, or sent a malformed message."""


@dataclass(frozen=True)
class ChannelStats:
    """Counters of one party's channel: bytes each way, messages sent, latency depth."""

    bytes_sent: int
    bytes_received: int
    messages_sent: int
    rounds: int

    @property
    def bytes_total(self) -> int:
        return self.bytes_sent + self.bytes_received

    def minus(self, other: ChannelStats) -> ChannelStats:
        return ChannelStats(self.bytes_sent - other.bytes_sent,
                            self.bytes_received - other.bytes_received,
                            self.messages_sent - other.messages_sent, self.rounds - other.rounds)


def pack_ring(values: np.ndarray, bits: int) -> np.ndarray:
    """Ring elements (uint64, each ``< 2^bits``) packed to exactly ``bits`` bits each (uint8)."""
    v = np.ascontiguousarray(np.asarray(values, dtype=np.uint64).ravel())
    if bits >= 64:
        return v.view(np.uint8).copy()
    le = v.astype("<u8").view(np.uint8).reshape(-1, 8)[:, : -(-bits // 8)]
    b = np.unpackbits(le, axis=1, bitorder="little")[:, :bits]
    return np.packbits(b.ravel(), bitorder="little")


def unpack_ring(data: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Inverse of ``pack_ring``: ``count`` uint64 values of ``bits`` bits."""
    data = np.asarray(data, dtype=np.uint8)
    if bits >= 64:
        return data.view("<u8")[:count].astype(np.uint64)
    need = -(-count * bits // 8)
    if data.size < need:
        raise ChannelError(f"A packed ring message is too short: {data.size} < {need} bytes.")
    b = np.unpackbits(data[:need], bitorder="little")[: count * bits].reshape(count, bits)
    if bits <= 8:
        full = np.zeros((count, 8), dtype=np.uint8)
        full[:, :bits] = b
        return np.packbits(full, axis=1, bitorder="little").ravel().astype(np.uint64)
    full = np.zeros((count, 64), dtype=np.uint8)
    full[:, :bits] = b
    return np.packbits(full, axis=1, bitorder="little").view("<u8").ravel().astype(np.uint64)


def _encode(items: list | tuple) -> bytes:
    out = [struct.pack("<I", len(items))]
    for it in items:
        if isinstance(it, bytes | bytearray):
            out += [b"b", struct.pack("<Q", len(it)), bytes(it)]
        elif isinstance(it, bool | int | np.integer):
            out += [b"i", struct.pack("<q", int(it))]
        elif isinstance(it, str):
            raw = it.encode()
            out += [b"s", struct.pack("<Q", len(raw)), raw]
        elif isinstance(it, np.ndarray):
            code = {np.dtype(v): k for k, v in _DTYPES.items()}.get(it.dtype)
            if code is None:
                raise InputError(f"The 'items' parameter of Channel.send cannot hold a numpy "
                                 f"array of dtype {it.dtype} (uint8/32/64, int64, bool).")
            arr = np.ascontiguousarray(it)
            out += [b"a", code, struct.pack("<B", arr.ndim),
                    struct.pack(f"<{arr.ndim}Q", *arr.shape), arr.astype(arr.dtype.newbyteorder("<"),
                                                                        copy=False).tobytes()]
        else:
            raise InputError(f"The 'items' parameter of Channel.send cannot hold an item of "
                             f"type {type(it).__name__} (bytes, int, str or an integer array).")
    return b"".join(out)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = memoryview(buf), 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ChannelError("Malformed message: it ends before its declared content.")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple:
        s = struct.Struct(fmt)
        return s.unpack(self.take(s.size))


def _decode(buf: bytes) -> list:
    r = _Reader(buf)
    (n,) = r.unpack("<I")
    items: list = []
    for _ in range(n):
        tag = bytes(r.take(1))
        if tag == b"b":
            (ln,) = r.unpack("<Q")
            items.append(bytes(r.take(ln)))
        elif tag == b"i":
            items.append(r.unpack("<q")[0])
        elif tag == b"s":
            (ln,) = r.unpack("<Q")
            try:
                items.append(bytes(r.take(ln)).decode())
            except UnicodeDecodeError as exc:
                raise ChannelError("Malformed message: a string is not UTF-8.") from exc
        elif tag == b"a":
            code = bytes(r.take(2))
            if code not in _DTYPES:
                raise ChannelError(f"Malformed message: unknown array dtype code {code!r}.")
            dt = np.dtype(_DTYPES[code]).newbyteorder("<")
            (ndim,) = r.unpack("<B")
            shape = r.unpack(f"<{ndim}Q") if ndim else ()
            size = int(np.prod(shape, dtype=np.int64)) if ndim else 1
            raw = r.take(size * dt.itemsize)
            items.append(np.frombuffer(raw, dtype=dt).astype(_DTYPES[code]).reshape(shape))
        else:
            raise ChannelError(f"Malformed message: unknown item tag {tag!r}.")
    if r.pos != len(r.buf):
        raise ChannelError("Malformed message: trailing bytes after the declared items.")
    return items


def _check_timeout(value: float, name: str, where: str) -> float:
    return check_scalar(value, name, where, lo=0, hi=1e6, closed="right")


def _check_bits(bits: int, where: str) -> int:
    from trustlab.methods.jaguar.checks import check_int

    return check_int(bits, "bits", where, lo=1, hi=64)


class Channel:
    """One party's end of a connection; ``role`` 0 is the server, 1 the client.

    sock: a connected stream socket. timeout: seconds any receive may wait.
    """

    def __init__(self, sock: socket.socket, role: int, timeout: float = 60.0) -> None:
        if not isinstance(sock, socket.socket):
            raise InputError(f"The 'sock' parameter of Channel must be a connected socket. Got "
                             f"{type(sock).__name__}.")
        if isinstance(role, bool) or role not in (0, 1):
            raise InputError(f"The 'role' parameter of Channel must be 0 (server) or 1 (client). "
                             f"Got {role!r}.")
        timeout = _check_timeout(timeout, "timeout", "Channel")
        self.sock = sock
        self.role = role
        self.timeout = timeout
        self.bytes_sent = 0
        self.bytes_received = 0
        self.messages_sent = 0
        self.depth = 0
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._closed = False
        sock.settimeout(timeout)
        self._writer = threading.Thread(target=self._write_loop, daemon=True)
        self._writer.start()
        self._handshake()

    # -- lifecycle -------------------------------------------------------------------------
    def _handshake(self) -> None:
        self._send_raw(_HELLO.pack(_MAGIC, PROTOCOL_VERSION, self.role))
        magic, version, role = _HELLO.unpack(self._recv_exact(_HELLO.size))
        if magic != _MAGIC:
            raise ChannelError(f"The peer is not a jaguar party (magic {magic!r}).")
        if version != PROTOCOL_VERSION:
            raise ChannelError(
                f"Protocol version mismatch: this side speaks {PROTOCOL_VERSION}, the peer {version}."
            )
        if role == self.role:
            raise ChannelError(f"Both parties claim role {role}; one must be server, one client.")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._writer.join(timeout=self.timeout)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw I/O ---------------------------------------------------------------------------
    def _write_loop(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                return
            try:
                self.sock.sendall(data)
            except OSError as exc:  # reported on the next send/recv
                self._error = exc
                return

    def _send_raw(self, data: bytes) -> None:
        if self._error is not None:
            raise ChannelError(f"The connection to the peer failed while sending: {self._error}.")
        self.bytes_sent += len(data)
        self._queue.put(data)

    def _recv_exact(self, n: int) -> bytes:
        chunks, got = [], 0
        deadline = time.monotonic() + self.timeout
        while got < n:
            try:
                chunk = self.sock.recv(min(n - got, 1 << 20))
            except TimeoutError as exc:
                raise ChannelError(f"The peer sent nothing for {self.timeout:.0f} s.") from exc
            except OSError as exc:
                raise ChannelError(f"The connection to the peer failed: {exc}.") from exc
            if not chunk:
                raise ChannelError("The peer closed the connection in the middle of the protocol.")
            chunks.append(chunk)
            got += len(chunk)
            if time.monotonic() > deadline:
                raise ChannelError(f"A message took longer than {self.timeout:.0f} s to arrive.")
        self.bytes_received += n
        return b"".join(chunks)

    # -- messages --------------------------------------------------------------------------
    def send(self, *items: object) -> None:
        payload = _encode(items)
        self._send_raw(_HEADER.pack(len(payload), self.depth) + payload)
        self.messages_sent += 1

    def recv(self) -> list:
        length, depth = _HEADER.unpack(self._recv_exact(_HEADER.size))
        if length > _MAX_FRAME:
            raise ChannelError(f"Malformed message: declared length {length} exceeds 2^31.")
        items = _decode(self._recv_exact(length))
        self.depth = max(self.depth, depth + 1)
        return items

    def recv_one(self) -> object:
        items = self.recv()
        if len(items) != 1:
            raise ChannelError(f"Expected a message of one item, got {len(items)}.")
        return items[0]

    def exchange(self, *items: object) -> list:
        """Send and receive at the same time (one latency for both directions)."""
        self.send(*items)
        return self.recv()

    def send_ring(self, values: np.ndarray, bits: int) -> None:
        """Send ring elements mod ``2^bits`` (each must be ``< 2^bits``; none is cut silently)."""
        from trustlab.methods.jaguar.checks import as_ring_array

        bits = _check_bits(bits, "Channel.send_ring")
        if not (isinstance(values, np.ndarray) and values.dtype == np.uint64):
            values = as_ring_array(values, "values", "Channel.send_ring", bits)
        elif bits < 64 and values.size and int(values.max()) >> bits:
            raise InputError(f"The 'values' parameter of Channel.send_ring must hold values below "
                             f"2^bits={bits}. Got {int(values.max())}.")
        self.send(pack_ring(values, bits))

    def recv_ring(self, bits: int, shape: tuple[int, ...]) -> np.ndarray:
        bits = _check_bits(bits, "Channel.recv_ring")
        from trustlab.methods.jaguar.checks import as_int_array

        shape = tuple(int(v) for v in as_int_array(shape, "shape", "Channel.recv_ring", ndim=1,
                                                   lo=0, allow_empty=True))
        data = self.recv_one()
        if not isinstance(data, np.ndarray):
            raise ChannelError("Expected a packed ring message.")
        count = int(np.prod(shape, dtype=np.int64))
        return unpack_ring(data, bits, count).reshape(shape)

    def exchange_ring(self, values: np.ndarray, bits: int) -> np.ndarray:
        self.send_ring(values, bits)
        return self.recv_ring(bits, np.shape(values))

    def stats(self) -> ChannelStats:
        return ChannelStats(self.bytes_sent, self.bytes_received, self.messages_sent, self.depth)


def channel_pair(timeout: float = 60.0) -> tuple[Channel, Channel]:
    """Two connected channels (server, client) over a local socket pair, for threads or tests.

    The handshake needs both ends alive, so the client end is built in a helper thread.
    """
    timeout = _check_timeout(timeout, "timeout", "channel_pair")
    a, b = socket.socketpair()
    box: dict = {}

    def make_client() -> None:
        try:
            box["c"] = Channel(b, 1, timeout)
        except BaseException as exc:  # pragma: no cover - re-raised below
            box["e"] = exc

    t = threading.Thread(target=make_client)
    t.start()
    server = Channel(a, 0, timeout)
    t.join()
    if "e" in box:
        raise box["e"]
    return server, box["c"]


def _check_address(host: str, port: int, where: str, lo: int) -> tuple[str, int]:
    from trustlab.methods.jaguar.checks import check_int

    if not isinstance(host, str) or not host:
        raise InputError(f"The 'host' parameter of {where} must be a host name or address. Got "
                         f"{host!r}.")
    return host, check_int(port, "port", where, lo=lo, hi=65535)


def listen(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket (``port=0`` picks a free one: read ``sock.getsockname()[1]``)."""
    host, port = _check_address(host, port, "listen", lo=0)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(1)
    return srv


def accept(srv: socket.socket, timeout: float = 60.0) -> Channel:
    """Wait at most ``timeout`` s for the client and return the server's channel."""
    if not isinstance(srv, socket.socket):
        raise InputError(f"The 'srv' parameter of accept must be a listening socket (see listen). "
                         f"Got {type(srv).__name__}.")
    timeout = _check_timeout(timeout, "timeout", "accept")
    srv.settimeout(timeout)
    try:
        conn, _ = srv.accept()
    except TimeoutError as exc:
        raise ChannelError(f"No client connected within {timeout:.0f} s.") from exc
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Channel(conn, 0, timeout)


def connect(host: str, port: int, timeout: float = 60.0, retry_s: float = 10.0) -> Channel:
    """Connect to a serving party (retrying for ``retry_s`` s while it starts up)."""
    host, port = _check_address(host, port, "connect", lo=1)
    timeout = _check_timeout(timeout, "timeout", "connect")
    retry_s = check_scalar(retry_s, "retry_s", "connect", lo=0, hi=1e6)
    deadline = time.monotonic() + retry_s
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                raise ChannelError(f"Could not connect to {host}:{port}: {exc}.") from exc
            time.sleep(0.05)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Channel(sock, 1, timeout)
