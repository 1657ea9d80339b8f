"""Partition choice: Java-identical murmur2 for keys, sticky for unkeyed records."""

from __future__ import annotations

import random

import pytest

from aioproducer.partitioner import StickyPartitioner, murmur2, partition_for_key


# Vectors from the Java client's UtilsTest.testMurmur2.
@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_for_key_is_to_positive_mod() -> None:
    assert partition_for_key(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3
    for n in (1, 2, 7, 100):
        assert all(0 <= partition_for_key(bytes([i]), n) < n for i in range(256))


def test_sticky_stays_until_told_then_moves_to_an_available_partition() -> None:
    sp = StickyPartitioner(random.Random(1))
    first = sp.partition("t", 6, [0, 2, 4])
    assert first in (0, 2, 4)
    assert all(sp.partition("t", 6, [0, 2, 4]) == first for _ in range(10))
    nxt = sp.next_partition("t", 6, [0, 2, 4])
    assert nxt in (0, 2, 4) and nxt != first
    assert not sp.used("t")
    sp.mark_used("t")
    assert sp.used("t")


def test_sticky_without_available_partitions_uses_any() -> None:
    sp = StickyPartitioner(random.Random(2))
    seen = {sp.next_partition("t", 3, []) for _ in range(50)}
    assert seen == {0, 1, 2}
