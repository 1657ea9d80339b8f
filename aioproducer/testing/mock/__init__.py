"""An in-process mock Kafka cluster for tests: real sockets, scripted faults.

:class:`MockCluster` starts one asyncio server per broker on loopback and
answers ApiVersions, Metadata, Produce, InitProducerId, FindCoordinator and
the transaction APIs with the protocol codecs of :mod:`aioproducer.protocol`.
What clients write is readable with :meth:`MockCluster.records`.
"""

from .cluster import MockCluster, PartitionState, TopicState
from .faults import RequestContext
from .handlers import SUPPORTED_VERSIONS
from .log import MockRecord

__all__ = [
    "SUPPORTED_VERSIONS",
    "MockCluster",
    "MockRecord",
    "PartitionState",
    "RequestContext",
    "TopicState",
]
