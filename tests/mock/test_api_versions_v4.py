"""ApiVersions v4 (KAFKA-17011): a supported feature's min version may be 0, on MockCluster.

Kafka 4.4 leaves such features out of v0-v3 answers; at v4 it lists them
(transaction.version 0-2). The client reads the finalized levels only, so the
answer changes nothing it decides: transactions v2 still follow the finalized
transaction.version.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer.protocol.generated import ApiVersionsRequest
from aioproducer.testing import MockCluster
from aioproducer.testing.mock import RequestContext
from aioproducer.testing.mock.handlers import api_versions_body
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio

TIMEOUT = 30.0
API_VERSIONS = 18
ADD_PARTITIONS_TO_TXN = 24


@pytest.mark.parametrize("transaction_version", [1, 2])
async def test_api_versions_v4_lists_min_zero_features_and_finalized_levels_still_rule(
    transaction_version: int,
) -> None:
    async with MockCluster(brokers=1, transaction_version=transaction_version) as cluster:
        cluster.create_topic("t", partitions=1)
        versions: list[int] = []

        def seen(request: ApiVersionsRequest, ctx: RequestContext) -> None:
            versions.append(ctx.api_version)

        cluster.intercept(API_VERSIONS, seen)
        async with make_producer(cluster, transactional_id="features") as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            async with p.transaction():
                await asyncio.wait_for(p.send("t", b"v"), TIMEOUT)
        # Every connection asked at v4, and was told of transaction.version 0-2.
        assert versions and set(versions) == {4}, versions
        # Transactions v2 add partitions implicitly (KIP-890); v1 registers them.
        added = cluster.request_count(ADD_PARTITIONS_TO_TXN)
        assert (added == 0) == (transaction_version == 2), added
        assert not cluster.handler_errors, cluster.handler_errors
        assert [r.value for r in cluster.records("t")] == [b"v"]


async def test_api_versions_v3_leaves_out_min_zero_features() -> None:
    assert api_versions_body(request_version=3).supported_features == []
    v4 = api_versions_body(request_version=4).supported_features
    assert [(f.name, f.min_version) for f in v4] == [("transaction.version", 0)]
