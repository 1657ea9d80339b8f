"""CPU per record of the Schema Registry serializers, ours beside confluent-kafka's, and loop lag.

    python -m benchmarks.schema_registry                       # 200,000 records, 3 rounds
    python -m benchmarks.schema_registry --records 20000 --rounds 1 --subjects 50   # a smoke run

The records are one 10-field record (longs, ints, doubles, a float, a boolean,
strings, a nullable string), each a distinct dict, written as Avro and as JSON
Schema (validated, as both libraries do by default). Per format, one process
measures, round after round, the same records through:

- ``confluent-kafka``: its ``AvroSerializer`` / ``JSONSerializer``, called per record
  with a ``SerializationContext`` (its schema id cached after the first call);
- ``aioproducer per record``: ``serializer(obj, topic)`` per record, what ``send`` and
  ``enqueue`` do once the topic is prepared;
- ``aioproducer bulk``: what ``enqueue_many``/``send_many`` do with the values of a call:
  one ``prepare(topic)`` per call of 10,000 values, then the column serialized in one pass
  (``aioproducer.bulk.input.bytes_column``, which uses the serializer's ``many`` path).

The figure is the process's CPU time (``time.process_time``) per record, median of the
rounds; the ratio is against confluent-kafka's. Every payload is checked byte for byte
against confluent-kafka's before timing. The registry (``MockSchemaRegistry``) runs in a
process of its own, so its work is not counted.

The loop-lag line: a fresh client (cold caches) resolves the schemas of ``--subjects``
topics at once (``prepare`` of each, concurrently), while a ticker task asks to wake every
millisecond and records how late it wakes: p50/p99/max lateness, for Avro and JSON. Beside
it, the CPU time the loop's thread spent within a tick (``time.thread_time``): on a busy
machine a tick is also late because the process was not scheduled, which the CPU column
does not count; a tick whose CPU time is near its lateness was held up by work on the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

_REGISTRY = """
import asyncio, sys
from aioproducer.testing.mock_schema_registry import MockSchemaRegistry

