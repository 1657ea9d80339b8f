"""aioproducer: an asyncio-native Apache Kafka producer with the Java producer's semantics."""

from __future__ import annotations

from array import array as _array
from importlib import metadata as _metadata
from typing import Any as _Any

from . import errors, types
from .config import ProducerConfig
from .engine.record_handle import RecordHandle
from .engine.validation import check_topic
from .errors import ProducerLoopError
from .producer import Producer
from .types import BulkProgress, BulkResult, BulkSendError, PreparedTransaction, RecordMetadata

__all__ = [
    "BulkProgress",
    "BulkResult",
    "BulkSendError",
    "PreparedTransaction",
    "Producer",
    "ProducerConfig",
    "ProducerLoopError",
    "RecordHandle",
    "RecordMetadata",
    "__version__",
    "arrow_key_partitions",
    "check_topic",
    "errors",
    "types",
]
# pyproject.toml's version is the one source: read from the installed distribution's metadata.
try:
    __version__: str = _metadata.version("aioproducer")
except _metadata.PackageNotFoundError:  # a bare source tree on sys.path, never installed
    __version__ = "0+unknown"


def arrow_key_partitions(keys: _Any, num_partitions: int) -> _array[int]:
    """The partition the default partitioner gives each key of a pyarrow array.

    ``keys`` is a binary or string array (large or chunked too); the result
    holds Java's ``toPositive(murmur2(key)) % num_partitions`` for each key,
    -1 for a null key (which the sticky partitioner places). The keys are
    hashed in numpy, never as Python objects: for grouping rows by partition
    before :meth:`Producer.enqueue_many`, as the Spark sink does. Needs numpy
    (the ``spark`` extra has it).
    """
    try:
        from .engine.partition_vector import arrow_key_partitions
    except ImportError as exc:  # numpy is not a core dependency
        raise ImportError(
            "arrow_key_partitions() needs numpy: pip install 'aioproducer[spark]'"
        ) from exc
    return arrow_key_partitions(keys, num_partitions)
