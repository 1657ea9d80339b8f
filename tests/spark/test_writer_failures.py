"""What a failed sink task says, driven without a Spark session against the MockCluster.

Every failure a task raises is a SinkWriteError whose ``may_have_been_written``
and message tell whether Spark's retry of the task duplicates records: True
once any earlier record was handed to the producer, False when none was.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from aioproducer.spark.columns import Chunk, SinkWriteError, TopicColumns
from aioproducer.spark.options import parse_options
from aioproducer.spark.writer import _produce
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.spark

TOPIC = "sink-failures"
MAY_DUPLICATE = "may already be in the topic"
NO_DUPLICATE = "duplicates nothing"


def chunk(values: list[bytes], timestamps: list[int | None] | None = None) -> Chunk:
    part = TopicColumns(TOPIC, values, timestamps=timestamps)
    return Chunk([part], sum(len(v) for v in values), Counter({TOPIC: len(values)}))


GOOD = [b"one", b"two", b"three"]


def bad_row() -> Chunk:
    """A row the producer refuses with ValueError: a negative timestamp."""
    return chunk([b"bad"], timestamps=[-5])


def null_topic(chunks: list[Chunk]) -> Iterator[Chunk]:
    """The input: ``chunks``, then a row the conversion refuses (as columns.py does)."""
    yield from chunks
    raise SinkWriteError("row 4 of this task has a null 'topic' and no option('topic', ...) is set")


async def failure(cluster: MockCluster, chunks: Iterator[Chunk]) -> SinkWriteError:
    options = parse_options({"kafka.bootstrap.servers": cluster.bootstrap_servers, "topic": TOPIC})
    with pytest.raises(SinkWriteError) as raised:
        await _produce(chunks, options, 3, 1)
    return raised.value


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("make_input", "written"),
    [
        (lambda: iter([bad_row()]), False),
        (lambda: iter([chunk(GOOD), bad_row()]), True),
        (lambda: null_topic([]), False),
        (lambda: null_topic([chunk(GOOD)]), True),
    ],
    ids=[
        "bad-row-first",
        "bad-row-after-records",
        "input-error-first",
        "input-error-after-records",
    ],
)
async def test_a_refused_row_says_whether_a_retry_duplicates(
    make_input: Callable[[], Iterator[Chunk]], written: bool
) -> None:
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic(TOPIC, 1)
        exc = await failure(cluster, make_input())
        assert exc.may_have_been_written is written
        assert (MAY_DUPLICATE if written else NO_DUPLICATE) in str(exc)
        assert "partition 3 (attempt 1)" in str(exc)
        delivered = [r.value for r in cluster.records(TOPIC)]
    if not written:
        assert delivered == []  # "nothing reached the topic" was true
