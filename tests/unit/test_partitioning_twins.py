"""The partitioner and its compiled twin decide every partition alike, and as Java's client does.

engine/partitioner.py is the pure reference of every partitioning rule;
_speedups/_partitioning.h is its compiled twin, run by the compiled lanes and
reached here through the kernels' ``murmur2``, ``_partition_for_key`` and
``_time_to_switch``. Random keys, partition counts and int64 arguments compare
the two, so a change of one side alone fails; values from the Java client
(``UtilsTest.testMurmur2``) and its rules catch a change of both. An
end-to-end check sends keyed records through ``Producer.enqueue`` (the keyed
lane, compiled when built) and finds each on its key's partition.
"""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer import Producer
from aioproducer._speedups import kernels as active_kernels
from aioproducer.engine.admission import Admission
from aioproducer.engine.keyed_lane import KeyedLane
from aioproducer.engine.partitioner import (
    _murmur2_pure,
    partition_for_hash,
    partition_for_key,
    time_to_switch,
)
from aioproducer.testing import MockCluster
from tests.support.kernels import kernels_or_skip, required

K = kernels_or_skip()

FUZZ = settings(
    max_examples=400,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MAX = (1 << 31) - 1

# Java's Utils.murmur2: the Java client's UtilsTest.testMurmur2 vectors, and
# values of the same function quoted by other Kafka-compatible clients.
JAVA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"1", -1993445489),
    (b"12", 126087238),
    (b"123", -267702483),
    (b"1234", -1614185708),
    (b"12345", -1188365604),
]

# BuiltInPartitioner.partitionForKey: Utils.toPositive(murmur2(key)) % numPartitions.
JAVA_PARTITIONS = [
    (b"21", 1, 0),
    (b"21", 1000, 340),
    (b"21", INT32_MAX, 1173551340),
    (b"foobar", 12, 6),
    (b"foobar", 1000, 166),
    (b"foobar", INT32_MAX, 1357151166),
    (b"a-little-bit-long-string", 3, 2),
    (b"a-little-bit-long-string", 12, 8),
    (b"abc", 12, 3),
    (b"abc", 1000, 107),
    (b"abc", INT32_MAX, 479470107),
]

# BuiltInPartitioner.updatePartitionInfo with batch.size 100:
# (produced, limit, filled, size) -> switch now?
JAVA_SWITCHES = [
    (99, 100, 99, 1, False),  # fewer than batch.size bytes went there
    (100, 100, 50, 40, False),  # enough bytes, and the batch has room for another record
    (100, 100, 60, 40, False),  # another such record fills the batch exactly: room
    (100, 100, 60, 41, True),  # enough bytes, and no room for another such record
    (199, 100, 0, 1, False),
    (200, 100, 0, 1, True),  # twice batch.size: regardless of the batch
    (0, 0, 0, 0, True),
]

INT64_EDGES = [
    INT64_MIN,
    INT64_MIN + 1,
    -(1 << 62),
    -1,
    0,
    1,
    100,
    16384,
    (1 << 62) - 1,
    1 << 62,
    (1 << 62) + 1,
    INT64_MAX - 1,
    INT64_MAX,
]
int64s = st.one_of(
    st.sampled_from(INT64_EDGES),
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(-300, 300),
)
partition_counts = st.one_of(
    st.integers(1, 10_000),
    st.sampled_from([1, 2, 3, 255, 256, 65535, 65536, INT32_MAX - 1, INT32_MAX]),
)


@pytest.fixture(scope="module")
def k() -> ModuleType:
    return required(K)


def _pure_partition(key: bytes, num_partitions: int) -> int:
    return partition_for_hash(_murmur2_pure(key), num_partitions)


# -- values from the Java client: a change of both sides fails these ---------


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2)
def test_murmur2_of_both_twins_is_javas(k: ModuleType, key: bytes, expected: int) -> None:
    assert _murmur2_pure(key) == expected
    assert k.murmur2(key) == expected


@pytest.mark.parametrize(("key", "count", "expected"), JAVA_PARTITIONS)
def test_keyed_partition_of_both_twins_is_javas(
    k: ModuleType, key: bytes, count: int, expected: int
) -> None:
    assert _pure_partition(key, count) == expected
    assert k._partition_for_key(key, count) == expected


