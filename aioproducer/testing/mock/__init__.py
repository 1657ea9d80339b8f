"""An in-process mock Kafka cluster for tests: real sockets, scripted faults.

:class:`MockCluster` starts one asyncio server per broker on loopback and
answers ApiVersions, Metadata, Produce, InitProducerId, FindCoordinator and
the transaction APIs with the protocol codecs of :mod:`aioproducer.protocol`.
What clients write is readable with :meth:`MockCluster.records`.

A cluster can be secured like a Kafka listener: TLS (``ssl_context``, mutual
TLS when the context requires client certificates) and SASL
(``sasl_mechanisms``: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER; KIP-368 session
lifetimes). The server side of SASL lives in :mod:`.sasl` and
:mod:`.sasl_session`, free of I/O, so other test servers can reuse it.
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
