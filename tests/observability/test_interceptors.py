"""Interceptors (Java's ProducerInterceptor) and W3C trace context, on the mock cluster."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from aioproducer import BulkSendError, Producer, RecordMetadata, errors
from aioproducer.telemetry.opentelemetry import TraceContextInterceptor, extract_context
from aioproducer.testing import MockCluster
from aioproducer.types import ProducerRecord

pytestmark = pytest.mark.asyncio


class Tagging:
    """Adds a header and sends everything of topic 'moved' to partition 1."""

    def __init__(self) -> None:
        self.acks: list[tuple[RecordMetadata, BaseException | None]] = []

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        record.headers = [*(record.headers or []), ("seen-by", b"tagging")]
        if record.topic == "moved" and record.partition is None:
            record.partition = 1
        return record

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None:
        self.acks.append((metadata, error))


class Broken:
    def __init__(self) -> None:
        self.calls = 0

    def on_send(self, record: ProducerRecord) -> Any:
        self.calls += 1
        if self.calls % 2:
            raise RuntimeError("on_send bug")
        return "not a record"

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None:
        raise RuntimeError("on_acknowledgement bug")


def _interceptor_errors(p: Producer) -> float:
    return next(v for m, v in p.metrics().items() if m.name == "interceptor-error-total")


async def test_on_send_changes_the_record_and_every_outcome_is_acknowledged() -> None:
    hook = Tagging()
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("moved", partitions=2)
        async with Producer(cluster.bootstrap_servers, linger_ms=0, interceptors=[hook]) as p:
            md = await p.send("moved", b"v", headers=[("h", b"1")])
            with pytest.raises(errors.InvalidPartitionError):
                await p.send("moved", b"bad", partition=-1)
            cluster.fail_produce("moved", 1, errors.TopicAuthorizationFailedError.code)
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await p.send("moved", b"refused")
        records = cluster.records("moved")
    assert [(r.partition, r.value, r.headers) for r in records] == [
        (1, b"v", [("h", b"1"), ("seen-by", b"tagging")])
    ]
    assert hook.acks[0] == (md, None) and md.partition == 1
    bad_md, bad_error = hook.acks[1]
    assert isinstance(bad_error, errors.InvalidPartitionError) and bad_md.offset == -1
    refused_md, refused_error = hook.acks[2]
    assert isinstance(refused_error, errors.TopicAuthorizationFailedError)
    assert (refused_md.topic, refused_md.partition, refused_md.offset) == ("moved", 1, -1)
    assert len(hook.acks) == 3


async def test_failing_hooks_are_counted_and_logged_rarely_and_never_break_delivery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken, tagging = Broken(), Tagging()
    caplog.set_level(logging.WARNING, logger="aioproducer")
    async with MockCluster(brokers=1) as cluster:
        async with Producer(
            cluster.bootstrap_servers, client_id="hooked", interceptors=[broken, tagging]
        ) as p:
            futures = [await p.enqueue("t", b"%d" % i) for i in range(20)]
            await p.flush()
            offsets = [f.result().offset for f in futures]
            error_count = _interceptor_errors(p)
        records = cluster.records("t")
    assert offsets == list(range(20))
    # The broken hook's failures left the record as it was; the next hook still ran.
    assert [r.value for r in records] == [b"%d" % i for i in range(20)]
    assert all(r.headers == [("seen-by", b"tagging")] for r in records)
    assert len(tagging.acks) == 20
    assert error_count == 20 + 20  # every on_send and every on_acknowledgement
    hook_lines = [r for r in caplog.records if "interceptor Broken" in r.getMessage()]
    # One line per hook method per interval, not one per record.
    assert len(hook_lines) == 2
    assert all(r.getMessage().startswith("[hooked] ") for r in hook_lines)
    assert {r.client_id for r in hook_lines} == {"hooked"}  # type: ignore[attr-defined]


async def test_an_object_without_hook_methods_is_refused() -> None:
    with pytest.raises(
        errors.ConfigurationError, match="neither an on_send nor an on_acknowledgement"
    ):
        Producer("127.0.0.1:1", interceptors=[object()])
    with pytest.raises(errors.ConfigurationError, match="list of objects"):
        Producer("127.0.0.1:1", interceptors="on_send")


async def test_trace_context_travels_in_the_record_headers() -> None:
    tracer = TracerProvider().get_tracer("test")
    async with MockCluster(brokers=1, default_partitions=1) as cluster:
        async with Producer(
            cluster.bootstrap_servers, linger_ms=0, interceptors=[TraceContextInterceptor()]
        ) as p:
            with tracer.start_as_current_span("handle-request") as span:
                await p.send("traced", b"in a span", headers=[("traceparent", b"stale")])
            upstream = SpanContext(
                trace_id=0x0AF7651916CD43DD8448EB211C80319C,
                span_id=0xB7AD6B7169203331,
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
                trace_state=TraceState([("vendor", "v1")]),
            )
            with trace.use_span(NonRecordingSpan(upstream)):
                await p.send("traced", b"with state")
            await p.send("traced", b"no span")
        first, second, third = cluster.records("traced")
    ctx = span.get_span_context()
    assert dict(first.headers) == {
        "traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}".encode()
    }
    assert dict(second.headers) == {
        "traceparent": b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": b"vendor=v1",
    }
    assert third.headers == []
    carried = trace.get_current_span(extract_context(second.headers)).get_span_context()
    assert (carried.trace_id, carried.span_id) == (upstream.trace_id, upstream.span_id)


async def test_bulk_records_meet_the_hooks_one_by_one() -> None:
    import pyarrow as pa

    hook = Tagging()
    values = [b"bulk-%03d" % i for i in range(300)]
    async with MockCluster(brokers=2) as cluster:
        cluster.create_topic("moved", partitions=2)
        cluster.create_topic("plain", partitions=3)
        async with Producer(cluster.bootstrap_servers, linger_ms=2, interceptors=[hook]) as p:
            moved = await p.send_many("moved", values[:200], headers=[("src", b"bulk")])
            arrow = await p.send_many(
                "plain", pa.array(values[200:], pa.binary()), keys=pa.array(["k"] * 100)
            )
        stored = {r.value: r for t in ("moved", "plain") for r in cluster.records(t)}
    assert len(stored) == 300
    for i in range(200):  # on_send's changes reached the broker: header added, partition 1
        record = stored[values[i]]
        assert record.partition == 1 == moved[i].partition
        assert record.headers == [("src", b"bulk"), ("seen-by", b"tagging")]
    for i in range(100):
        assert stored[values[200 + i]].key == b"k"
        assert stored[values[200 + i]].offset == arrow[i].offset
    # One acknowledgement per record, each with that record's metadata.
    assert len(hook.acks) == 300 and all(error is None for _md, error in hook.acks)
    assert sorted((md.topic, md.partition, md.offset) for md, _ in hook.acks) == sorted(
        [("moved", moved[i].partition, moved[i].offset) for i in range(200)]
        + [("plain", arrow[i].partition, arrow[i].offset) for i in range(100)]
    )


async def test_a_bulk_record_failing_or_moved_to_another_topic_is_acknowledged_with_its_error() -> (
    None
):
    class MoveSecond:
        def on_send(self, record: ProducerRecord) -> ProducerRecord:
            if record.value == b"1":
                record.topic = "elsewhere"
            return record

    hook = Tagging()
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("moved", partitions=2)
        cluster.create_topic("other", partitions=2)
        async with Producer(cluster.bootstrap_servers, linger_ms=0, interceptors=[hook]) as p:
            cluster.fail_produce("moved", 1, errors.TopicAuthorizationFailedError.code)
            with pytest.raises(BulkSendError) as failed:
                await p.send_many("moved", [b"a", b"b"])
            assert set(failed.value.result.errors) == {1}
        async with Producer(
            cluster.bootstrap_servers, linger_ms=0, interceptors=[MoveSecond(), hook]
        ) as p:
            with pytest.raises(ValueError, match="record 1 to topic 'elsewhere'"):
                await p.send_many("other", [b"0", b"1", b"2"])
        assert cluster.records("moved") == [] and cluster.records("other") == []
    refused = hook.acks[:2]
    assert all(isinstance(e, errors.TopicAuthorizationFailedError) for _md, e in refused)
    assert [(md.topic, md.partition, md.offset) for md, _ in refused] == [("moved", 1, -1)] * 2
    moved = hook.acks[2:]
    assert len(moved) == 3 and all(isinstance(e, ValueError) for _md, e in moved)


async def test_an_arrow_column_with_a_serializer_is_refused_with_hooks_as_without() -> None:
    import pickle

    import pyarrow as pa

    hook = Tagging()
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("plain", partitions=1)
        for interceptors in ([], [hook]):
            async with Producer(
                cluster.bootstrap_servers, value_serializer=pickle.dumps, interceptors=interceptors
            ) as p:
                with pytest.raises(TypeError, match="cannot go through a values serializer"):
                    await p.send_many("plain", pa.array([b"ab"]))
        assert cluster.records("plain") == []
