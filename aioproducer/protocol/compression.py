"""Compression codecs of record batches.

The codec id lives in bits 0-2 of a batch's ``attributes`` (KIP-98); the whole
records section after the 61-byte batch header is compressed as one blob.

Wire formats follow what the Java client writes, so brokers and other clients
read our batches and we read theirs:

* gzip: an RFC 1952 gzip member (Java wraps ``GZIPOutputStream``).
* snappy: snappy-java's "xerial" framing (magic, version, then big-endian
  length-prefixed raw snappy blocks of at most 32 KiB). Some clients write
  raw snappy instead, so :func:`decompress` accepts both.
* lz4: the LZ4 frame format (KIP-57 fixed the frame header checksum that
  pre-0.10 Java clients got wrong; magic v2 batches always use the fixed one).
* zstd: a zstd frame (KIP-110). Frames may omit the content size, as
  librdkafka's streaming compressor does.

Every codec call here runs in C and releases the GIL, so batches may be
(de)compressed in worker threads; the cached compressor objects are therefore
kept per thread where the library forbids sharing them.

Every codec is one row of :data:`CODECS` (id, name, compress, decompress,
level range); the configuration's checks read that table, :func:`compress`
and :func:`decompress` (which the mock broker calls too) do one dict lookup
per batch. The libraries are core dependencies, imported here.
docs/contributing.md has the recipe for adding one.
"""

from __future__ import annotations

import enum
import gzip
import struct
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import cramjam
import lz4.frame
import zstandard

__all__ = [
    "CODECS",
    "Codec",
    "CodecSpec",
    "check_level",
    "codec_from_name",
    "compress",
    "decompress",
]


