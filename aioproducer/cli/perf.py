"""``aioproducer perf``: produce N records as fast as allowed and report rates and latencies.

The counterpart of Kafka's ``kafka-producer-perf-test``: same options where they
exist, same progress line every ``--reporting-interval`` (records sent, records/s,
MB/s, average and maximum latency over the interval), and a final summary with
latency percentiles. A record's latency runs from the call that hands it to the
producer (so time blocked on a full buffer counts) to its acknowledgement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from array import array
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from .common import (
    EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    CommandError,
    UsageError,
    add_property_options,
    fail,
    producer_properties,
    start_producer,
    stop_on_signals,
)

__all__ = ["LatencyStats", "add_parser", "percentile", "run", "summary_json", "summary_line"]

MB = 1024 * 1024
# Bound on delivering what is buffered after the last record (or after Ctrl-C).
_FLUSH_TIMEOUT = 120.0


def add_parser(commands: Any) -> None:
    perf = commands.add_parser(
        "perf",
        help="producer performance test (like kafka-producer-perf-test)",
        description=__doc__.split("\n\n")[1].replace("``", "") if __doc__ else None,
        epilog="Without --bootstrap-server the embedded Tansu broker is started on a free "
        "loopback port for the run.\n\n" + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    perf.add_argument("--topic", required=True, help="topic to produce to")
    perf.add_argument("--num-records", type=int, required=True, help="records to produce")
    size = perf.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int, help="bytes of each record's value")
    size.add_argument(
        "--payload-file",
        help="file of payloads split by --payload-delimiter; each record takes one at random",
    )
    perf.add_argument(
        "--payload-delimiter",
        default="\\n",
        help="payload separator in --payload-file (default \\n)",
    )
    perf.add_argument(
        "--throughput",
        type=float,
        default=-1,
        help="cap in records/s; -1 for none (default)",
    )
    perf.add_argument(
        "--bulk",
        action="store_true",
        help="hand records over in chunks through Producer.enqueue_many (the bulk path); "
        "a record's latency is then its chunk's",
    )
    perf.add_argument(
        "--bulk-size", type=int, default=1000, metavar="N", help="records per chunk (default 1000)"
    )
    perf.add_argument(
        "--bootstrap-server", help="host:port,... (default: start an embedded broker)"
    )
    add_property_options(perf, "--producer-property")
    perf.add_argument(
        "--producer-props",
        nargs="+",
        action="extend",
        dest="properties",
        metavar="NAME=VALUE",
        help="Java producer properties, as kafka-producer-perf-test takes them "
        "(bootstrap.servers here stands for --bootstrap-server)",
    )
    perf.add_argument(
        "--reporting-interval",
        type=int,
        default=5000,
        metavar="MS",
        help="milliseconds between progress lines (default 5000)",
    )
    perf.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    perf.set_defaults(run=run)


# -- measuring ---------------------------------------------------------------------------


def percentile(sorted_values: Any, q: float) -> float:
    """The ``q`` quantile (0..1) of ascending values, nearest rank; NaN when empty."""
    if not len(sorted_values):
        return math.nan
    rank = max(0, math.ceil(q * len(sorted_values)) - 1)
    return float(sorted_values[rank])


class LatencyStats:
    """Completed records: totals, the current reporting window, every latency (ms)."""

    def __init__(self, now: float) -> None:
        self.start = now
        self.latencies = array("d")
        self.bytes = 0
        self.errors = 0
        self.first_error: BaseException | None = None
        self._window_start = now
        self._window_count = self._window_bytes = 0
        self._window_sum = self._window_max = 0.0

    def record(self, latency_ms: float, size: int, error: BaseException | None) -> None:
        if error is not None:
            self.errors += 1
            self.first_error = self.first_error or error
            return
        self.latencies.append(latency_ms)
        self.bytes += size
        self._window_count += 1
        self._window_bytes += size
        self._window_sum += latency_ms
        self._window_max = max(self._window_max, latency_ms)

    def record_chunk(
        self, latency_ms: float, count: int, size: int, failed: int, error: BaseException | None
    ) -> None:
        """A bulk chunk: ``count`` delivered records of ``size`` bytes in all, ``failed`` not."""
        if failed:
            self.errors += failed
            self.first_error = self.first_error or error
        if count:
            self.latencies.extend(array("d", [latency_ms]) * count)
            self.bytes += size
            self._window_count += count
            self._window_bytes += size
            self._window_sum += latency_ms * count
            self._window_max = max(self._window_max, latency_ms)

    def window(self, now: float) -> dict[str, float]:
        """The reporting window since the last call, then a new window."""
        elapsed = max(now - self._window_start, 1e-9)
        count = self._window_count
        out = {
            "records": count,
            "records_per_sec": count / elapsed,
            "mb_per_sec": self._window_bytes / MB / elapsed,
            "avg_latency_ms": self._window_sum / count if count else math.nan,
            "max_latency_ms": self._window_max if count else math.nan,
        }
        self._window_start = now
        self._window_count = self._window_bytes = 0
        self._window_sum = self._window_max = 0.0
        return out

    def summary(self, now: float) -> dict[str, Any]:
        elapsed = max(now - self.start, 1e-9)
        ordered = sorted(self.latencies)
        count = len(ordered)
        return {
            "records": count,
            "errors": self.errors,
            "elapsed_sec": elapsed,
            "records_per_sec": count / elapsed,
            "mb_per_sec": self.bytes / MB / elapsed,
            "avg_latency_ms": sum(ordered) / count if count else math.nan,
            "max_latency_ms": ordered[-1] if count else math.nan,
            "p50_ms": percentile(ordered, 0.50),
            "p95_ms": percentile(ordered, 0.95),
            "p99_ms": percentile(ordered, 0.99),
            "p999_ms": percentile(ordered, 0.999),
        }


def _ms(value: float, digits: int) -> str:
    """A latency for a text line; ``n/a`` when no record completed (NaN)."""
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def window_line(w: dict[str, float]) -> str:
    return (
        f"{w['records']} records sent, {w['records_per_sec']:.1f} records/sec "
        f"({w['mb_per_sec']:.2f} MB/sec), {_ms(w['avg_latency_ms'], 1)} ms avg latency, "
        f"{_ms(w['max_latency_ms'], 1)} ms max latency."
    )


def summary_line(s: dict[str, Any]) -> str:
    return (
        f"{s['records']} records sent, {s['records_per_sec']:.1f} records/sec "
        f"({s['mb_per_sec']:.2f} MB/sec), {_ms(s['avg_latency_ms'], 2)} ms avg latency, "
        f"{_ms(s['max_latency_ms'], 2)} ms max latency, {_ms(s['p50_ms'], 1)} ms 50th, "
        f"{_ms(s['p95_ms'], 1)} ms 95th, {_ms(s['p99_ms'], 1)} ms 99th, "
        f"{_ms(s['p999_ms'], 1)} ms 99.9th."
    )


def summary_json(topic: str, s: dict[str, Any]) -> str:
    """The summary as one JSON object; a latency no record measured is null (NaN is not JSON)."""
    clean = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in s.items()}
    return json.dumps({"topic": topic, **clean})


# -- producing ---------------------------------------------------------------------------


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if args.record_size is not None:
        if args.record_size < 0:
            raise UsageError("--record-size must be >= 0")
        rng = random.Random(0)  # random letters, as Kafka's tool: compresses like text
        return [bytes(rng.randrange(65, 91) for _ in range(args.record_size))]
    delimiter = args.payload_delimiter.encode().decode("unicode_escape").encode()
    try:
        data = Path(args.payload_file).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.payload_file}: {exc.strerror or exc}") from None
    payloads = [p for p in data.split(delimiter) if p]
    if not payloads:
        raise UsageError(f"{args.payload_file} holds no payload")
    return payloads


async def _produce(
    args: argparse.Namespace,
    producer: Any,
    payloads: list[bytes],
    stats: LatencyStats,
    stop: asyncio.Event,
) -> bool:
    """Hand every record to the producer at the allowed rate; False if stopped early."""
    clock = time.perf_counter
    pick: Callable[[], bytes] = (
        (lambda: payloads[0]) if len(payloads) == 1 else partial(random.Random(0).choice, payloads)
    )
    done = stats.record

    def on_done(sent: float, size: int, fut: asyncio.Future[Any]) -> None:
        error = asyncio.CancelledError() if fut.cancelled() else fut.exception()
        done((clock() - sent) * 1000, size, error)

    rate = args.throughput if args.throughput > 0 else None
    if args.bulk:
        return await _produce_bulk(args, producer, pick, stats, stop, rate)
    start = clock()
    for i in range(args.num_records):
        if stop.is_set():
            return False
        payload = pick()
        sent = clock()
        fut = await producer.enqueue(args.topic, payload)
        fut.add_done_callback(partial(on_done, sent, len(payload)))
        if rate is not None:
            ahead = start + (i + 1) / rate - clock()
            if ahead > 0.001:  # sleeping shorter than the loop's resolution only costs
                await asyncio.sleep(ahead)
    return True


async def _produce_bulk(
    args: argparse.Namespace,
    producer: Any,
    pick: Callable[[], bytes],
    stats: LatencyStats,
    stop: asyncio.Event,
    rate: float | None,
) -> bool:
    """As :func:`_produce`, in chunks of ``--bulk-size`` through ``enqueue_many``."""
    from .. import BulkSendError

    clock = time.perf_counter

    def on_done(sent: float, size: int, count: int, fut: asyncio.Future[Any]) -> None:
        latency = (clock() - sent) * 1000
        error = asyncio.CancelledError() if fut.cancelled() else fut.exception()
        if error is None:
            stats.record_chunk(latency, count, size, 0, None)
        elif isinstance(error, BulkSendError):
            failed = sum(len(f.indices) for f in error.result.errors.values())
            share = size * (count - failed) // count
            stats.record_chunk(latency, count - failed, share, failed, error)
        else:
            stats.record_chunk(latency, 0, 0, count, error)

    start = clock()
    done = 0
    while done < args.num_records:
        if stop.is_set():
            return False
        values = [pick() for _ in range(min(args.bulk_size, args.num_records - done))]
        sent = clock()
        fut = await producer.enqueue_many(args.topic, values)
        fut.add_done_callback(partial(on_done, sent, sum(map(len, values)), len(values)))
        done += len(values)
        if rate is not None:
            ahead = start + done / rate - clock()
            if ahead > 0.001:
                await asyncio.sleep(ahead)
    return True


async def _report(stats: LatencyStats, interval: float, out: Any) -> None:
    while True:
        await asyncio.sleep(interval)
        print(window_line(stats.window(time.perf_counter())), file=out, flush=True)


async def _run(
    args: argparse.Namespace, bootstrap: str, props: dict[str, str], payloads: list[bytes]
) -> int:
    from .. import errors

    producer = await start_producer(props, bootstrap)
    progress_out = sys.stderr if args.json else sys.stdout
    stats = LatencyStats(time.perf_counter())
    reporter = asyncio.create_task(_report(stats, args.reporting_interval / 1000, progress_out))
    completed = broke_off = False
    try:
        with stop_on_signals(asyncio.get_running_loop()) as stop:
            completed = await _produce(args, producer, payloads, stats, stop)
            await producer.flush(timeout=_FLUSH_TIMEOUT)
    except errors.KafkaError as exc:  # a bound reached (max.block.ms, flush): report what was done
        fail(str(exc))
        broke_off = True
    finally:
        reporter.cancel()
        await producer.close(timeout=10)
    summary = stats.summary(time.perf_counter())
    if args.json:
        print(summary_json(args.topic, summary), flush=True)
    else:
        print(summary_line(summary), flush=True)
    if stats.errors:
        fail(f"{stats.errors} record(s) failed; the first: {stats.first_error}")
    if stats.errors or broke_off:
        return EXIT_FAILED
    if not completed:
        return EXIT_INTERRUPTED
    return EXIT_OK if summary["records"] == args.num_records else EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    from ..embedded import BrokerBinaryUnavailable, BrokerStartError, bootstrap_or_local

    if args.num_records < 1:
        raise UsageError(f"--num-records must be > 0, got {args.num_records}")
    if args.throughput == 0 or args.reporting_interval <= 0 or args.bulk_size < 1:
        raise UsageError("--throughput must be > 0 or -1, --reporting-interval and --bulk-size > 0")
    props = producer_properties(args)
    # kafka-producer-perf-test takes the cluster as --producer-props bootstrap.servers=...
    bootstrap_server = args.bootstrap_server or props.pop("bootstrap.servers", None)
    payloads = _payloads(args)  # a bad file is a usage error before any broker starts

    def announce(address: str) -> None:
        print(f"started the embedded broker at {address}", file=sys.stderr, flush=True)

    try:
        with bootstrap_or_local(bootstrap_server, announce=announce) as bootstrap:
            return asyncio.run(_run(args, bootstrap, props, payloads))
    except (BrokerBinaryUnavailable, BrokerStartError) as exc:
        raise CommandError(f"cannot start the embedded broker: {exc}", EXIT_UNAVAILABLE) from None
