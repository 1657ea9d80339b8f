"""Bad input fails at once with a typed error, buffers nothing, and spares other records."""

from __future__ import annotations

import time
import uuid

import pytest

from aioproducer import Producer, RecordMetadata, errors
from tests.support.aio import closed_port, gather_within, read_back, within

pytestmark = pytest.mark.asyncio

# Small enough that leaked reservations would soon block a valid send.
BUFFER = 8 * 1024


def _bad_calls(topic: str) -> list[tuple[str, dict, type[BaseException], str]]:
    """(what, enqueue kwargs, expected error, text the message must contain)."""
    big = b"x" * (BUFFER + 100)
    v = b"v" * 1000  # so that a leaked reservation is large
    return [
        ("str value", {"topic": topic, "value": "text"}, TypeError, "value"),
        ("int value", {"topic": topic, "value": 42}, TypeError, "value"),
        ("str key", {"topic": topic, "value": v, "key": "text"}, TypeError, "key"),
        ("dict key", {"topic": topic, "value": v, "key": {"a": 1}}, TypeError, "key"),
        (
            "over buffer_memory",
            {"topic": topic, "value": big},
            errors.RecordTooLargeError,
            "buffer_memory",
        ),
        ("empty topic", {"topic": "", "value": v}, errors.InvalidTopicError, "empty"),
        ("dot topic", {"topic": ".", "value": v}, errors.InvalidTopicError, "'.'"),
        ("dotdot topic", {"topic": "..", "value": v}, errors.InvalidTopicError, "'..'"),
        ("long topic", {"topic": "t" * 250, "value": v}, errors.InvalidTopicError, "249"),
        ("space topic", {"topic": "a topic", "value": v}, errors.InvalidTopicError, "illegal"),
        ("slash topic", {"topic": "a/b", "value": v}, errors.InvalidTopicError, "illegal"),
        ("non-ascii topic", {"topic": "tópico", "value": v}, errors.InvalidTopicError, "illegal"),
        ("None topic", {"topic": None, "value": v}, errors.InvalidTopicError, "str"),
        ("bytes topic", {"topic": b"t", "value": v}, errors.InvalidTopicError, "str"),
        (
            "partition too high",
            {"topic": topic, "value": v, "partition": 4},
            errors.InvalidPartitionError,
            "4",
        ),
        (
            "partition far too high",
            {"topic": topic, "value": v, "partition": 1000},
            errors.InvalidPartitionError,
            "1000",
        ),
        (
            "negative partition",
            {"topic": topic, "value": v, "partition": -1},
            errors.InvalidPartitionError,
            "-1",
        ),
        ("str partition", {"topic": topic, "value": v, "partition": "1"}, TypeError, "partition"),
        (
            "dict headers",
            {"topic": topic, "value": v, "headers": {"a": b"b"}},
            TypeError,
            "headers",
        ),
        ("str headers", {"topic": topic, "value": v, "headers": "a"}, TypeError, "headers"),
        (
            "str header value",
            {"topic": topic, "value": v, "headers": [("a", "b")]},
            TypeError,
            "headers[0]",
        ),
        (
            "bytes header name",
            {"topic": topic, "value": v, "headers": [(b"a", b"b")]},
            TypeError,
            "headers[0]",
        ),
        (
            "short header pair",
            {"topic": topic, "value": v, "headers": [("a", b"b"), ("c",)]},
            TypeError,
            "headers[1]",
        ),
        ("non-pair header", {"topic": topic, "value": v, "headers": [1]}, TypeError, "headers[0]"),
        (
            "negative timestamp",
            {"topic": topic, "value": v, "timestamp_ms": -5},
            ValueError,
            "timestamp_ms",
        ),
        (
            "float timestamp",
            {"topic": topic, "value": v, "timestamp_ms": 1.5},
            ValueError,
            "timestamp_ms",
        ),
        (
            "timestamp beyond int64",
            {"topic": topic, "value": v, "timestamp_ms": 2**63},
            ValueError,
            "2**63-1",
        ),
    ]


