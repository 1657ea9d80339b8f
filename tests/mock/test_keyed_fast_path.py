"""enqueue's shortcut for keyed records puts each where the full path would.

A record with a bytes key goes straight to the open batch of the partition its
key hashes to. Over real sockets to MockCluster: the records land in Java's
partition for their key, in order, and the shortcut is really taken; a custom
partitioner, serializers or ``partitioner_ignore_keys`` keep every record on
the full path; a topic that grows follows the new partition count.
"""

from __future__ import annotations

from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.engine.admission import Admission
from aioproducer.engine.partitioner import _murmur2_pure
from aioproducer.testing import MockCluster
from tests.support.aio import until

SETTLE = 15


def _java_partition(key: bytes, partitions: int) -> int:
    return (_murmur2_pure(key) & 0x7FFFFFFF) % partitions


def _count_full_path(producer: Producer, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    full = Admission.place

    def counted(admission: Admission, *args: Any) -> Any:
        calls.append(1)
        return full(admission, *args)

    monkeypatch.setattr(Admission, "place", counted)
    return calls


@pytest.mark.asyncio
async def test_keyed_records_take_the_shortcut_to_their_keys_partitions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = [b"user-%d" % (i % 37) for i in range(2000)]
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("k", partitions=5)
        async with Producer(cluster.bootstrap_servers, linger_ms=60_000, batch_size=1 << 20) as p:
            await p.enqueue("k", b"warm", key=b"warm")
            await p.flush()  # metadata, connection and a checked topic in place
            full = _count_full_path(p, monkeypatch)
            futures = [await p.enqueue("k", b"v%d" % i, key=key) for i, key in enumerate(keys)]
            await p.flush()
    # One batch per partition opened on the full path; every other record took the shortcut.
    assert len(full) <= 5
    got = [(f.result().partition, f.result().offset) for f in futures]
    assert [partition for partition, _ in got] == [_java_partition(k, 5) for k in keys]
    stored = {(r.partition, r.offset): (r.key, r.value) for r in cluster.records("k")}
    assert [stored[where] for where in got] == [(k, b"v%d" % i) for i, k in enumerate(keys)]
    for partition in range(5):
        offsets = [offset for part, offset in got if part == partition]
        assert offsets == sorted(offsets)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "settings",
    [
        {"partitioner": lambda topic, key, count, available: count - 1},
        {"key_serializer": lambda key: key},
        {"partitioner_ignore_keys": True},
    ],
    ids=["custom-partitioner", "serializer", "ignore-keys"],
)
async def test_configurations_that_choose_otherwise_keep_the_full_path(
    settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("k", partitions=3)
        async with Producer(cluster.bootstrap_servers, linger_ms=60_000, **settings) as p:
            await p.enqueue("k", b"warm", key=b"warm")
            await p.flush()  # metadata, connection and a checked topic in place
            full = _count_full_path(p, monkeypatch)
            futures = [await p.enqueue("k", b"v", key=b"key-%d" % i) for i in range(50)]
            await p.flush()
    assert len(full) == 50
    if "partitioner" in settings:
        assert {f.result().partition for f in futures} == {2}


@pytest.mark.asyncio
async def test_a_topic_that_grows_is_partitioned_by_its_new_count() -> None:
    keys = [b"key-%d" % i for i in range(200)]
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("k", partitions=2)
        async with Producer(cluster.bootstrap_servers, linger_ms=0, metadata_max_age_ms=100) as p:
            before = [await p.send("k", b"v", key=k) for k in keys]
            cluster.add_partitions("k", 6)
            await until(
                lambda: len(p._running.client.snapshot.topics["k"].partitions) == 6,
                SETTLE,
                "the new partitions in the metadata",
            )
            after = [await p.enqueue("k", b"v", key=k) for k in keys]
            await p.flush()
    assert [m.partition for m in before] == [_java_partition(k, 2) for k in keys]
    assert [f.result().partition for f in after] == [_java_partition(k, 6) for k in keys]


@pytest.mark.asyncio
async def test_options_may_be_given_by_position_in_aiokafkas_order() -> None:
    async with MockCluster() as cluster:
        cluster.create_topic("pos", partitions=3)
        async with Producer(cluster.bootstrap_servers) as p:
            first = await p.enqueue("pos", b"v1", b"k1", 2, 1_700_000_000_000, [("h", b"1")])
            second = await p.send("pos", b"v2", b"k2", 1, 1_700_000_000_001, [("h", b"2")])
            await p.flush()
    assert (first.result().partition, second.partition) == (2, 1)
    stored = {r.value: r for r in cluster.records("pos")}
    assert (stored[b"v1"].key, stored[b"v1"].partition, stored[b"v1"].timestamp_ms) == (
        b"k1",
        2,
        1_700_000_000_000,
    )
    assert (stored[b"v2"].key, stored[b"v2"].partition, stored[b"v2"].timestamp_ms) == (
        b"k2",
        1,
        1_700_000_000_001,
    )
    assert [tuple(h) for h in stored[b"v1"].headers] == [("h", b"1")]