async def serve():
    async with MockSchemaRegistry(compatibility="NONE") as registry:
        print(registry.url, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(serve())
"""

AVRO = json.dumps(
    {
        "type": "record",
        "name": "Event",
        "namespace": "bench",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "user", "type": "string"},
            {"name": "amount", "type": "double"},
            {"name": "quantity", "type": "int"},
            {"name": "paid", "type": "boolean"},
            {"name": "country", "type": "string"},
            {"name": "created_ms", "type": "long"},
            {"name": "score", "type": "float"},
            {"name": "coupon", "type": ["null", "string"], "default": None},
            {"name": "city", "type": "string"},
        ],
    }
)
JSON_SCHEMA = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "bench.Event",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "user": {"type": "string"},
            "amount": {"type": "number"},
            "quantity": {"type": "integer", "minimum": 0},
            "paid": {"type": "boolean"},
            "country": {"type": "string", "maxLength": 2},
            "created_ms": {"type": "integer"},
            "score": {"type": "number"},
            "coupon": {"type": ["null", "string"]},
            "city": {"type": "string"},
        },
        "required": ["id", "user", "amount", "quantity", "paid", "created_ms"],
        "additionalProperties": False,
    }
)
CHUNK = 10_000


def make_records(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "user": f"user-{i % 5000}",
            "amount": i * 0.25,
            "quantity": i % 17,
            "paid": i % 2 == 0,
            "country": "NL",
            "created_ms": 1_700_000_000_000 + i,
            "score": 0.5,
            "coupon": None if i % 3 else f"C{i % 100}",
            "city": "Amsterdam",
        }
        for i in range(n)
    ]


def _median_us(samples: list[float], n: int) -> float:
    return statistics.median(samples) / n * 1e6


def cpu(fn: Callable[[], Any]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


async def _ours(url: str, fmt: str, topic: str) -> Any:
    from aioproducer.schema_registry import (
        AvroSerializer,
        JsonSchemaSerializer,
        SchemaRegistryClient,
    )

    client = SchemaRegistryClient(url)
    if fmt == "avro":
        serializer: Any = AvroSerializer(client, AVRO)
    else:
        serializer = JsonSchemaSerializer(client, JSON_SCHEMA)
    await serializer.prepare(topic)
    return client, serializer


def _confluent(url: str, fmt: str) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    client = SchemaRegistryClient({"url": url})
    if fmt == "avro":
        return AvroSerializer(client, AVRO)
    return JSONSerializer(JSON_SCHEMA, client)


def measure_format(
    url: str, fmt: str, records: list[dict[str, Any]], rounds: int
) -> dict[str, float]:
    from confluent_kafka.serialization import MessageField, SerializationContext

    from aioproducer.bulk.input import bytes_column

    topic = f"bench-{fmt}"
    loop = asyncio.new_event_loop()
    client, ours = loop.run_until_complete(_ours(url, fmt, topic))
    theirs = _confluent(url, fmt)
    ctx = SerializationContext(topic, MessageField.VALUE)
    n = len(records)

    sample = records[:1000]
    expected = [theirs(r, ctx) for r in sample]
    mismatched = sum(a != b for a, b in zip(expected, (ours(r, topic) for r in sample)))
    if mismatched:
        raise SystemExit(
            f"{fmt}: {mismatched} of {len(sample)} payloads differ from confluent-kafka's"
        )

    def confluent_run() -> None:
        for r in records:
            theirs(r, ctx)

    def per_record() -> None:
        for r in records:
            ours(r, topic)

    def bulk() -> None:
        for first in range(0, n, CHUNK):
            loop.run_until_complete(ours.prepare(topic))  # once per call, as enqueue_many
            out = bytes_column(
                records[first : first + CHUNK], "values", ours.for_topic(topic), topic
            )
            assert len(out) == min(CHUNK, n - first)

    samples: dict[str, list[float]] = {"confluent": [], "per_record": [], "bulk": []}
    for _ in range(rounds):
        samples["confluent"].append(cpu(confluent_run))
        samples["per_record"].append(cpu(per_record))
        samples["bulk"].append(cpu(bulk))
    loop.run_until_complete(client.close())
    loop.close()
    return {name: _median_us(s, n) for name, s in samples.items()}


async def _lag_rounds(
    url: str, fmt: str, subjects: int, rounds: int
) -> tuple[list[float], list[float]]:
    lags: list[float] = []
    cpus: list[float] = []
    for run in range(rounds):
        lag, cpu_s = await _lag(url, fmt, subjects, f"lag-{fmt}-{run}")
        lags += lag
        cpus += cpu_s
    return lags, cpus


async def _lag(url: str, fmt: str, subjects: int, prefix: str) -> tuple[list[float], list[float]]:
    from aioproducer.schema_registry import (
        AvroSerializer,
        JsonSchemaSerializer,
        SchemaRegistryClient,
    )

    lags: list[float] = []
    cpus: list[float] = []  # CPU time of the loop's thread within each tick
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start, cpu_start = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - start - 0.001)
            cpus.append(time.thread_time() - cpu_start)

    async with SchemaRegistryClient(url) as client:  # a fresh client: every cache cold
        if fmt == "avro":
            serializer: Any = AvroSerializer(client, AVRO)
        else:
            serializer = JsonSchemaSerializer(client, JSON_SCHEMA)
        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)  # the ticker running before the first request
        lags.clear()
        cpus.clear()
        await asyncio.wait_for(
            asyncio.gather(*(serializer.prepare(f"{prefix}-{i}") for i in range(subjects))), 120
        )
        done.set()
        await tick
    return lags, cpus


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--formats", default="avro,json")
    parser.add_argument("--subjects", type=int, default=200, help="schemas resolved in the lag run")
    parser.add_argument("--lag-rounds", type=int, default=5, help="lag runs, ticks pooled")
    args = parser.parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]

    registry = subprocess.Popen(
        [sys.executable, "-c", _REGISTRY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert registry.stdout is not None
        url = registry.stdout.readline().strip()
        records = make_records(args.records)
        print(
            f"{args.records:,} records of 10 fields, median of {args.rounds} round(s), "
            f"CPU µs per record (ratio to confluent-kafka's)\n"
        )
        print("| format | confluent-kafka | aioproducer per record | aioproducer bulk |")
        print("|---|---|---|---|")
        for fmt in formats:
            got = measure_format(url, fmt, records, args.rounds)
            base = got["confluent"]
            print(
                f"| {'Avro' if fmt == 'avro' else 'JSON Schema'} | {base:.2f} | "
                f"{got['per_record']:.2f} ({got['per_record'] / base:.2f}x) | "
                f"{got['bulk']:.2f} ({got['bulk'] / base:.2f}x) |"
            )
        print(
            f"\nLoop lag while a cold client resolves {args.subjects} schemas at once "
            f"(ticker asking for 1 ms; {args.lag_rounds} runs, new topics each)\n"
        )
        print("| format | p50 ms | p99 ms | max ms | loop CPU per tick, p99 / max ms | ticks |")
        print("|---|---|---|---|---|---|")
        for fmt in formats:
            lags, cpus = asyncio.run(_lag_rounds(url, fmt, args.subjects, args.lag_rounds))
            print(
                f"| {'Avro' if fmt == 'avro' else 'JSON Schema'} | {_pct(lags, 0.5):.2f} | "
                f"{_pct(lags, 0.99):.2f} | {max(lags) * 1e3:.2f} | "
                f"{_pct(cpus, 0.99):.2f} / {max(cpus) * 1e3:.2f} | {len(lags)} |"
            )
    finally:
        if registry.stdin is not None:
            registry.stdin.close()
        registry.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