async def test_bad_records_fail_typed_and_good_ones_around_them_arrive(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(4)
    good_values: list[bytes] = []
    futs = []
    async with Producer(
        kafka_bootstrap, buffer_memory=BUFFER, max_block_ms=2000, linger_ms=50
    ) as p:
        # Each bad call is tried many times: anything it reserved and kept would
        # exhaust the 8 KiB buffer and make the good sends below time out.
        for round_ in range(20):
            for i, (what, kwargs, exc_type, text) in enumerate(_bad_calls(topic)):
                with pytest.raises(exc_type) as info:
                    await p.enqueue(**kwargs)
                assert text in str(info.value), (what, str(info.value))
                value = f"good-{round_}-{i}".encode() + b"." * 200
                futs.append(await within(p.enqueue(topic, value, partition=0), 5, "enqueue"))
                good_values.append(value)
            await within(p.flush(), 15, "flush")
        results = await gather_within(futs, 15, "good sends")
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]

    got = await read_back(kafka_bootstrap, topic, expected=len(good_values))
    assert [r.value for r in got] == good_values
    assert {r.partition for r in got} == {0}


async def test_record_larger_than_max_request_size(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory(1)
    async with Producer(kafka_bootstrap, max_request_size=10_000) as p:
        with pytest.raises(errors.RecordTooLargeError, match="max_request_size"):
            await p.enqueue(topic, b"x" * 10_000)
        with pytest.raises(errors.RecordTooLargeError, match="max_request_size"):
            await p.send(topic, b"v", key=b"k" * 20_000)
        with pytest.raises(errors.RecordTooLargeError, match="max_request_size"):
            await p.send(topic, b"v", headers=[("h", b"x" * 20_000)])
        md = await within(p.send(topic, b"x" * 9_000), 15, "send below the limit")
    assert md.serialized_value_size == 9_000
    got = await read_back(kafka_bootstrap, topic, expected=1)
    assert [len(r.value) for r in got] == [9_000]


async def test_serializer_errors_are_typed(kafka_bootstrap: str, topic_factory) -> None:
    topic = topic_factory(1)

    def encode(obj: object) -> bytes:
        if obj == "boom":
            raise RuntimeError("cannot encode")
        if obj == "not-bytes":
            return "still a str"  # type: ignore[return-value]
        return str(obj).encode()

    async with Producer(kafka_bootstrap, value_serializer=encode, key_serializer=encode) as p:
        with pytest.raises(errors.SerializationError, match="value serializer"):
            await p.send(topic, "boom")
        with pytest.raises(errors.SerializationError, match="key serializer"):
            await p.send(topic, "ok", key="boom")
        with pytest.raises(TypeError, match="value serializer returned str"):
            await p.send(topic, "not-bytes")
        md = await within(p.send(topic, "fine", key=7), 15, "send")
    assert (md.serialized_key_size, md.serialized_value_size) == (1, 4)
    got = await read_back(kafka_bootstrap, topic, expected=1)
    assert [(r.key, r.value) for r in got] == [(b"7", b"fine")]


async def test_use_before_start_is_illegal_state(kafka_bootstrap: str) -> None:
    p = Producer(kafka_bootstrap)
    with pytest.raises(errors.IllegalStateError):
        await p.send("topic", b"v")
    with pytest.raises(errors.IllegalStateError):
        await p.enqueue("topic", b"v")
    with pytest.raises(errors.IllegalStateError):
        await p.flush()
    with pytest.raises(errors.IllegalStateError):
        await p.partitions_for("topic")
    await p.close()


async def test_unreachable_bootstrap_fails_start_within_max_block() -> None:
    max_block_ms = 1500
    p = Producer(f"127.0.0.1:{closed_port()}", max_block_ms=max_block_ms)
    started = time.monotonic()
    with pytest.raises(errors.KafkaError) as info:
        await within(p.start(), max_block_ms / 1000 + 10, "start against a closed port")
    elapsed = time.monotonic() - started
    assert isinstance(info.value, errors.NoBrokersAvailableError), repr(info.value)
    assert elapsed < max_block_ms / 1000 + 5  # max_block_ms, with room for a slow machine
    with pytest.raises(errors.IllegalStateError):
        await p.send("topic", b"v")
    await within(p.close(), 5, "close after a failed start")


async def test_unknown_topic_without_auto_create_times_out(kafka_bootstrap: str) -> None:
    topic = f"never-created-{uuid.uuid4().hex[:10]}"
    max_block_ms = 1500
    async with Producer(
        kafka_bootstrap, allow_auto_create_topics=False, max_block_ms=max_block_ms
    ) as p:
        for call in (p.send(topic, b"v"), p.partitions_for(topic)):
            started = time.monotonic()
            with pytest.raises(errors.KafkaTimeoutError, match=topic):
                await within(call, max_block_ms / 1000 + 10, "send to a missing topic")
            elapsed = time.monotonic() - started
            # It really waited for metadata (max_block_ms), and not much longer
            # (the upper bound leaves room for a slow machine).
            assert max_block_ms / 1000 * 0.9 <= elapsed < max_block_ms / 1000 + 5
