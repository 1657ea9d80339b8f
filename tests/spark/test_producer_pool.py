"""Producers kept across the tasks of one worker, and keyed rows grouped by partition.

Driven without a Spark session: ``write_partition`` is called as Spark's
Python worker calls it, one task after another in one process, against a
MockCluster on a loop of its own (the worker's loop is another thread).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pytest

from aioproducer import Producer
from aioproducer.engine.partitioner import partition_for_key
from aioproducer.spark.columns import Chunk, SinkWriteError, TopicColumns
from aioproducer.spark.options import parse_options
from aioproducer.spark.writer import KafkaCommitMessage, _produce, write_partition
from aioproducer.testing import MockCluster
from tests.support.loop_thread import LoopThread

pytestmark = pytest.mark.spark

TOPIC = "pooled"


def arrow_chunk(first: int, n: int, topic: str = TOPIC) -> Chunk:
    keys = pa.array([f"k{i}" for i in range(first, first + n)])
    values = pa.array([f"v{i}".encode() for i in range(first, first + n)], pa.binary())
    part = TopicColumns(topic, values, keys)
    return Chunk([part], values.nbytes, Counter({topic: n}))


def bad_row() -> Chunk:
    """A row the producer refuses (a negative timestamp), after good ones were sent."""
    part = TopicColumns(TOPIC, [b"bad"], timestamps=[-5])
    return Chunk([part], 3, Counter({TOPIC: 1}))


@pytest.fixture
def cluster() -> Iterator[tuple[LoopThread, MockCluster]]:
    with LoopThread() as owner:
        mock = owner.run(MockCluster(brokers=1).start())
        mock.create_topic(TOPIC, 3)
        try:
            yield owner, mock
        finally:
            try:
                # The producers the test left in this process's pool go while
                # their cluster still answers (not at exit, into a closed port).
                from aioproducer.spark.producer_pool import worker_loop

                worker = worker_loop()
                worker.run(worker.pool.close())
            finally:
                owner.run(mock.stop())


def stored(owner: LoopThread, mock: MockCluster) -> list[tuple[bytes, int]]:
    """(value, producer id) of every record of the topic."""
    return owner.call(lambda: [(r.value or b"", r.producer_id) for r in mock.records(TOPIC)])


def values(first: int, n: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(first, first + n)]


def test_the_next_task_of_a_worker_reuses_its_producer(
    cluster: tuple[LoopThread, MockCluster],
) -> None:
    owner, mock = cluster
    options = parse_options({"kafka.bootstrap.servers": mock.bootstrap_servers, "topic": TOPIC})
    first = write_partition(iter([arrow_chunk(0, 500)]), options)
    second = write_partition(iter([arrow_chunk(500, 500), arrow_chunk(1000, 500)]), options)
    assert isinstance(first, KafkaCommitMessage) and isinstance(second, KafkaCommitMessage)
    assert (first.records, second.records) == (500, 1000)
    assert (first.producer_reused, second.producer_reused) == (False, True)
    records = stored(owner, mock)
    assert sorted(v for v, _ in records) == sorted(values(0, 1500))  # every row once
    # One producer (one producer id) wrote both tasks' records.
    assert len({pid for _, pid in records}) == 1


def test_a_failed_task_closes_its_producer_and_the_next_task_starts_afresh(
    cluster: tuple[LoopThread, MockCluster],
) -> None:
    owner, mock = cluster
    options = parse_options({"kafka.bootstrap.servers": mock.bootstrap_servers, "topic": TOPIC})
    write_partition(iter([arrow_chunk(0, 300)]), options)
    pooled_id = {pid for _, pid in stored(owner, mock)}
    with pytest.raises(SinkWriteError, match="rejected"):
        write_partition(iter([arrow_chunk(300, 300), bad_row()]), options)
    after = write_partition(iter([arrow_chunk(600, 300)]), options)
    assert after.producer_reused is False
    records = stored(owner, mock)
    # The failed task's records were written once, by the pooled producer it took...
    assert {pid for v, pid in records if v in values(300, 300)} == pooled_id
    # ...which was closed: the next task wrote with a producer of its own.
    assert {pid for v, pid in records if v in values(600, 300)}.isdisjoint(pooled_id)
    assert sorted(v for v, _ in records) == sorted(values(0, 900))


def test_an_input_that_breaks_off_does_not_return_the_producer(
    cluster: tuple[LoopThread, MockCluster],
) -> None:
    owner, mock = cluster
    options = parse_options({"kafka.bootstrap.servers": mock.bootstrap_servers, "topic": TOPIC})
    write_partition(iter([arrow_chunk(0, 200)]), options)

    def broken() -> Iterator[Chunk]:
        yield arrow_chunk(200, 200)
        raise RuntimeError("upstream stage failed")

    with pytest.raises(RuntimeError, match="upstream stage failed"):
        write_partition(broken(), options)
    assert write_partition(iter([arrow_chunk(400, 200)]), options).producer_reused is False
    assert sorted(v for v, _ in stored(owner, mock)) == sorted(values(0, 600))


def test_an_empty_task_starts_no_producer(cluster: tuple[LoopThread, MockCluster]) -> None:
    _owner, mock = cluster
    options = parse_options({"kafka.bootstrap.servers": mock.bootstrap_servers, "topic": TOPIC})
    from aioproducer.spark.producer_pool import worker_loop

    pool = worker_loop().pool
    started = pool.started
    message = write_partition(iter([]), options)
    assert message.records == 0 and message.producer_reused is False
    assert pool.started == started


@pytest.mark.asyncio
async def test_an_empty_transactional_task_fences_and_prepares_nothing() -> None:
    async with MockCluster(brokers=1) as mock:
        mock.create_topic(TOPIC, 1)
        options = parse_options(
            {
                "kafka.bootstrap.servers": mock.bootstrap_servers,
                "topic": TOPIC,
                "transactional": "true",
                "transactional.id.prefix": "empty",
            }
        )
        # An earlier attempt of partition 0 left a transaction open.
        earlier = Producer.from_config(dict(options.task_properties(0)))
        await earlier.start()
        await earlier.init_transactions()
        await earlier.begin_transaction()
        await earlier.send(TOPIC, b"left-open")
        message = await _produce(iter([]), options, 0, 1)
        assert message.records == 0 and message.prepared is None
        # The retry's init_transactions() fenced the earlier attempt and aborted its records.
        assert mock.records(TOPIC) == []
        with pytest.raises(Exception, match="(?i)fenc"):
            await earlier.commit_transaction()
        await earlier.close(5)


def test_keyed_rows_are_grouped_by_the_partition_the_producer_would_choose() -> None:
    from aioproducer.spark.columns import split_by_key, splittable

    keys = pa.array([f"key-{i}" if i % 7 else None for i in range(2000)])
    vals = pa.array([f"v{i}".encode() for i in range(2000)], pa.binary())
    part = TopicColumns(TOPIC, vals, keys)
    assert splittable(part)
    groups = split_by_key(part, 5)
    seen: list[bytes] = []
    for partition, rows in groups:
        got_values = rows.values.to_pylist()
        seen += got_values
        indices = [int(v[1:]) for v in got_values]
        assert indices == sorted(indices)  # row order kept within a group
        if partition is None:
            assert rows.keys is None and all(i % 7 == 0 for i in indices)
        else:
            assert all(partition_for_key(f"key-{i}".encode(), 5) == partition for i in indices)
    assert sorted(seen) == sorted(vals.to_pylist())
    assert [p for p, _ in groups] == [None, 0, 1, 2, 3, 4]


def test_rows_with_per_row_columns_or_python_lists_are_not_grouped() -> None:
    from aioproducer.spark.columns import splittable

    vals = pa.array([b"a", b"b"])
    assert not splittable(TopicColumns(TOPIC, [b"a", b"b"], [b"k", b"l"]))
    assert not splittable(TopicColumns(TOPIC, vals, pa.array([b"k", b"l"]), partitions=[0, 1]))
    assert not splittable(TopicColumns(TOPIC, vals, pa.array([b"k", b"l"]), timestamps=[1, 2]))
    assert not splittable(TopicColumns(TOPIC, vals))  # no keys: nothing to group by


@pytest.mark.asyncio
async def test_grouped_rows_land_where_keyed_records_go_in_order() -> None:
    async with MockCluster(brokers=1) as mock:
        mock.create_topic(TOPIC, 4)
        options = parse_options({"kafka.bootstrap.servers": mock.bootstrap_servers, "topic": TOPIC})
        await _produce(iter([arrow_chunk(0, 3000), arrow_chunk(3000, 3000)]), options, 0, 0)
        records = mock.records(TOPIC)
    assert len(records) == 6000
    per_partition: dict[int, list[int]] = {}
    for r in records:
        assert r.key is not None and r.partition == partition_for_key(r.key, 4)
        per_partition.setdefault(r.partition, []).append(int(r.key[1:]))
    for ids in per_partition.values():
        assert ids == sorted(ids)  # a key's rows keep the input order


@pytest.mark.asyncio
async def test_ignore_keys_leaves_keyed_rows_to_the_sticky_partitioner() -> None:
    async with MockCluster(brokers=1) as mock:
        mock.create_topic(TOPIC, 4)
        options = parse_options(
            {
                "kafka.bootstrap.servers": mock.bootstrap_servers,
                "topic": TOPIC,
                "kafka.partitioner.ignore.keys": "true",
            }
        )
        await _produce(iter([arrow_chunk(0, 1000)]), options, 0, 0)
        records = mock.records(TOPIC)
    assert len(records) == 1000
    # Sticky: runs of one partition, not each key's partition.
    assert any(r.partition != partition_for_key(r.key or b"", 4) for r in records)


@pytest.mark.asyncio
async def test_the_pool_closes_what_it_holds() -> None:
    async with MockCluster(brokers=1) as mock:
        from aioproducer.spark.producer_pool import ProducerPool

        pool = ProducerPool(max_idle=1)
        props = {"bootstrap.servers": mock.bootstrap_servers}
        first, reused = await pool.acquire(props)
        assert reused is False
        await pool.release(props, first)
        again, reused = await pool.acquire(props)
        assert again is first and reused is True
        await pool.release(props, again)
        other = {**props, "linger.ms": "7"}
        second, _ = await pool.acquire(other)
        await pool.release(other, second)  # evicts (and closes) the first: max_idle=1
        assert len(pool) == 1
        with pytest.raises(Exception, match="(?i)closed"):
            await first.send(TOPIC, b"x")
        await pool.close()
        assert len(pool) == 0
        with pytest.raises(Exception, match="(?i)closed"):
            await second.send(TOPIC, b"x")
    await asyncio.sleep(0)


def test_a_worker_loop_closes_its_pooled_producers_when_closed(
    cluster: tuple[LoopThread, MockCluster],
) -> None:
    from aioproducer.spark.producer_pool import WorkerLoop

    _owner, mock = cluster
    worker = WorkerLoop()
    props = {"bootstrap.servers": mock.bootstrap_servers}

    async def keep_one() -> Producer:
        producer, _ = await worker.pool.acquire(props)
        await worker.pool.release(props, producer)
        return producer

    kept = worker.run(keep_one())
    assert len(worker.pool) == 1
    worker.close(timeout=30)  # what atexit calls; bounded
    assert len(worker.pool) == 0 and worker.loop.is_closed()
    assert repr(kept).startswith("<Producer closed")
