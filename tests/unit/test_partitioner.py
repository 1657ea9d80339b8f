"""Partition choice: Java-identical murmur2 for keys, sticky for unkeyed records."""

from __future__ import annotations

import collections
import random

import pytest

from aioproducer.engine.batch import ProducerBatch
from aioproducer.engine.partitioner import (
    cumulative_frequencies,
    murmur2,
    next_sticky_partition,
    partition_for_key,
    weighted_index,
)
from aioproducer.engine.sticky import StickyPartitioner
from aioproducer.net.cluster import PartitionInfo, TopicInfo
from aioproducer.protocol.compression import Codec
from aioproducer.protocol.records import RECORD_BATCH_OVERHEAD

# Vectors from the Java client's UtilsTest.testMurmur2.
JAVA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2)
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_for_key_is_to_positive_mod() -> None:
    assert partition_for_key(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3
    for n in (1, 2, 7, 100):
        assert all(0 <= partition_for_key(bytes([i]), n) < n for i in range(256))


def test_sticky_stays_until_told_then_moves_to_an_available_partition() -> None:
    sp = StickyPartitioner(100, random.Random(1))
    first = sp.partition("t", 6, [0, 2, 4])
    assert first in (0, 2, 4)
    assert all(sp.partition("t", 6, [0, 2, 4]) == first for _ in range(10))
    seen = {sp.next_partition("t", 6, [0, 2, 4]) for _ in range(60)}
    assert seen == {0, 2, 4}
    assert sp.produced["t"] == 0


def test_sticky_without_available_partitions_uses_any() -> None:
    sp = StickyPartitioner(100, random.Random(2))
    seen = {sp.next_partition("t", 3, []) for _ in range(50)}
    assert seen == {0, 1, 2}


def _topic(partitions: int, leaders: tuple[int, ...] = ()) -> TopicInfo:
    parts = tuple(PartitionInfo("t", p, leaders[p] if leaders else 1) for p in range(partitions))
    return TopicInfo(
        "t", 0, parts, tuple(range(partitions)), tuple(("t", p) for p in range(partitions))
    )


def _batch_of(size: int) -> ProducerBatch:
    """An open batch of batch_size 100 holding ``size`` bytes."""
    batch = ProducerBatch("t", 0, codec=Codec.NONE, batch_size=100, now=0.0, delivery_timeout=1)
    assert batch.try_append(1, None, b"x" * (size - RECORD_BATCH_OVERHEAD - 7), None, 0) is not None
    assert batch.builder.size_in_bytes == size
    return batch


def test_switch_after_batch_size_bytes_when_the_batch_is_full_and_at_twice_regardless() -> None:
    # KIP-794 / Java's BuiltInPartitioner.updatePartitionInfo: the rule every
    # path of the producer reports its records to.
    sp = StickyPartitioner(100, random.Random(3))
    info = _topic(4)
    sp.partition("t", 4, [0, 1, 2, 3])
    full, roomy = _batch_of(95), _batch_of(70)
    sp.appended("t", 60, full, info)  # 60 < batch_size: stay
    assert sp.produced["t"] == 60
    sp.appended("t", 60, roomy, info)  # 120, and 70 + 60 > 100: the batch has no room, switch
    assert sp.produced["t"] == 0
    sp.appended("t", 90, roomy, info)
    sp.appended("t", 20, roomy, info)  # 110, 70 + 20 fits: keep filling this batch
    assert sp.produced["t"] == 110
    sp.appended("t", 90, roomy, info)  # 200 = 2 x batch_size: switch anyway
    assert sp.produced["t"] == 0


def test_a_bulk_run_switches_once_batch_size_bytes_went_to_a_full_batch() -> None:
    sp = StickyPartitioner(100, random.Random(3))
    sp.partition("t", 4, [0, 1, 2, 3])
    sp.count("t", 60)
    assert not sp.switch_due("t")
    sp.count("t", 40)
    assert sp.switch_due("t")


def test_adaptive_move_skips_partitions_of_a_node_left_undrained() -> None:
    class Load:
        def queue_sizes(self, topic: str, partitions: object) -> list[int]:
            return [0 for _ in partitions]  # type: ignore[attr-defined]

        def unavailable_nodes(self, timeout: float) -> set[int]:
            assert timeout == 0.5
            return {2}

        def forget_topic(self, topic: str) -> bool:
            return True

    sp = StickyPartitioner(
        100, random.Random(6), load=Load(), adaptive=True, availability_timeout_ms=500
    )
    info = _topic(4, leaders=(1, 2, 1, 2))
    assert {sp.move_on("t", info) for _ in range(200)} == {0, 2}
    # Without adaptive partitioning every available partition is a candidate.
    plain = StickyPartitioner(100, random.Random(6), load=Load())
    assert {plain.move_on("t", info) for _ in range(200)} == {0, 1, 2, 3}


def test_cumulative_frequency_table_matches_java_example() -> None:
    # The example in BuiltInPartitioner.updatePartitionLoadStats: sizes 0 3 1 -> 4 5 8.
    assert cumulative_frequencies([0, 3, 1]) == [4, 5, 8]
    assert cumulative_frequencies([2, 2, 2]) is None  # all equal: uniform
    assert cumulative_frequencies([5]) is None
    table = [4, 5, 8]
    # First entry strictly greater than rand % 8.
    assert [weighted_index(table, r) for r in range(8)] == [0, 0, 0, 0, 1, 2, 2, 2]
    assert weighted_index(table, 12) == 1  # 12 % 8 == 4


def test_next_partition_weights_by_queue_size() -> None:
    rand = random.Random(4)
    counts = collections.Counter(
        next_sticky_partition([10, 11, 12], [0, 3, 1], rand.getrandbits(31)) for _ in range(8000)
    )
    # Weights 4/8, 1/8, 3/8.
    assert abs(counts[10] / 8000 - 0.5) < 0.03
    assert abs(counts[11] / 8000 - 0.125) < 0.03
    assert abs(counts[12] / 8000 - 0.375) < 0.03
    # Without load information the choice is uniform.
    uniform = collections.Counter(
        next_sticky_partition([10, 11, 12], None, rand.getrandbits(31)) for _ in range(6000)
    )
    assert all(abs(n / 6000 - 1 / 3) < 0.03 for n in uniform.values())


def test_sticky_next_partition_uses_queue_sizes_of_available_partitions() -> None:
    sp = StickyPartitioner(100, random.Random(5))
    picks = collections.Counter(
        sp.next_partition("t", 4, [0, 1, 3], [0, 9, 0]) for _ in range(3000)
    )
    assert 2 not in picks  # not available
    assert picks[1] < picks[0] / 5 and picks[1] < picks[3] / 5  # weight 1 against 10


def test_a_switch_or_forget_drops_the_cached_open_batch() -> None:
    # Producer.enqueue appends unkeyed records to ``filling[topic]`` without
    # asking the partitioner: any change of partition must drop it.
    sticky = StickyPartitioner(batch_size=100, rand=random.Random(1))
    sticky.partition("t", 4, [0, 1, 2, 3])
    sticky.filling["t"] = ("batch", "snapshot")
    sticky.next_partition("t", 4, [0, 1, 2, 3])
    assert "t" not in sticky.filling
    sticky.filling["t"] = ("batch", "snapshot")
    sticky.forget("t")
    assert "t" not in sticky.filling and "t" not in sticky.current
