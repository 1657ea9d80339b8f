"""aioproducer: an asyncio-native Apache Kafka producer with the Java producer's semantics."""

from importlib import metadata as _metadata

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
    "check_topic",
    "errors",
    "types",
]
# pyproject.toml's version is the one source: read from the installed distribution's metadata.
try:
    __version__: str = _metadata.version("aioproducer")
except _metadata.PackageNotFoundError:  # a bare source tree on sys.path, never installed
    __version__ = "0+unknown"
