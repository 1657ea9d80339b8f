"""A producer's started parts are one object, built by ``start()`` and kept through ``close()``.

Before ``start()`` the producer holds none of them and each call says so with the
error it always raised; once started every part is there (the transaction
manager only with a ``transactional_id``, the keyed lane only where keys hash to
their partition) and wired to the enqueue shortcut; after ``close()`` a call is
refused as closed, not as never started.
"""

from __future__ import annotations

import pytest

from aioproducer import Producer, errors
from aioproducer.engine.transactions import TransactionManager
from aioproducer.producer.running import Running
from aioproducer.testing import MockCluster
from tests.support.producers import make_producer

pytestmark = pytest.mark.asyncio

NOT_STARTED = r"call 'await producer\.start\(\)' first"


async def test_a_new_producer_holds_no_part_and_says_so() -> None:
    p = make_producer("localhost:1")
    assert p._running is None
    with pytest.raises(errors.IllegalStateError, match=NOT_STARTED):
        await p.flush()
    with pytest.raises(errors.IllegalStateError, match=NOT_STARTED):
        await p.partitions_for("t")
    with pytest.raises(errors.IllegalStateError, match=NOT_STARTED):
        await p.enqueue_many("t", [b"v"])
    with pytest.raises(errors.IllegalStateError, match=r"start\(\)' before sending"):
        await p.send("t", b"v")
    await p.close()  # never started: nothing to shut down
    assert p._running is None


async def test_a_started_producer_holds_every_part_wired_to_its_shortcut() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=2)
        async with make_producer(cluster) as p:
            running = p._running
            assert isinstance(running, Running)
            assert running.txn is None
            assert running.keyed_lane is not None
            assert p._shortcut.lane is running.lane
            assert p._shortcut.keyed_lane is running.keyed_lane
            assert (await p.send("t", b"v", key=b"k")).topic == "t"
            with pytest.raises(errors.IllegalStateError, match="need a transactional_id"):
                await p.begin_transaction()
        assert p._running is running  # close() keeps them: later calls see a closed producer
        with pytest.raises(errors.ProducerClosedError):
            await p.flush()
        with pytest.raises(errors.ProducerClosedError):
            await p.abort_transaction()


async def test_a_transactional_producer_holds_its_manager() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with Producer(cluster.bootstrap_servers, transactional_id="parts") as p:
            running = p._running
            assert running is not None
            assert isinstance(running.txn, TransactionManager)
            await p.init_transactions()
            async with p.transaction():
                await p.enqueue("t", b"v")
            assert running.txn.state is running.txn.state.READY
