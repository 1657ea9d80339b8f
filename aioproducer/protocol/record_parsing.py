"""Reading record batches v2 back: the mock cluster's and the tests' decoder.

The layout is described in :mod:`.records`. Parsing checks what a broker
would (CRC, lengths that stay inside their batch and record) and raises
:class:`~.records.CorruptBatchError` on anything malformed.
"""

from __future__ import annotations

import dataclasses

from crc32c import crc32c

from .compression import Codec, decompress
from .records import (  # the layout's constants live with the encoder
    _ATTRIBUTES_OFFSET,
    _CODEC_MASK,
    _CONTROL_BIT,
    _FULL,
    _TIMESTAMP_TYPE_BIT,
    _TRANSACTIONAL_BIT,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    CorruptBatchError,
)
from .varint import decode_varint

__all__ = ["Record", "RecordBatch", "parse_record_batches"]


@dataclasses.dataclass(slots=True)
class Record:
    """One record as parsed from a batch, with absolute offset and timestamp."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclasses.dataclass
class RecordBatch:
    """A parsed v2 batch: its header fields and decompressed records."""

    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    codec: Codec
    is_transactional: bool
    is_control: bool
    timestamp_type: int  # 0 create time, 1 log-append time
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]


def parse_record_batches(
    data: bytes | bytearray | memoryview, *, verify_crc: bool = True
) -> list[RecordBatch]:
    """Parse concatenated v2 batches, e.g. a Produce request's or Fetch response's records.

    A truncated batch at the end (brokers may cut a fetch response mid-batch)
    is dropped silently; anything malformed raises :class:`CorruptBatchError`.
    """
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    end = len(view)
    pos = 0
    batches: list[RecordBatch] = []
    while end - pos >= RECORD_BATCH_OVERHEAD:
        (
            base_offset,
            length,
            leader_epoch,
            magic,
            crc,
            attributes,
            last_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = _FULL.unpack_from(view, pos)
        batch_end = pos + 12 + length
        if magic != MAGIC:
            raise CorruptBatchError(
                f"batch at byte {pos} has magic {magic}; only magic 2 is supported"
            )
        if length < RECORD_BATCH_OVERHEAD - 12:
            raise CorruptBatchError(f"batch at byte {pos} has invalid length {length}")
        if batch_end > end:
            break  # partial trailing batch
        if verify_crc:
            actual = crc32c(view[pos + _ATTRIBUTES_OFFSET : batch_end])
            if actual != crc:
                raise CorruptBatchError(
                    f"batch at byte {pos} fails its CRC check: "
                    f"stored {crc:#010x}, computed {actual:#010x}"
                )
        try:
            codec = Codec(attributes & _CODEC_MASK)
        except ValueError:
            raise CorruptBatchError(
                f"batch at byte {pos} uses unknown codec {attributes & _CODEC_MASK}"
            ) from None
        body = view[pos + RECORD_BATCH_OVERHEAD : batch_end]
        if codec != Codec.NONE:
            try:
                body = memoryview(decompress(codec, body))
            except ValueError as exc:
                raise CorruptBatchError(f"batch at byte {pos}: {exc}") from exc
        try:
            records = _parse_records(body, count, base_offset, base_ts)
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise CorruptBatchError(f"batch at byte {pos} has a malformed record: {exc}") from exc
        batches.append(
            RecordBatch(
                base_offset=base_offset,
                partition_leader_epoch=leader_epoch,
                magic=magic,
                crc=crc,
                attributes=attributes,
                codec=codec,
                is_transactional=bool(attributes & _TRANSACTIONAL_BIT),
                is_control=bool(attributes & _CONTROL_BIT),
                timestamp_type=1 if attributes & _TIMESTAMP_TYPE_BIT else 0,
                last_offset_delta=last_delta,
                base_timestamp=base_ts,
                max_timestamp=max_ts,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
                records=records,
            )
        )
        pos = batch_end
    return batches


def _parse_records(body: memoryview, count: int, base_offset: int, base_ts: int) -> list[Record]:
    if count < 0:
        raise ValueError(f"negative record count {count}")
    end = len(body)
    pos = 0
    records: list[Record] = []
    for index in range(count):
        length, pos = decode_varint(body, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise ValueError(f"record {index} length {length} runs past the batch")
        pos += 1  # attributes: unused in v2
        ts_delta, pos = decode_varint(body, pos)
        offset_delta, pos = decode_varint(body, pos)
        key, pos = _read_bytes(body, pos, record_end)
        value, pos = _read_bytes(body, pos, record_end)
        n_headers, pos = decode_varint(body, pos)
        if n_headers < 0:
            raise ValueError(f"record {index} has a negative header count")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(n_headers):
            hkey, pos = _read_bytes(body, pos, record_end)
            if hkey is None:
                raise ValueError(f"record {index} has a null header key")
            hvalue, pos = _read_bytes(body, pos, record_end)
            # As Java reads a header key (Utils.utf8: malformed bytes become U+FFFD),
            # never as a corrupt record: the broker does not check keys either.
            headers.append((hkey.decode("utf-8", "replace"), hvalue))
        if pos != record_end:
            raise ValueError(
                f"record {index} declares {length} bytes but its fields take {length + pos - record_end}"
            )
        records.append(Record(base_offset + offset_delta, base_ts + ts_delta, key, value, headers))
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after the {count} records the header declares")
    return records


def _read_bytes(body: memoryview, pos: int, limit: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(body, pos)
    if length < 0:
        if length != -1:
            raise ValueError(f"invalid length {length}")
        return None, pos
    stop = pos + length
    if stop > limit:
        raise ValueError(f"field of {length} bytes runs past its record")
    return bytes(body[pos:stop]), stop
