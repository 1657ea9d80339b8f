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
"""

from __future__ import annotations

import enum
import gzip
import struct
import threading
import zlib

import cramjam
import lz4.frame
import zstandard

__all__ = ["Codec", "codec_from_name", "compress", "decompress"]


class Codec(enum.IntEnum):
    """Compression codec ids, as stored in bits 0-2 of batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_NAMES = {codec.name.lower(): codec for codec in Codec}


def codec_from_name(name: str) -> Codec:
    """Map a ``compression.type`` config value to a :class:`Codec`."""
    try:
        return _NAMES[name.strip().lower()]
    except (KeyError, AttributeError):
        allowed = ", ".join(_NAMES)
        raise ValueError(f"unknown compression type {name!r}; allowed: {allowed}") from None


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


def compress(codec: Codec, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress a batch's records section with ``codec``.

    ``level`` is codec specific (KIP-390); ``None`` picks the codec default.
    Snappy has no levels and ignores it.
    """
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        # mtime=0 makes the output deterministic and takes the one-shot
        # zlib path instead of the streaming GzipFile.
        return gzip.compress(
            data, compresslevel=_GZIP_DEFAULT_LEVEL if level is None else level, mtime=0
        )
    if codec == Codec.SNAPPY:
        return _snappy_compress(data)
    if codec == Codec.LZ4:
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
    if codec == Codec.ZSTD:
        return _zstd_compressor(_ZSTD_DEFAULT_LEVEL if level is None else level).compress(data)
    raise ValueError(f"unknown compression codec {codec!r}")


# What the codecs raise on malformed input (lz4 raises a bare RuntimeError).
_DECOMPRESS_ERRORS = (
    OSError,
    EOFError,
    RuntimeError,
    zlib.error,
    zstandard.ZstdError,
    cramjam.DecompressionError,
)


def decompress(codec: Codec, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a batch's records section; raise ``ValueError`` if malformed."""
    try:
        if codec == Codec.NONE:
            return bytes(data)
        if codec == Codec.GZIP:
            return gzip.decompress(data)
        if codec == Codec.SNAPPY:
            return _snappy_decompress(data)
        if codec == Codec.LZ4:
            plain: bytes = lz4.frame.decompress(data)  # lz4 is untyped
            return plain
        if codec == Codec.ZSTD:
            return _zstd_decompress(data)
    except ValueError:
        raise
    except _DECOMPRESS_ERRORS as exc:
        # Each library has its own error types; callers only need "malformed".
        raise ValueError(f"cannot decompress {Codec(codec).name} data: {exc}") from exc
    raise ValueError(f"unknown compression codec {codec!r}")
