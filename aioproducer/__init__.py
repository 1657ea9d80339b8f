"""aioproducer: an asyncio-native Apache Kafka producer with the Java producer's semantics."""

from importlib import metadata as _metadata

from . import errors
from .bulk.progress import BulkProgress
from .bulk.result import BulkResult, BulkSendError
from .config import ProducerConfig
from .engine.record_handle import RecordHandle, RecordMetadata
from .engine.transactions import PreparedTransaction
from .errors import ProducerLoopError
from .producer import Producer

__all__ = [
    "BulkProgress", "BulkResult", "BulkSendError", "PreparedTransaction", "Producer", "ProducerConfig",
    "ProducerLoopError",
    "RecordHandle", "RecordMetadata", "__version__", "errors",
]
# pyproject.toml's version is the one source: read from the installed distribution's metadata.
try:
    __version__: str = _metadata.version("aioproducer")
except _metadata.PackageNotFoundError:  # a bare source tree on sys.path, never installed
    __version__ = "0+unknown"
