"""Record batches, message format v2 (magic 2, KIP-98).

Batch layout (big-endian, 61-byte header)::

    offset  size  field
         0     8  baseOffset              (0 from producers; the broker assigns)
         8     4  batchLength             (bytes after this field)
        12     4  partitionLeaderEpoch    (set by the broker, KIP-101)
        16     1  magic                   (2)
        17     4  crc                     (CRC-32C of bytes 21..end)
        21     2  attributes              (bits 0-2 codec, 3 timestamp type,
                                           4 transactional, 5 control)
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61     -  records (the whole section compressed per codec)

Each record is ``length: varint`` followed by ``attributes: int8,
timestampDelta: varlong, offsetDelta: varint, keyLength: varint, key,
valueLength: varint, value, headerCount: varint, headers``, each header being
``keyLength: varint, key (UTF-8), valueLength: varint, value``. Null keys,
values and header values have length -1. All varints are zigzag encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from crc32c import crc32c

from .._speedups import COMPILED, kernels
from .compression import Codec, compress
from .record_runs import encode_uniform_run
from .varint import _SMALL_UVARINT, encode_uvarint, size_of_varint

__all__ = [
    "COMPILED",
    "MAX_RECORD_OVERHEAD",
    "RECORD_BATCH_OVERHEAD",
    "CorruptBatchError",
    "RecordBatchBuilder",
    "estimate_record_size",
    "headers_size",
    "restamp_producer_state",
]

RECORD_BATCH_OVERHEAD = 61
# A record's fixed fields at their widest: length (5) + attributes (1) +
# timestampDelta (10) + offsetDelta (5), as Java's DefaultRecord counts them.
MAX_RECORD_OVERHEAD = 21

MAGIC = 2
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21
_PRODUCER_ID_OFFSET = 43
_NO_PARTITION_LEADER_EPOCH = -1  # what the Java producer sends

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

# Header split around the CRC: the CRC covers everything from attributes on.
_HEAD = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC = struct.Struct(">I")
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_FULL = struct.Struct(">qiibIhiqqqhii")
_PRODUCER_STATE = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
assert _FULL.size == RECORD_BATCH_OVERHEAD

# Every unsigned varint of one or two bytes (values below 2**14), looked up
# rather than computed on the append path: record lengths, key/value lengths
# and offset/timestamp deltas are nearly always in this range. ~700 KB, built
# in a few milliseconds at import. A tuple, not a list: a tuple of bytes is
# untracked by the cyclic garbage collector after its first pass, so full
# collections do not walk its 16,384 entries again and again.
_TABLE_LIMIT = 1 << 14
_UVARINT: tuple[bytes, ...] = _SMALL_UVARINT + tuple(
    bytes(((value & 0x7F) | 0x80, value >> 7)) for value in range(128, _TABLE_LIMIT)
)
_UNIFORM_MIN_RUN = 32  # records from which encode_uniform_run beats the loop
_NULL = _UVARINT[1]  # zigzag(-1)
_ZERO = _UVARINT[0]


def _uvarint(value: int) -> bytes:
    """Unsigned varint of a non-negative value (the slow path)."""
    return _UVARINT[value] if value < _TABLE_LIMIT else encode_uvarint(value)


def _headers_bytes_pure(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    """Encode a record's header count and headers."""
    table = _UVARINT
    n = len(headers)
    out = bytearray(table[n << 1] if n < 8192 else _varint_bytes(n))
    for hkey, hvalue in headers:
        kb = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
        klen = len(kb)
        out += table[klen << 1] if klen < 8192 else _varint_bytes(klen)
        out += kb
        if hvalue is None:
            out += _NULL
        else:
            vlen = len(hvalue)
            out += table[vlen << 1] if vlen < 8192 else _varint_bytes(vlen)
            out += hvalue
    return bytes(out)


def _varint_bytes(value: int) -> bytes:
    zz = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return _UVARINT[zz] if zz < _TABLE_LIMIT else _uvarint(zz)


# The compiled twins when built (see aioproducer._speedups), else the references:
# _headers_bytes_pure above, and for _encode_run the loops of append_run.
_headers_bytes = kernels.headers_bytes if kernels is not None else _headers_bytes_pure
_encode_run = kernels.encode_run if kernels is not None else None