@pytest.mark.parametrize(("produced", "limit", "filled", "size", "expected"), JAVA_SWITCHES)
def test_switch_rule_of_both_twins_is_javas(
    k: ModuleType, produced: int, limit: int, filled: int, size: int, expected: bool
) -> None:
    assert time_to_switch(produced, limit, filled, size) is expected
    assert k._time_to_switch(produced, limit, filled, size) is expected


# -- the twins against each other: a change of one side fails these ----------


@pytest.mark.parametrize("length", range(65))
def test_every_key_length_hashes_and_partitions_alike(k: ModuleType, length: int) -> None:
    rng = random.Random(length)
    for _ in range(20):
        key = rng.randbytes(length)
        assert k.murmur2(key) == _murmur2_pure(key)
        for count in (1, 2, 7, 1000, INT32_MAX):
            assert k._partition_for_key(key, count) == _pure_partition(key, count)


@FUZZ
@given(key=st.binary(min_size=0, max_size=64), count=partition_counts)
def test_random_keys_partition_alike(k: ModuleType, key: bytes, count: int) -> None:
    assert k.murmur2(key) == _murmur2_pure(key)
    assert k._partition_for_key(key, count) == _pure_partition(key, count)


@FUZZ
@given(produced=int64s, limit=int64s, filled=int64s, size=int64s)
def test_switch_rule_agrees_over_int64(
    k: ModuleType, produced: int, limit: int, filled: int, size: int
) -> None:
    # Python's ints do not overflow: the twin must be exact at every edge too.
    assert k._time_to_switch(produced, limit, filled, size) is time_to_switch(
        produced, limit, filled, size
    )


def test_the_twins_hooks_refuse_what_java_cannot_mean(k: ModuleType) -> None:
    for count in (0, -1, INT32_MAX + 1):
        with pytest.raises(ValueError, match="num_partitions"):
            k._partition_for_key(b"key", count)
    with pytest.raises(OverflowError):
        k._time_to_switch(INT64_MAX + 1, 0, 0, 0)


# -- end to end: the keyed lane puts each record on its key's partition ------


@pytest.mark.asyncio
@pytest.mark.parametrize("partitions", [1, 7, 31])
async def test_keyed_records_through_enqueue_land_on_partition_for_key(
    partitions: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if active_kernels is not None:  # the compiled lane is the one under test
        assert KeyedLane is active_kernels.KeyedLane
    rng = random.Random(partitions)
    keys = [rng.randbytes(rng.randrange(65)) for _ in range(600)]
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("k", partitions=partitions)
        async with Producer(cluster.bootstrap_servers, linger_ms=60_000, batch_size=1 << 20) as p:
            await p.enqueue("k", b"warm", key=b"warm")
            await p.flush()  # metadata, connection and a checked topic in place
            full: list[int] = []
            place = Admission.place

            def counted(admission: Admission, *args: Any) -> Any:
                full.append(1)
                return place(admission, *args)

            monkeypatch.setattr(Admission, "place", counted)
            futures = [await p.enqueue("k", b"v%d" % i, key=key) for i, key in enumerate(keys)]
            await p.flush()
    assert len(full) <= partitions  # one new batch per partition; the lane took the rest
    assert [f.result().partition for f in futures] == [
        partition_for_key(k, partitions) for k in keys
    ]
    assert [f.result().partition for f in futures] == [_pure_partition(k, partitions) for k in keys]
    stored = {(r.partition, r.offset): r.key for r in cluster.records("k")}
    assert [stored[(f.result().partition, f.result().offset)] for f in futures] == keys


def test_arrow_key_columns_take_the_same_rule() -> None:
    # partition_vector runs the module's murmur2 steps on numpy arrays: Java's values too.
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("numpy")
    from aioproducer.engine.partition_vector import arrow_key_partitions

    for count in {c for _, c, _ in JAVA_PARTITIONS}:
        cases = [(key, want) for key, c, want in JAVA_PARTITIONS if c == count]
        keys = [key for key, _ in cases] * 8  # enough keys for the vectorised steps
        assert list(arrow_key_partitions(pa.array(keys), count)) == [want for _, want in cases] * 8
