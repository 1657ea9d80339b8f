"""aioproducer against a MockCluster with TLS and SASL: every mechanism, both transports.

The mock checks credentials, certificates and session lifetimes the way a
Kafka broker does (its own tests prove that with librdkafka); here the
producer's records must arrive, in order, once, through every security setting.
"""

from __future__ import annotations

import pytest

from aioproducer import Producer
from aioproducer.testing import MockCluster
from tests.security.client_matrix import CASES, Case, produce_and_check
from tests.support.aio import within
from tests.support.certs import Pki

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_matrix(case: Case, pki: Pki) -> None:
    async with MockCluster(brokers=3, default_partitions=4, **case.server_kwargs(pki)) as cluster:
        producer = Producer(cluster.bootstrap_servers, linger_ms=2, **case.client_kwargs(pki))
        await within(producer.start(), 10, "start")
        try:
            await produce_and_check(cluster, producer, "secure-topic")
        finally:
            await within(producer.close(), 10, "close")
        if case.mechanism is not None:
            # Bootstrap plus the leaders: at least one login per broker used.
            assert cluster.sasl_authentications >= 3
            assert cluster.sasl_authentications_by_mechanism().keys() == {case.mechanism}
            assert cluster.sasl_failures == 0
