"""FindCoordinator v5 and InitProducerId v5: the versions that tell the broker the client
handles TRANSACTION_ABORTABLE (KIP-890 part 1), on MockCluster, under transactions v1 and v2.

The answer makes an open transaction abortable: the call that met it raises
TransactionAbortableError, a commit is refused, the abort works and the next
transaction commits. Before any transaction (init_transactions) there is
nothing to abort: the producer stays uninitialized and the call may be repeated.
"""

from __future__ import annotations

import asyncio

import pytest

from aioproducer import errors
from aioproducer.testing import MockCluster
from aioproducer.testing.mock import RequestContext
from aioproducer.testing.mock.log import code_of
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio

TIMEOUT = 30.0
ABORTABLE = code_of(errors.TransactionAbortableError)
FIND_COORDINATOR = 10
INIT_PRODUCER_ID = 22


def _record_versions(cluster: MockCluster, api_key: int) -> list[int]:
    """The versions of every ``api_key`` request that the mock answers normally."""
    versions: list[int] = []

    def seen(request: object, ctx: RequestContext) -> None:
        versions.append(ctx.api_version)

    cluster.intercept(api_key, seen)
    return versions


@pytest.mark.parametrize("transaction_version", [1, 2])
async def test_find_coordinator_transaction_abortable_then_abort_and_go_on(
    transaction_version: int,
) -> None:
    async with MockCluster(brokers=1, transaction_version=transaction_version) as cluster:
        cluster.create_topic("t", partitions=1)
        versions = _record_versions(cluster, FIND_COORDINATOR)
        async with make_producer(cluster, transactional_id="abortable-find") as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            await p.begin_transaction()
            await asyncio.wait_for(p.send("t", b"voided"), TIMEOUT)
            # The group coordinator is looked up for the offsets: the lookup is refused.
            cluster.fail_api(FIND_COORDINATOR, ABORTABLE)
            with pytest.raises(errors.TransactionAbortableError, match="abort"):
                await asyncio.wait_for(p.send_offsets_to_transaction({("t", 0): 1}, "grp"), TIMEOUT)
            with pytest.raises(errors.IllegalStateError, match="abort"):
                await p.commit_transaction()
            await asyncio.wait_for(p.abort_transaction(), TIMEOUT)
            async with p.transaction():
                await asyncio.wait_for(p.send("t", b"next"), TIMEOUT)
                await asyncio.wait_for(p.send_offsets_to_transaction({("t", 0): 2}, "grp"), TIMEOUT)
        assert not cluster.faults.api_failures, "the scripted answer was not given"
        assert versions and set(versions) == {5}, versions
        assert [r.value for r in cluster.records("t")] == [b"next"]
        assert cluster.coordinator.committed_offsets == {"grp": {("t", 0): 2}}


@pytest.mark.parametrize("transaction_version", [1, 2])
async def test_init_producer_id_transaction_abortable_at_init_then_init_again(
    transaction_version: int,
) -> None:
    async with MockCluster(brokers=1, transaction_version=transaction_version) as cluster:
        cluster.create_topic("t", partitions=1)
        versions = _record_versions(cluster, INIT_PRODUCER_ID)
        async with make_producer(cluster, transactional_id="abortable-init") as p:
            cluster.fail_api(INIT_PRODUCER_ID, ABORTABLE)
            with pytest.raises(errors.TransactionAbortableError, match="init_transactions"):
                await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            # Nothing began: no transaction can be started before init succeeds.
            with pytest.raises(errors.IllegalStateError, match="init_transactions"):
                await p.begin_transaction()
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            async with p.transaction():
                await asyncio.wait_for(p.send("t", b"committed"), TIMEOUT)
        assert versions and set(versions) == {5}, versions
        assert [r.value for r in cluster.records("t")] == [b"committed"]


async def test_init_producer_id_transaction_abortable_during_an_abort_then_abort_again() -> None:
    """Under transactions v1 an abort after a refused batch bumps the epoch with
    InitProducerId (KIP-360); refused, the abort raises and is repeated."""
    invalid_epoch = code_of(errors.InvalidProducerEpochError)
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        versions = _record_versions(cluster, INIT_PRODUCER_ID)
        async with make_producer(cluster, transactional_id="abortable-bump") as p:
            await asyncio.wait_for(p.init_transactions(), TIMEOUT)
            await p.begin_transaction()
            cluster.fail_produce("t", 0, invalid_epoch)
            with pytest.raises(errors.InvalidProducerEpochError):
                await asyncio.wait_for(p.send("t", b"refused"), TIMEOUT)
            inits = cluster.request_count(INIT_PRODUCER_ID)
            cluster.fail_api(INIT_PRODUCER_ID, ABORTABLE)
            with pytest.raises(errors.TransactionAbortableError):
                await asyncio.wait_for(p.abort_transaction(), TIMEOUT)
            assert cluster.request_count(INIT_PRODUCER_ID) == inits + 1
            await asyncio.wait_for(p.abort_transaction(), TIMEOUT)
            assert cluster.request_count(INIT_PRODUCER_ID) == inits + 2
            async with p.transaction():
                await asyncio.wait_for(p.send("t", b"next"), TIMEOUT)
        assert versions and set(versions) == {5}, versions
        assert [r.value for r in cluster.records("t")] == [b"next"]