class Codec(enum.IntEnum):
    """Compression codec ids, as stored in bits 0-2 of batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Default levels: gzip 6 is zlib's and Java's default (KIP-390); lz4 level 0 is
# the fast LZ4F mode librdkafka uses; zstd 3 is the library's default.
_GZIP_DEFAULT_LEVEL = 6
_ZSTD_DEFAULT_LEVEL = 3

# snappy-java's SnappyOutputStream header: magic, version 1, compatible version 1.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size
_BE_INT32 = struct.Struct(">i")


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_BE_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    if bytes(data[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    view = memoryview(data)
    pos = len(_XERIAL_HEADER)
    end = len(data)
    out = []
    while pos < end:
        if pos + 4 > end:
            raise ValueError("xerial snappy stream ends inside a block length")
        (size,) = _BE_INT32.unpack_from(view, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise ValueError("xerial snappy block runs past the end of the data")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + size])))
        pos += size
    return b"".join(out)


# ZstdCompressor/ZstdDecompressor objects are reusable (saving their context
# allocation, which dominates for small batches) but must not be used by two
# threads at once.
_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "zstd_c", None)
    if cache is None:
        cache = _local.zstd_c = {}
    cctx = cache.get(level)
    if cctx is None:
        cctx = cache[level] = zstandard.ZstdCompressor(level=level)
    return cctx


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    dctx: zstandard.ZstdDecompressor | None = getattr(_local, "zstd_d", None)
    if dctx is None:
        dctx = _local.zstd_d = zstandard.ZstdDecompressor()
    return dctx


def _zstd_decompress(data: bytes | bytearray | memoryview) -> bytes:
    dctx = _zstd_decompressor()
    if zstandard.frame_content_size(data) >= 0:
        # One-shot: the output size is known, so a single allocation.
        return dctx.decompress(data)
    # No content size in the frame header (streaming writers): grow as needed.
    return dctx.decompressobj().decompress(data)


Data = bytes | bytearray | memoryview


def _none(data: Data, level: int | None = None) -> bytes:
    return bytes(data)


def _gzip_compress(data: Data, level: int | None) -> bytes:
    # mtime=0 makes the output deterministic and takes the one-shot
    # zlib path instead of the streaming GzipFile.
    return gzip.compress(
        data, compresslevel=_GZIP_DEFAULT_LEVEL if level is None else level, mtime=0
    )


def _snappy_compress_any(data: Data, level: int | None) -> bytes:
    return _snappy_compress(data)  # snappy has no levels


def _lz4_compress(data: Data, level: int | None) -> bytes:
    # 64 KiB independent blocks, no content size: the frame parameters of
    # Java's KafkaLZ4BlockOutputStream. (lz4 is untyped: its functions return bytes.)
    framed: bytes = lz4.frame.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        store_size=False,
    )
    return framed


def _lz4_decompress(data: Data) -> bytes:
    plain: bytes = lz4.frame.decompress(data)  # lz4 is untyped
    return plain


def _zstd_compress(data: Data, level: int | None) -> bytes:
    return _zstd_compressor(_ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)


@dataclass(frozen=True)
class CodecSpec:
    """One compression codec: what the producer, the config and the mock need of it."""

    codec: Codec  # the id in bits 0-2 of the batch attributes
    name: str  # the compression.type value
    compress: Callable[[Data, int | None], bytes]
    decompress: Callable[[Data], bytes]
    #: Levels the library accepts (inclusive; None: no bound, it clamps), or
    #: None when the codec has no levels and ignores compression_level.
    levels: tuple[int | None, int | None] | None


CODECS: dict[Codec, CodecSpec] = {
    spec.codec: spec
    for spec in (
        CodecSpec(Codec.NONE, "none", _none, _none, None),
        # zlib: -1 (its default) to 9; Java allows 1-9 (KIP-390 GzipCompression).
        CodecSpec(Codec.GZIP, "gzip", _gzip_compress, gzip.decompress, (-1, 9)),
        CodecSpec(Codec.SNAPPY, "snappy", _snappy_compress_any, _snappy_decompress, None),
        # LZ4F clamps any level (0: fast mode; Java allows 1-17).
        CodecSpec(Codec.LZ4, "lz4", _lz4_compress, _lz4_decompress, (None, None)),
        # zstd clamps low levels (fast modes) and refuses above its maximum, 22.
        CodecSpec(
            Codec.ZSTD,
            "zstd",
            _zstd_compress,
            _zstd_decompress,
            (None, zstandard.MAX_COMPRESSION_LEVEL),
        ),
    )
}

_NAMES = {spec.name: spec.codec for spec in CODECS.values()}
# The hot path: one dict lookup from the codec id to its function.
_COMPRESS = {codec: spec.compress for codec, spec in CODECS.items()}
_DECOMPRESS = {codec: spec.decompress for codec, spec in CODECS.items()}


def codec_from_name(name: str) -> Codec:
    """Map a ``compression.type`` config value to a :class:`Codec`."""
    try:
        return _NAMES[name.strip().lower()]
    except (KeyError, AttributeError):
        allowed = ", ".join(_NAMES)
        raise ValueError(f"unknown compression type {name!r}; allowed: {allowed}") from None


def check_level(codec: Codec, level: object) -> None:
    """Raise TypeError or ValueError unless ``level`` is None or a level ``codec`` accepts."""
    if level is None:
        return
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"compression_level must be an int or None, got {level!r}")
    spec = CODECS[codec]
    if spec.levels is None:
        return  # ignored, as Java ignores compression.<codec>.level of another codec
    low, high = spec.levels
    if (low is not None and level < low) or (high is not None and level > high):
        bounds = f"{'' if low is None else low}..{'' if high is None else high}"
        raise ValueError(f"{spec.name} level must be in {bounds}, got {level}")


def compress(codec: Codec, data: Data, level: int | None = None) -> bytes:
    """Compress a batch's records section with ``codec``.

    ``level`` is codec specific (KIP-390); ``None`` picks the codec default.
    Snappy has no levels and ignores it.
    """
    try:
        fn = _COMPRESS[codec]
    except KeyError:
        raise ValueError(f"unknown compression codec {codec!r}") from None
    return fn(data, level)


# What the codecs raise on malformed input (lz4 raises a bare RuntimeError).
_DECOMPRESS_ERRORS = (
    OSError,
    EOFError,
    RuntimeError,
    zlib.error,
    zstandard.ZstdError,
    cramjam.DecompressionError,
)


def decompress(codec: Codec, data: Data) -> bytes:
    """Decompress a batch's records section; raise ``ValueError`` if malformed."""
    fn = _DECOMPRESS.get(codec)
    if fn is None:
        raise ValueError(f"unknown compression codec {codec!r}")
    try:
        return fn(data)
    except ValueError:
        raise
    except _DECOMPRESS_ERRORS as exc:
        # Each library has its own error types; callers only need "malformed".
        raise ValueError(f"cannot decompress {Codec(codec).name} data: {exc}") from exc
