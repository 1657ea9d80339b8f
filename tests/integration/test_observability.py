"""On a real broker: trace context reaches consumers, and the metrics match what was stored."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from aioproducer import Producer
from aioproducer.telemetry.opentelemetry import TraceContextInterceptor, extract_context
from tests.support.aio import gather_within, read_back

pytestmark = pytest.mark.asyncio


async def test_traceparent_headers_and_send_totals_on_the_broker(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = topic_factory(2)
    tracer = TracerProvider().get_tracer("integration")
    async with Producer(
        kafka_bootstrap, client_id="traced", interceptors=[TraceContextInterceptor()]
    ) as p:
        spans = []
        futures = []
        for i in range(20):
            with tracer.start_as_current_span(f"request-{i}") as span:
                spans.append(span.get_span_context())
                futures.append(await p.enqueue(topic, b"%d" % i, headers=[("n", b"%d" % i)]))
        results = await gather_within(futures, 30, "sends")
        metrics = p.metrics()
    got = await read_back(kafka_bootstrap, topic, expected=20)
    assert len(got) == 20 and all(r.offset >= 0 for r in results)
    for record in got:
        i = int(record.value)
        headers = dict(record.headers)
        assert headers["n"] == b"%d" % i and record.headers[0] == ("n", b"%d" % i)
        carried = trace.get_current_span(extract_context(record.headers)).get_span_context()
        assert (carried.trace_id, carried.span_id) == (spans[i].trace_id, spans[i].span_id)
    totals = {
        (m.group, m.tag("topic")): v for m, v in metrics.items() if m.name == "record-send-total"
    }
    assert totals == {("producer-metrics", None): 20, ("producer-topic-metrics", topic): 20}