def headers_size(headers: Sequence[tuple[str, bytes | None]] | None) -> int:
    """Encoded size of a record's header section (count included)."""
    if not headers:
        return 1
    size = size_of_varint(len(headers))
    for hkey, hvalue in headers:
        klen = len(hkey.encode()) if isinstance(hkey, str) else len(hkey)
        size += size_of_varint(klen) + klen
        size += 1 if hvalue is None else size_of_varint(len(hvalue)) + len(hvalue)
    return size


def estimate_record_size(
    key_len: int | None,
    value_len: int | None,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
) -> int:
    """Upper bound of a batch holding just this record, batch header included.

    Mirrors Java's ``AbstractRecords.estimateSizeInBytesUpperBound``: used to
    reject a record larger than ``max.request.size`` before it is buffered.
    A length of ``None`` or -1 means a null key/value.
    """
    size = RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + headers_size(headers)
    for length in (key_len, value_len):
        if length is None or length < 0:
            size += 1
        else:
            size += size_of_varint(length) + length
    return size


class RecordBatchBuilder:
    """Accumulates records into one v2 batch.

    Records are encoded as they are appended into a single ``bytearray`` that
    starts with room for the batch header; :meth:`build` writes the header
    there, when the producer state is known, so an uncompressed batch is never
    copied to be sent: what ``build`` returns for it is that buffer, and a
    later ``build`` (another producer state) rewrites its header. Copy it to
    keep one build's bytes. After ``build`` starts, the builder is sealed: ``build`` may then
    run in a worker thread (compression releases the GIL) and be repeated with
    different producer state for retries.
    """

    __slots__ = (
        "_buf",
        "_payload",
        "_sealed",
        "base_timestamp",
        "batch_size",
        "codec",
        "compression_level",
        "is_transactional",
        "max_timestamp",
        "record_count",
    )

    def __init__(
        self,
        *,
        codec: Codec = Codec.NONE,
        batch_size: int = 16384,
        is_transactional: bool = False,
        compression_level: int | None = None,
    ) -> None:
        # An enum call costs a microsecond, once per batch: only a plain int pays it.
        self.codec = codec if type(codec) is Codec else Codec(codec)
        self.batch_size = batch_size
        self.is_transactional = is_transactional
        self.compression_level = compression_level
        self.record_count = 0
        self.base_timestamp = -1
        self.max_timestamp = -1
        # The header's 61 bytes first: build() fills them in place.
        self._buf = bytearray(RECORD_BATCH_OVERHEAD)
        self._sealed = False
        self._payload: bytes | bytearray | None = None

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed encoded size so far, the 61-byte header included."""
        return len(self._buf)

    @property
    def is_sealed(self) -> bool:
        """True once :meth:`build` has been called; appends are then refused."""
        return self._sealed

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> int | None:
        """Encode one record; return its offset delta.

        Returns ``None`` (and changes nothing) when the record would push the
        uncompressed batch past ``batch_size``, as Java's ``hasRoomFor``
        does. The first record is always accepted, however large.
        """
        # Hot path: everything is inlined; small varints come from a table.
        if self._sealed:
            raise RuntimeError("cannot append to a record batch after build()")
        count = self.record_count
        if count:
            delta = timestamp_ms - self.base_timestamp
            # zigzag(delta) is 2 * delta for the usual small non-negative delta.
            ts = _UVARINT[delta << 1] if 0 <= delta < 8192 else _varint_bytes(delta)
            off = _UVARINT[count << 1] if count < 8192 else _uvarint(count << 1)
        else:
            ts = off = _ZERO
        if key is None:
            kpre = _NULL
            key = b""
        else:
            klen = len(key)
            kpre = _UVARINT[klen << 1] if klen < 8192 else _uvarint(klen << 1)
        if value is None:
            vpre = _NULL
            value = b""
        else:
            vlen = len(value)
            vpre = _UVARINT[vlen << 1] if vlen < 8192 else _uvarint(vlen << 1)
        # Everything after the length prefix (attributes, always 0 for producer
        # records, deltas, key, value, headers), joined first: its length is
        # then the record's size, with no sum of the parts' sizes.
        hdr = _headers_bytes_pure(headers) if headers else _ZERO
        body = b"".join((_ZERO, ts, off, kpre, key, vpre, value, hdr))
        size = len(body)
        lpre = _UVARINT[size << 1] if size < 8192 else _uvarint(size << 1)
        buf = self._buf
        if count and len(buf) + len(lpre) + size > self.batch_size:
            return None
        buf += lpre
        buf += body
        if count:
            if timestamp_ms > self.max_timestamp:
                self.max_timestamp = timestamp_ms
        else:
            self.base_timestamp = self.max_timestamp = timestamp_ms
        self.record_count = count + 1
        return count

    _append_pure = append  # the reference; tests compare the compiled twin with it

    def _append_compiled(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> int | None:
        """:meth:`append` with the record encoded by the C kernel (same bytes)."""
        if self._sealed:
            raise RuntimeError("cannot append to a record batch after build()")
        count = self.record_count
        delta = timestamp_ms - self.base_timestamp if count else 0
        if kernels.encode_record(  # type: ignore[union-attr]
            self._buf, self.batch_size, count, delta, key, value, headers
        ) < 0:
            return None
        if count:
            if timestamp_ms > self.max_timestamp:
                self.max_timestamp = timestamp_ms
        else:
            self.base_timestamp = self.max_timestamp = timestamp_ms
        self.record_count = count + 1
        return count

    if COMPILED:
        append = _append_compiled

    def append_run(
        self,
        timestamp_ms: int,
        values: Sequence[bytes | bytearray | memoryview | None],
        start: int,
        stop: int,
        keys: Sequence[bytes | bytearray | memoryview | None] | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        order: Sequence[int] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> int:
        """Encode ``values[start:stop]`` (with ``keys`` if given) as far as they fit.

        With ``order``, the records are ``values[order[start]]``,
        ``values[order[start + 1]]`` ... instead. Every record gets
        ``timestamp_ms`` and ``headers``. Returns how many records were
        appended; the batch is full when that is short of ``stop - start``.
        One loop and one buffer extend for the whole run: the bulk path's
        encoder. ``lengths`` (each value's length, -1 for None) lets unkeyed
        runs of one value length skip the loop (see :mod:`.record_runs`).
        """
        if self._sealed:
            raise RuntimeError("cannot append to a record batch after build()")
        count = self.record_count
        if not count:
            self.base_timestamp = self.max_timestamp = timestamp_ms
        ts = _varint_bytes(timestamp_ms - self.base_timestamp)
        hdr = _headers_bytes(headers) if headers else _ZERO
        fixed = _ZERO + ts  # attributes byte and timestamp delta
        base_size = 1 + len(ts) + len(hdr)
        table = _UVARINT
        room = self.batch_size - len(self._buf)
        parts: list[bytes | bytearray | memoryview] = []
        extend = parts.extend
        first = count
        indices = range(start, stop) if order is None else order[start:stop]
        uniform = -1
        # The compiled run encoder beats the uniform-run trick (which saves the
        # pure path its loop) at every size: with it, the trick is skipped.
        if _encode_run is None and keys is None and order is None and lengths is not None and stop > start:
            # Only the records that could fit are looked at: a record takes at
            # least 7 bytes besides its value (one per varint and attributes).
            # Past them the batch is full whatever the lengths are.
            window = min(stop, start + max(0, room) // (lengths[start] + 7) + 1)
            run = lengths[start:window]
            # Short runs (a loop of small calls) are cheaper through the loop.
            if len(run) >= _UNIFORM_MIN_RUN and run[0] >= 0 and min(run) == max(run):
                uniform = run[0]
        if uniform >= 0:
            count += encode_uniform_run(parts, values, start, window, uniform, fixed, hdr, count, room)  # type: ignore[arg-type]
        elif _encode_run is not None:
            # The C twin of the two loops below, writing straight into the buffer.
            ordered = None if order is None else order[start:stop]
            count = _encode_run(self._buf, room, count, fixed, hdr, values, keys, ordered, start, stop)
        elif keys is None:
            # Unkeyed: everything but the offset delta and the value is constant;
            # the value's length prefix is recomputed only when the length changes.
            head = fixed  # attributes, timestamp delta
            tail = _NULL  # null key, then the value's length
            last_len = -2
            vsize = 0
            vpre = _NULL
            for i in indices:
                value = values[i]
                vlen = -1 if value is None else len(value)
                if vlen != last_len:
                    last_len = vlen
                    if vlen < 0:
                        vpre, vsize = _NULL, 1
                    else:
                        vpre = table[vlen << 1] if vlen < 8192 else _uvarint(vlen << 1)
                        vsize = len(vpre) + vlen
                    tail = _NULL + vpre
                off = table[count << 1] if count < 8192 else _uvarint(count << 1)
                size = base_size + len(off) + 1 + vsize
                lpre = table[size << 1] if size < 8192 else _uvarint(size << 1)
                size += len(lpre)
                if size > room and count:
                    break
                room -= size
                extend((lpre, head, off, tail, value or b"", hdr))
                count += 1
        else:
            for i in indices:
                value = values[i]
                key = keys[i]
                klen = 0 if key is None else len(key)
                kpre = _NULL if key is None else table[klen << 1] if klen < 8192 else _uvarint(klen << 1)
                off = table[count << 1] if count < 8192 else _uvarint(count << 1)
                vlen = 0 if value is None else len(value)
                vpre = _NULL if value is None else table[vlen << 1] if vlen < 8192 else _uvarint(vlen << 1)
                size = base_size + len(off) + len(kpre) + klen + len(vpre) + vlen
                lpre = table[size << 1] if size < 8192 else _uvarint(size << 1)
                size += len(lpre)
                if size > room and count:
                    break
                room -= size
                extend((lpre, fixed, off, kpre, key or b"", vpre, value or b"", hdr))
                count += 1
        self._buf += b"".join(parts)
        self.record_count = count
        if count > first and timestamp_ms > self.max_timestamp:
            self.max_timestamp = timestamp_ms  # only when a record of this run went in
        return count - first

    def has_room_for(
        self,
        key_len: int | None,
        value_len: int | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        timestamp_ms: int | None = None,
    ) -> bool:
        """Whether :meth:`append` would accept such a record.

        Without ``timestamp_ms`` the timestamp delta is taken at its widest,
        so the answer errs on the side of starting a new batch.
        """
        if self._sealed:
            return False
        if not self.record_count:
            return True
        if timestamp_ms is None:
            ts_size = 10
        else:
            ts_size = size_of_varint(timestamp_ms - self.base_timestamp)
        size = 1 + ts_size + size_of_varint(self.record_count) + headers_size(headers)
        for length in (key_len, value_len):
            if length is None or length < 0:
                size += 1
            else:
                size += size_of_varint(length) + length
        size += size_of_varint(size)
        return len(self._buf) + size <= self.batch_size

    def build(
        self, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1
    ) -> bytes | bytearray:
        """Return the whole batch with the given producer state (KIP-98).

        An uncompressed batch is the builder's own buffer, its header written
        in place: calling ``build`` again (a retry with another producer
        state) rewrites that header. A compressed batch's records section is
        computed once and reused, so calling ``build`` again is cheap.
        """
        count = self.record_count
        if not count:
            raise ValueError("cannot build an empty record batch")
        self._sealed = True
        attributes = self.codec | (_TRANSACTIONAL_BIT if self.is_transactional else 0)
        buf = self._buf
        if self.codec == Codec.NONE:
            _TAIL.pack_into(
                buf, _ATTRIBUTES_OFFSET, attributes, count - 1, self.base_timestamp,
                self.max_timestamp, producer_id, producer_epoch, base_sequence, count,
            )
            _HEAD.pack_into(buf, 0, 0, len(buf) - 12, _NO_PARTITION_LEADER_EPOCH, MAGIC)
            _CRC.pack_into(buf, _CRC_OFFSET, crc32c(memoryview(buf)[_ATTRIBUTES_OFFSET:]))
            return buf
        payload = self._payload
        if payload is None:
            payload = compress(
                self.codec, memoryview(buf)[RECORD_BATCH_OVERHEAD:], self.compression_level
            )
            self._payload = payload
        tail = _TAIL.pack(
            attributes,
            count - 1,
            self.base_timestamp,
            self.max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
        crc = crc32c(payload, crc32c(tail))
        length = RECORD_BATCH_OVERHEAD - 12 + len(payload)
        head = _HEAD.pack(0, length, _NO_PARTITION_LEADER_EPOCH, MAGIC)
        return b"".join((head, _CRC.pack(crc), tail, payload))


def restamp_producer_state(
    batch: bytes | bytearray | memoryview,
    *,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    """Rewrite a built batch's producer id, epoch and base sequence.

    The records (compressed or not) are kept as they are; only the CRC is
    recomputed. Used when a retried batch must be re-sequenced or its epoch
    bumped after an idempotent producer resets (KIP-360).
    """
    out = bytearray(batch)
    if len(out) < RECORD_BATCH_OVERHEAD:
        raise CorruptBatchError(f"batch of {len(out)} bytes is shorter than its header")
    if out[16] != MAGIC:
        raise CorruptBatchError(f"cannot restamp a batch of magic {out[16]}")
    _PRODUCER_STATE.pack_into(out, _PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


class CorruptBatchError(ValueError):
    """A record batch failed validation (magic, CRC, lengths or records)."""
