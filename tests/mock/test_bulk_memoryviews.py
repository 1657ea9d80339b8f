"""Bulk values and keys given as memoryviews of wider items or with strides count in bytes."""

from __future__ import annotations

from array import array

import pytest

from aioproducer import Producer
from aioproducer.engine.partitioner import partition_for_key
from aioproducer.testing import MockCluster
from tests.support.aio import within

pytestmark = pytest.mark.asyncio


async def test_memoryviews_of_any_shape_are_taken_as_their_bytes() -> None:
    wide = [memoryview(array("i", [i, i + 1, i + 2])) for i in range(50)]  # 12 bytes, 3 items
    strided = [memoryview(b"k-%03d-padding" % i)[::2] for i in range(50)]  # not contiguous
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("views", 3)
        async with Producer(cluster.bootstrap_servers) as p:
            result = await within(p.send_many("views", wide, keys=strided), 30, "send_many")
        records = {(r.partition, r.offset): r for r in cluster.records("views")}
    for i in range(50):
        md = result[i]
        record = records[(md.partition, md.offset)]
        assert record.value == wide[i].tobytes()
        assert record.key == strided[i].tobytes()
        assert md.partition == partition_for_key(strided[i].tobytes(), 3)
        assert md.serialized_value_size == 12
