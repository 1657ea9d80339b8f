"""aioproducer: an asyncio-native Apache Kafka producer with the Java producer's semantics."""

from . import errors, types
from .config import ProducerConfig
from .engine.record_handle import RecordHandle
from .engine.validation import check_topic
from .errors import ProducerLoopError
from .producer import Producer
from .types import BulkProgress, BulkResult, BulkSendError, PreparedTransaction, RecordMetadata

__all__ = [
    "BulkProgress", "BulkResult", "BulkSendError", "PreparedTransaction", "Producer", "ProducerConfig",
    "ProducerLoopError",
    "RecordHandle", "RecordMetadata", "__version__", "check_topic", "errors",
    "types",
]
__version__ = "0.1.0"
