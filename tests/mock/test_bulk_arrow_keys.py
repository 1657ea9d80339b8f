"""Keyed bulk records from Arrow key columns against the mock cluster.

Arrow key columns are hashed in one vectorized pass (numpy); the records must
land exactly where ``send(key=...)`` puts each one, with or without numpy.
"""

from __future__ import annotations

import asyncio
import itertools
import sys

import pytest

from aioproducer import Producer
from aioproducer.engine.partitioner import partition_for_key
from aioproducer.testing import MockCluster
from tests.support.extras import require

pa = require("pyarrow", extra="spark")

pytestmark = pytest.mark.asyncio

N = 3000
# Non-ASCII keys of every tail length; a null key every 97 records, none in the
# first 1024 records (one slice that takes the all-keyed path, others that do not).
KEYS = [None if i % 97 == 0 and i >= 1100 else f"clé-{i % 313}-{'é' * (i % 5)}" for i in range(N)]
VALUES = [b"v%05d" % i for i in range(N)]


def raw(key: str | None) -> bytes | None:
    return None if key is None else key.encode()


async def _bulk_then_single(
    cluster: MockCluster, keys: pa.Array | pa.ChunkedArray
) -> tuple[list[int], list[int]]:
    """(partition of each record sent with enqueue_many, of each sent with send)."""
    async with Producer(cluster.bootstrap_servers, linger_ms=2, batch_size=4096) as p:
        futures = [
            await p.enqueue_many("bulk", pa.array(VALUES[i : i + 1500]), keys=keys.slice(i, 1500))
            for i in (0, 1500)
        ]
        results = await asyncio.gather(*futures)
        singles = [await p.send("single", VALUES[i], key=raw(KEYS[i])) for i in range(0, N, 7)]
    bulk_parts = [md.partition for result in results for md in result]
    return bulk_parts, [md.partition for md in singles]


def _check(cluster: MockCluster, bulk_parts: list[int], single_parts: list[int]) -> None:
    stored = {(r.partition, r.value): r.key for r in cluster.records("bulk")}
    assert len(stored) == N
    for i, p in enumerate(bulk_parts):
        assert stored[(p, VALUES[i])] == raw(KEYS[i])  # the record is where the result says
        if KEYS[i] is not None:
            assert p == partition_for_key(raw(KEYS[i]), 6)  # type: ignore[arg-type]
    # Each keyed record shares its partition with the same key sent on its own.
    for j, i in enumerate(range(0, N, 7)):
        if KEYS[i] is not None:
            assert bulk_parts[i] == single_parts[j]


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_binary()])
async def test_arrow_keys_land_where_send_puts_each_key(arrow_type: pa.DataType) -> None:
    column = KEYS if arrow_type == pa.string() else [raw(k) for k in KEYS]
    keys = pa.array(column, arrow_type)
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("bulk", partitions=6)
        cluster.create_topic("single", partitions=6)
        bulk_parts, single_parts = await _bulk_then_single(cluster, keys)
        _check(cluster, bulk_parts, single_parts)


async def test_chunked_arrow_keys() -> None:
    whole = pa.array(KEYS, pa.string())
    keys = pa.chunked_array([whole.slice(0, 700), whole.slice(700, 1300), whole.slice(2000)])
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("bulk", partitions=6)
        cluster.create_topic("single", partitions=6)
        bulk_parts, single_parts = await _bulk_then_single(cluster, keys)
        _check(cluster, bulk_parts, single_parts)


async def test_without_numpy_keys_are_hashed_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    monkeypatch.delitem(sys.modules, "aioproducer.engine.partition_vector", raising=False)
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("bulk", partitions=6)
        cluster.create_topic("single", partitions=6)
        bulk_parts, single_parts = await _bulk_then_single(cluster, pa.array(KEYS, pa.string()))
        _check(cluster, bulk_parts, single_parts)
    assert "aioproducer.engine.partition_vector" not in sys.modules


async def test_keys_do_not_choose_when_a_partition_or_partitioner_does() -> None:
    keys = pa.array(KEYS[:2000], pa.string())
    values = pa.array(VALUES[:2000])
    seen: list[bytes | None] = []

    def last_partition(topic: str, key: bytes | None, n: int, available: object) -> int:
        seen.append(key)
        return n - 1

    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("bulk", partitions=6)
        async with Producer(cluster.bootstrap_servers) as p:
            fixed = await p.send_many("bulk", values, keys=keys, partition=2)
        async with Producer(cluster.bootstrap_servers, partitioner=last_partition) as p:
            custom = await p.send_many("bulk", values, keys=keys)
        async with Producer(cluster.bootstrap_servers, partitioner_ignore_keys=True) as p:
            ignored = await p.send_many("bulk", values, keys=keys)
    assert {md.partition for md in fixed} == {2}
    assert {md.partition for md in custom} == {5}
    assert seen == [raw(k) for k in KEYS[:2000]]
    # Sticky, not by key: long runs on one partition whatever the keys.
    parts = [md.partition for md in ignored]
    switches = sum(a != b for a, b in itertools.pairwise(parts))
    assert switches < 20


@pytest.mark.parametrize("copy_limit", [None, 0])
async def test_arrow_columns_copied_or_viewed_give_the_same_records(
    copy_limit: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Columns up to ARROW_COPY_LIMIT bytes become bytes objects; bigger ones are
    # read as memoryviews of the Arrow buffers (0: every column is "big").
    from aioproducer.bulk import input as bulk_input

    if copy_limit is not None:
        monkeypatch.setattr(bulk_input, "ARROW_COPY_LIMIT", copy_limit)
    values = pa.array([None if i % 13 == 0 else v for i, v in enumerate(VALUES)], pa.large_binary())
    keys = pa.array(KEYS, pa.string())
    elements = bulk_input.bytes_column(values.slice(1, 5), "values", None, "bulk")
    assert all(type(e) is (bytes if copy_limit is None else memoryview) for e in elements)
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("bulk", partitions=6)
        async with Producer(cluster.bootstrap_servers) as p:
            sliced = await p.send_many("bulk", values.slice(100, 1000), keys=keys.slice(100, 1000))
            chunked = await p.send_many(
                "bulk",
                pa.chunked_array([values.slice(0, 50), values.slice(2000)]),
                keys=pa.chunked_array([keys.slice(0, 50), keys.slice(2000)]),
            )
        stored = {(r.partition, r.offset): (r.key, r.value) for r in cluster.records("bulk")}
    picked = list(range(100, 1100)) + list(range(50)) + list(range(2000, N))
    got = [stored[(md.partition, md.offset)] for md in list(sliced) + list(chunked)]
    assert got == [(raw(KEYS[i]), values[i].as_py()) for i in picked]
