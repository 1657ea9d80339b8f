"""The bulk path (enqueue_many / send_many) against the mock cluster."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from aioproducer import BulkResult, BulkSendError, Producer, errors
from aioproducer.engine.partitioner import partition_for_key
from aioproducer.testing import MockCluster
from tests.support.extras import require

pytestmark = pytest.mark.asyncio


def by_offset(records: list) -> dict[tuple[int, int], object]:
    return {(r.partition, r.offset): r for r in records}


async def test_unkeyed_records_fill_sticky_batches_in_order_and_result_points_at_each() -> None:
    values = [b"value-%05d" % i for i in range(5000)]
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("bulk", partitions=4)
        async with Producer(cluster.bootstrap_servers, batch_size=4096, linger_ms=5) as p:
            result = await p.send_many("bulk", values, timestamp_ms=1_700_000_000_000)
        stored = by_offset(cluster.records("bulk"))
    assert isinstance(result, BulkResult) and len(result) == 5000 and not result.errors
    assert len(stored) == 5000
    for i, md in enumerate(result):
        record = stored[(md.partition, md.offset)]
        assert record.value == values[i]
        assert md.timestamp_ms == record.timestamp_ms == 1_700_000_000_000
        assert (md.serialized_key_size, md.serialized_value_size) == (-1, len(values[i]))
    # Sticky: runs of consecutive records share a partition (not one record per partition).
    assert sum(n for runs in result.offsets.values() for _base, n in runs) == 5000
    assert len(result.offsets) > 1
    run_lengths = sorted(n for runs in result.offsets.values() for _base, n in runs)
    assert run_lengths[len(run_lengths) // 2] > 100
    # Per partition, the call's order is the log's order.
    per_partition = defaultdict(list)
    for i in range(5000):
        per_partition[result.partition_of(i)].append(result[i].offset)
    assert all(offsets == sorted(offsets) for offsets in per_partition.values())


async def test_keys_go_to_their_murmur2_partition_with_headers() -> None:
    keys = [b"customer-%d" % (i % 37) for i in range(3000)]
    values = [b"v%d" % i for i in range(3000)]
    per_record = [[("n", b"%d" % i)] if i % 2 else None for i in range(3000)]
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("keyed", partitions=6)
        async with Producer(cluster.bootstrap_servers) as p:
            # More records than one slice: several slices, each grouped by partition.
            common = await p.send_many(
                "keyed", values[:2500], keys=keys[:2500], headers=[("src", b"bulk")]
            )
            own = await p.send_many(
                "keyed", values[2500:], keys=keys[2500:], headers=per_record[2500:]
            )
        stored = by_offset(cluster.records("keyed"))
    for i in range(2500):
        md = common[i]
        assert md.partition == partition_for_key(keys[i], 6)
        rec = stored[(md.partition, md.offset)]
        assert (rec.key, rec.value, rec.headers) == (keys[i], values[i], [("src", b"bulk")])
    for j in range(500):
        i = 2500 + j
        md = own[j]
        rec = stored[(md.partition, md.offset)]
        assert md.partition == partition_for_key(keys[i], 6)
        assert (rec.key, rec.value) == (keys[i], values[i])
        assert rec.headers == (per_record[i] or [])


async def test_arrow_arrays_are_read_in_place() -> None:
    pa = require("pyarrow", extra="spark")
    raw = [b"a" * (i % 50) if i % 11 else None for i in range(3000)]
    arrays = {
        "binary": pa.array(raw, pa.binary()),
        "large_binary": pa.array(raw, pa.large_binary()),
        "string": pa.array([None if v is None else v.decode() for v in raw], pa.string()),
    }
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("arrow", partitions=2)
        async with Producer(cluster.bootstrap_servers) as p:
            results = {}
            for name, arr in arrays.items():
                results[name] = await p.send_many("arrow", arr, keys=arr, partition=1)
            # A slice (non-zero offset) and a chunked array.
            sliced = await p.send_many("arrow", arrays["binary"].slice(1000, 500), partition=0)
            chunked = await p.send_many(
                "arrow",
                pa.chunked_array([arrays["binary"][:10], arrays["binary"][10:20]]),
                partition=0,
            )
        stored = by_offset(cluster.records("arrow"))
    for name, result in results.items():
        for i in range(3000):
            md = result[i]
            rec = stored[(md.partition, md.offset)]
            assert rec.value == raw[i] and rec.key == raw[i], name
            assert md.serialized_value_size == (-1 if raw[i] is None else len(raw[i]))
    assert [stored[(0, md.offset)].value for md in sliced] == raw[1000:1500]
    assert [stored[(0, md.offset)].value for md in chunked] == raw[:20]


async def test_idempotent_sequences_run_on_across_bulk_and_single_records() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("seq", partitions=1)
        async with Producer(cluster.bootstrap_servers, batch_size=2048, linger_ms=20) as p:
            first = await p.enqueue("seq", b"single-0")
            bulk = await p.enqueue_many("seq", [b"bulk-%d" % i for i in range(300)])
            last = await p.enqueue("seq", b"single-1")  # may share the bulk call's last batch
            await p.flush()
            result = bulk.result()
            assert (await first).offset == 0
            assert (await last).offset == 301
        records = cluster.records("seq")
    assert [r.value for r in records] == [b"single-0"] + [b"bulk-%d" % i for i in range(300)] + [
        b"single-1"
    ]
    assert [result[i].offset for i in range(300)] == list(range(1, 301))
    assert len({r.producer_id for r in records}) == 1 and records[0].producer_id >= 0
    assert [r.sequence for r in records] == list(range(302))


async def test_bulk_in_a_transaction_commits_and_aborts_as_a_whole() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("txb", partitions=3)
        async with Producer(cluster.bootstrap_servers, transactional_id="bulk-tx") as p:
            await p.init_transactions()
            async with p.transaction():
                await p.enqueue_many(
                    "txb", [b"c%d" % i for i in range(200)], keys=[b"%d" % i for i in range(200)]
                )
            await p.begin_transaction()
            fut = await p.enqueue_many("txb", [b"a%d" % i for i in range(200)])
            await p.abort_transaction()
            with pytest.raises(BulkSendError) as info:
                await fut
            with pytest.raises(errors.IllegalStateError):
                await p.enqueue_many("txb", [b"outside"])
        visible = sorted(r.value for r in cluster.records("txb"))
    assert visible == sorted(b"c%d" % i for i in range(200))
    failed = info.value.result.errors
    assert sorted(i for f in failed.values() for i in f.indices) == list(range(200))
    assert all(isinstance(f.error, errors.TransactionAbortedError) for f in failed.values())


async def test_a_failing_partition_names_its_records_and_the_others_are_delivered() -> None:
    partitions = [i % 3 for i in range(90)]
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("part", partitions=3)
        async with Producer(cluster.bootstrap_servers, linger_ms=50) as p:
            await p.send("part", b"warm-up", partition=0)
            cluster.fail_produce("part", 1, errors.InvalidTimestampError.code, count=1)
            fut = await p.enqueue_many(
                "part", [b"r%d" % i for i in range(90)], partition=partitions
            )
            with pytest.raises(BulkSendError) as info:
                await fut
        stored = cluster.records("part")
    result = info.value.result
    assert list(result.errors) == [1]
    failure = result.errors[1]
    assert isinstance(failure.error, errors.InvalidTimestampError)
    assert failure.indices == [i for i in range(90) if i % 3 == 1]
    assert "partition 1" in str(info.value) and "InvalidTimestampError" in str(info.value)
    with pytest.raises(errors.InvalidTimestampError):
        result[1]
    delivered = [i for i in range(90) if i % 3 != 1]
    assert sorted(r.value for r in stored if r.value != b"warm-up") == sorted(
        b"r%d" % i for i in delivered
    )
    assert all(result[i].partition == partitions[i] for i in delivered)
    with pytest.raises(BulkSendError):
        result.raise_for_errors()


async def test_bad_input_raises_typed_errors_and_buffers_nothing() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("bad", partitions=2)
        async with Producer(cluster.bootstrap_servers, max_request_size=10_000) as p:
            await p.send("bad", b"warm-up")
            good = [b"ok"] * 10
            cases = [
                (TypeError, {"values": good[:5] + ["text"] + good[:4]}),
                (TypeError, {"values": b"not a list"}),
                (ValueError, {"values": good, "keys": [b"k"] * 9}),
                (TypeError, {"values": good, "keys": [b"k"] * 9 + [7]}),
                (TypeError, {"values": good, "headers": [("h", "not bytes")]}),
                (ValueError, {"values": good, "headers": [None] * 3}),
                (ValueError, {"values": good, "timestamp_ms": -1}),
                (ValueError, {"values": good, "timestamp_ms": [1] * 9 + [-5]}),
                (ValueError, {"values": good, "timestamp_ms": 2**63}),
                (ValueError, {"values": good, "timestamp_ms": [1] * 9 + [2**64]}),
                (TypeError, {"values": good, "partition": "0"}),
                (errors.InvalidPartitionError, {"values": good, "partition": [0] * 9 + [2]}),
                (errors.RecordTooLargeError, {"values": good[:3] + [b"x" * 20_000]}),
            ]
            for exc_type, kwargs in cases:
                with pytest.raises(exc_type) as info:
                    await p.enqueue_many("bad", **kwargs)
                assert str(info.value)
            with pytest.raises(errors.InvalidTopicError):
                await p.enqueue_many("bad topic", good)
            await p.flush()
            assert p._pool.available == p._pool.total
            empty = await p.send_many("bad", [])
            assert len(empty) == 0
        assert [r.value for r in cluster.records("bad")] == [b"warm-up"]
    with pytest.raises(errors.ProducerClosedError):
        await p.enqueue_many("bad", good)


async def test_an_arrow_array_of_other_values_is_a_type_error() -> None:
    pa = require("pyarrow", extra="spark")
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("bad", partitions=2)
        async with Producer(cluster.bootstrap_servers) as p:
            await p.send("bad", b"warm-up")
            with pytest.raises(TypeError) as info:
                await p.enqueue_many("bad", pa.array([1, 2, 3]))
            assert str(info.value)
            await p.flush()
            assert p._pool.available == p._pool.total
        assert [r.value for r in cluster.records("bad")] == [b"warm-up"]


async def test_buffer_memory_backpressure_and_max_block_ms() -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("mem", partitions=1)
        async with Producer(
            cluster.bootstrap_servers,
            buffer_memory=64 * 1024,
            max_block_ms=300,
            linger_ms=1,
            delivery_timeout_ms=30_000,
            request_timeout_ms=20_000,
        ) as p:
            await p.send("mem", b"warm-up")
            cluster.stall_broker(cluster.broker_ids[0])
            # More than the whole buffer: part is buffered, the rest times out
            # waiting for memory and is reported, by index, as never buffered.
            fut = await p.enqueue_many("mem", [b"x" * 100] * 2000)
            # The buffer is full now: a call that can buffer nothing fails as a whole.
            with pytest.raises(errors.KafkaTimeoutError):
                await p.enqueue_many("mem", [b"y" * 16_500])
            cluster.resume_broker(cluster.broker_ids[0])
            with pytest.raises(BulkSendError) as info:
                await asyncio.wait_for(fut, 30)
            await p.flush()
            assert p._pool.available == p._pool.total
        stored = [r.value for r in cluster.records("mem")]
    result = info.value.result
    not_buffered = result.errors[None]
    assert isinstance(not_buffered.error, errors.KafkaTimeoutError)
    first_missing = not_buffered.indices[0]
    assert 0 < first_missing < 2000
    assert not_buffered.indices == list(range(first_missing, 2000))
    assert stored.count(b"x" * 100) == first_missing
    assert b"y" * 16_500 not in stored
    assert [result[i].offset for i in range(first_missing)] == list(range(1, first_missing + 1))


async def test_a_bulk_batch_refused_as_too_large_fails_naming_its_records() -> None:
    # Bulk records carry no future of their own, so such a batch is not split
    # (KIP-126); its records fail, by index, and the producer goes on.
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("big", partitions=1)
        cluster.max_message_bytes = 1500
        async with Producer(cluster.bootstrap_servers, linger_ms=50) as p:
            fut = await p.enqueue_many("big", [b"x" * 100] * 60)
            with pytest.raises(BulkSendError) as info:
                await asyncio.wait_for(fut, 10)
            after = await asyncio.wait_for(p.send("big", b"after"), 5)
        assert [r.value for r in cluster.records("big")] == [b"after"] and after.offset == 0
    failure = info.value.result.errors[0]
    assert failure.indices == list(range(60))
    assert isinstance(failure.error, errors.RecordTooLargeError)  # MESSAGE_TOO_LARGE


async def test_a_partitions_failed_records_say_written_if_any_of_them_may_be() -> None:
    """One error speaks for a partition's failed records: refused first (not
    written), then written and answered with an error (maybe written). The
    records of the second batch are in the log: the error must not call them safe."""
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("t", partitions=1)
        async with Producer(
            cluster.bootstrap_servers,
            enable_idempotence=False,
            retries=0,
            batch_size=1024,
            linger_ms=50,
        ) as p:
            cluster.fail_produce("t", 0, errors.InvalidRecordError.code)
            cluster.fail_produce("t", 0, errors.RequestTimedOutError.code, after_append=True)
            fut = await p.enqueue_many("t", [b"x" * 200 for _ in range(8)], partition=0)
            with pytest.raises(BulkSendError) as failed:
                await asyncio.wait_for(fut, 30)
        [(partition, records)] = failed.value.result.errors.items()
        assert partition == 0 and records.indices == list(range(8))
        assert len(cluster.records("t")) == 4  # the second batch landed
        assert records.error.may_have_been_written is True
