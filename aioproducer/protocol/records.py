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

import operator
import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from crc32c import crc32c

from .._speedups import COMPILED, kernels
from .compression import Codec, compress
from .record_args import (
    LENGTH_TYPES,
    check_timestamp,
    index_arg,
    int_arg,
    length_arg,
    plain,
    plain_at,
    ranged,
    type_error,
)
from .record_runs import encode_uniform_run, encode_unkeyed_loop, plain_run
from .varint import _SMALL_UVARINT, encode_uvarint, size_of_varint

__all__ = [
    "COMPILED",
    "MAX_RECORD_OVERHEAD",
    "RECORD_BATCH_OVERHEAD",
    "CorruptBatchError",
    "RecordBatchBuilder",
    "RecordBatchBuilderPy",
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

# Every unsigned varint below 2**14 (nearly all lengths and deltas), looked up on
# the append path. A tuple: untracked by the cyclic collector after its first pass.
_TABLE_LIMIT = 1 << 14
_UVARINT: tuple[bytes, ...] = _SMALL_UVARINT + tuple(
    bytes(((value & 0x7F) | 0x80, value >> 7)) for value in range(128, _TABLE_LIMIT)
)
_UNIFORM_MIN_RUN = 32  # records from which encode_uniform_run beats the loop
_NULL = _UVARINT[1]  # zigzag(-1)
_ZERO = _UVARINT[0]
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_SEALED = "cannot append to a record batch after build()"
_CHANGED = "the record batch changed while a run was appended to it"


def _uvarint(value: int) -> bytes:
    """Unsigned varint of a non-negative value (the slow path)."""
    return _UVARINT[value] if value < _TABLE_LIMIT else encode_uvarint(value)


def _varint_bytes(value: int) -> bytes:
    """Zigzag varint of a value in the int64 range."""
    zz = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return _UVARINT[zz] if zz < _TABLE_LIMIT else _uvarint(zz)


def _delta_bytes(ts: int, base: int) -> bytes:
    """The timestamp delta's varint, past the lookup's fast path: both checked."""
    check_timestamp(ts)
    delta = ts - base
    if not _INT64_MIN <= delta <= _INT64_MAX:
        raise ValueError(
            f"timestamp_ms {ts} is too far from the batch's base timestamp {base}: "
            "their difference does not fit in 64 bits"
        )
    return _varint_bytes(delta)


def _headers_bytes_pure(headers: Iterable[Any]) -> bytes:
    """Encode a record's header count and headers, read from a snapshot of them.

    ``headers`` is any iterable of (name, value) pairs; a name is a str (as
    UTF-8) or bytes-like, a value bytes-like or None.
    """
    pairs = headers if type(headers) is tuple else tuple(headers)
    table = _UVARINT
    n = len(pairs)
    out = bytearray(table[n << 1] if n < 8192 else _varint_bytes(n))
    for i, item in enumerate(pairs):
        pair = item if type(item) is tuple else tuple(item)
        if len(pair) != 2:
            raise ValueError(f"headers[{i}] must be a (name, value) pair, got {len(pair)} items")
        name, hvalue = pair
        if issubclass(type(name), str):
            kb: bytes | memoryview = str.encode(name)  # a subclass's own encode() never runs
        else:
            try:
                kb = plain(name, "")
            except TypeError:
                raise type_error(
                    name, f"headers[{i}]", "name must be a str or bytes-like"
                ) from None
        klen = len(kb)
        out += table[klen << 1] if klen < 8192 else _varint_bytes(klen)
        out += kb
        if hvalue is None:
            out += _NULL
        else:
            try:
                vb = hvalue if type(hvalue) is bytes else plain(hvalue, "")
            except TypeError:
                raise type_error(
                    hvalue, f"headers[{i}]", "value must be bytes-like or None"
                ) from None
            vlen = len(vb)
            out += table[vlen << 1] if vlen < 8192 else _varint_bytes(vlen)
            out += vb
    return bytes(out)


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


class RecordBatchBuilderPy:
    """Accumulates records into one v2 batch: the readable reference.

    :data:`RecordBatchBuilder` is the compiled twin (aioproducer/_speedups/_builder.c)
    when the kernels are built, this class otherwise; both write the same bytes
    and answer, and raise, alike. Records are encoded as they are appended into a
    single ``bytearray`` that starts with room for the batch header; :meth:`build`
    writes the header there, when the producer state is known. An uncompressed
    batch's bytes may be that buffer (here) or a copy (the compiled twin): callers
    must not rely on either. After ``build`` starts, the builder is sealed:
    ``build`` may then run in a worker thread (compression releases the GIL) and
    be repeated with different producer state for retries.

    Inputs are read before the builder's state is: a key's or value's buffer, a
    header, a run's sequences may run the caller's code (even appending to this
    builder); a run whose records' code changed the builder appends nothing
    and raises RuntimeError.
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
        self.batch_size = operator.index(batch_size)
        self.is_transactional = bool(is_transactional)
        self.compression_level = (
            None if compression_level is None else operator.index(compression_level)
        )
        self.record_count = 0
        self.base_timestamp = -1
        self.max_timestamp = -1
        # The header's 61 bytes first: build() fills them in place.
        self._buf = bytearray(RECORD_BATCH_OVERHEAD)
        self._sealed = False
        self._payload: bytes | None = None

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
        key: Any,
        value: Any,
        headers: Iterable[tuple[str, Any]] | None = None,
    ) -> int | None:
        """Encode one record; return its offset delta.

        Returns ``None`` (and changes nothing) when the record would push the
        uncompressed batch past ``batch_size``, as Java's ``hasRoomFor``
        does. The first record is always accepted, however large. ``key`` and
        ``value`` are None or bytes-like (their bytes in C order); timestamps
        are int64, as are their deltas from the first record's.
        """
        # Hot path: everything is inlined; small varints come from a table.
        if self._sealed:
            raise RuntimeError(_SEALED)
        if type(timestamp_ms) is not int:
            timestamp_ms = int_arg(timestamp_ms, "timestamp_ms")
        if key is None:
            kpre = _NULL
            key = b""
        else:
            if type(key) is not bytes:
                key = plain(key, "key")
            klen = len(key)
            kpre = _UVARINT[klen << 1] if klen < 8192 else _uvarint(klen << 1)
        if value is None:
            vpre = _NULL
            value = b""
        else:
            if type(value) is not bytes:
                value = plain(value, "value")
            vlen = len(value)
            vpre = _UVARINT[vlen << 1] if vlen < 8192 else _uvarint(vlen << 1)
        hdr = _ZERO if headers is None else _headers_bytes_pure(headers)
        # The state from here on: the code above may have built the batch.
        if self._sealed:
            raise RuntimeError(_SEALED)
        count = self.record_count
        if count:
            delta = timestamp_ms - self.base_timestamp
            # zigzag(delta) is 2 * delta for the usual small non-negative delta.
            if 0 <= delta < 8192 and timestamp_ms <= _INT64_MAX:
                ts = _UVARINT[delta << 1]
            else:
                ts = _delta_bytes(timestamp_ms, self.base_timestamp)
            off = _UVARINT[count << 1] if count < 8192 else _uvarint(count << 1)
        else:
            check_timestamp(timestamp_ms)
            ts = off = _ZERO
        # Everything after the length prefix (attributes, always 0 for producer
        # records, deltas, key, value, headers), joined first: its length is
        # then the record's size, with no sum of the parts' sizes.
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

    def append_run(
        self,
        timestamp_ms: int,
        values: Sequence[Any],
        start: int,
        stop: int,
        keys: Sequence[Any] | None = None,
        headers: Iterable[tuple[str, Any]] | None = None,
        order: Sequence[Any] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> int:
        """Encode ``values[start:stop]`` (with ``keys`` if given) as far as they fit.

        With ``order``, the records are ``values[i]`` for each ``i`` of
        ``order[start:stop]`` instead. Every record gets ``timestamp_ms`` and
        ``headers``. Returns how many records were appended; the batch is full
        when that is short of ``stop - start``. All or nothing: on an error no
        record is appended. ``lengths`` (each value's length, -1 for None) is a
        hint: unkeyed runs of one value length skip the loop (see :mod:`.record_runs`).
        """
        if self._sealed:
            raise RuntimeError(_SEALED)
        if type(timestamp_ms) is not int:
            timestamp_ms = int_arg(timestamp_ms, "timestamp_ms")
        start, stop = index_arg(start), index_arg(stop)
        hdr = _ZERO if headers is None else _headers_bytes_pure(headers)
        indices: Sequence[Any] = range(start, stop) if order is None else tuple(order[start:stop])
        if self._sealed:  # the code above (headers, order) may have built the batch
            raise RuntimeError(_SEALED)
        count = first = self.record_count
        if count:
            ts = _delta_bytes(timestamp_ms, self.base_timestamp)
        else:
            check_timestamp(timestamp_ms)
            ts = _ZERO
        fixed = _ZERO + ts  # attributes byte and timestamp delta
        base_size = 1 + len(ts) + len(hdr)
        table = _UVARINT
        buf_len = len(self._buf)
        room = self.batch_size - buf_len
        parts: list[bytes | bytearray | memoryview] = []
        extend = parts.extend
        uniform = -1
        if (
            keys is None
            and order is None
            and lengths is not None
            and type(lengths) in LENGTH_TYPES
            and stop - start >= _UNIFORM_MIN_RUN
            and 0 <= start
            and stop <= len(lengths)
        ):
            # Only the records that could fit are looked at: a record takes at
            # least 7 bytes besides its value (one per varint and attributes).
            # Past them the batch is full whatever the lengths are.
            window = min(stop, start + max(0, room) // (max(0, lengths[start]) + 7) + 1)
            run = lengths[start:window]
            # Taken only if the values really are plain bytes of that length.
            if (
                len(run) >= _UNIFORM_MIN_RUN
                and run[0] >= 0
                and min(run) == max(run)
                and plain_run(values, start, window, run[0])
            ):
                uniform = run[0]
        if uniform >= 0:
            count += encode_uniform_run(
                parts, values, start, window, uniform, fixed, hdr, count, room
            )
        elif keys is None:
            count = encode_unkeyed_loop(
                parts, values, indices, fixed, hdr, count, room, table, plain_at
            )
        else:
            for i in indices:
                value = values[i]
                key = None if keys is None else keys[i]
                if key is None:
                    kpre, klen = _NULL, 0
                else:
                    if type(key) is not bytes:
                        key = plain_at(key, "keys", i)
                    klen = len(key)
                    kpre = table[klen << 1] if klen < 8192 else _uvarint(klen << 1)
                if value is None:
                    vpre, vlen = _NULL, 0
                else:
                    if type(value) is not bytes:
                        value = plain_at(value, "values", i)
                    vlen = len(value)
                    vpre = table[vlen << 1] if vlen < 8192 else _uvarint(vlen << 1)
                off = table[count << 1] if count < 8192 else _uvarint(count << 1)
                size = base_size + len(off) + len(kpre) + klen + len(vpre) + vlen
                lpre = table[size << 1] if size < 8192 else _uvarint(size << 1)
                size += len(lpre)
                if size > room and count:
                    break
                room -= size
                extend((lpre, fixed, off, kpre, key or b"", vpre, value or b"", hdr))
                count += 1
        # The records' code (a __getitem__, an __index__, a buffer) ran meanwhile.
        if self._sealed or self.record_count != first or len(self._buf) != buf_len:
            raise RuntimeError(_CHANGED)
        if count > first:
            self._buf += b"".join(parts)
            self.record_count = count
            if not first:
                self.base_timestamp = self.max_timestamp = timestamp_ms
            elif timestamp_ms > self.max_timestamp:
                self.max_timestamp = timestamp_ms
        return count - first

    def has_room_for(
        self,
        key_len: int | None,
        value_len: int | None,
        headers: Iterable[tuple[str, Any]] | None = None,
        timestamp_ms: int | None = None,
    ) -> bool:
        """Whether :meth:`append` would accept such a record.

        A length of None or below 0 is a null key or value. Without
        ``timestamp_ms`` the timestamp delta is taken at its widest, so the
        answer errs on the side of starting a new batch.
        """
        lengths = (length_arg(key_len, "key_len"), length_arg(value_len, "value_len"))
        hlen = 1 if headers is None else len(_headers_bytes_pure(headers))
        if timestamp_ms is not None:
            timestamp_ms = int_arg(timestamp_ms, "timestamp_ms")
        if self._sealed:
            return False
        if timestamp_ms is not None:
            check_timestamp(timestamp_ms)
        if not self.record_count:
            return True
        if timestamp_ms is None:
            ts_size = 10
        else:
            ts_size = len(_delta_bytes(timestamp_ms, self.base_timestamp))
        size = 1 + ts_size + size_of_varint(self.record_count) + hlen
        for length in lengths:
            size += 1 if length < 0 else size_of_varint(length) + length
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
        producer_id = ranged(producer_id, "producer_id", 64)
        producer_epoch = ranged(producer_epoch, "producer_epoch", 16)
        base_sequence = ranged(base_sequence, "base_sequence", 32)
        count = self.record_count
        if not count:
            raise ValueError("cannot build an empty record batch")
        self._sealed = True
        attributes = self.codec | (_TRANSACTIONAL_BIT if self.is_transactional else 0)
        buf = self._buf
        if self.codec == Codec.NONE:
            _TAIL.pack_into(
                buf,
                _ATTRIBUTES_OFFSET,
                attributes,
                count - 1,
                self.base_timestamp,
                self.max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                count,
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


# The one switch between the twins (see aioproducer._speedups): chosen here, once.
if TYPE_CHECKING:
    RecordBatchBuilder = RecordBatchBuilderPy
else:
    RecordBatchBuilder = RecordBatchBuilderPy if kernels is None else kernels.RecordBatchBuilder


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
