"""One Python client at a fixed rate while ``benchmarks/failover.py`` kills a leader.

Usage (started by the orchestrator, one process per client and kill)::

    python -m benchmarks.failover_clients --client aioproducer|aioproducer-no-hints|librdkafka \\
        --bootstrap B --topic T --rate 10000 --size 100 --out FILE

The protocol is the Java peer's (``benchmarks/java/FailoverBench.java``): the
client sends one record and waits for its acknowledgement, prints
``{"event":"ready"}``, then sends record ``i`` when it is due
(``start + i / rate``) until a line arrives on stdin. It waits for every
outcome, writes each record's due time and acknowledgement time (epoch
microseconds, -1 for a failure) to FILE as JSON and prints ``{"event":"done"}``.
Every client is idempotent with ``acks=all`` and ``linger.ms=5``; everything
else is the client's default. ``aioproducer-no-hints`` ignores the new leader
a produce refusal names (KIP-951), to show what the hints save.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

CLIENTS = ("aioproducer", "aioproducer-no-hints", "librdkafka")
_TICK = 0.001


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _stop_on_stdin() -> threading.Event:
    stop = threading.Event()

    def wait() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait, daemon=True, name="stop-on-stdin").start()
    return stop


def _now_us() -> int:
    return time.time_ns() // 1000


class Record:
    """Due and acknowledgement times (epoch microseconds) of every record sent."""

    def __init__(self) -> None:
        self.due_us: list[int] = []
        self.ack_us: list[int] = []
        self.failed = 0
        self.first_error: str | None = None

    def add(self, due_us: int) -> int:
        self.due_us.append(due_us)
        self.ack_us.append(0)
        return len(self.due_us) - 1

    def done(self, index: int, error: object | None) -> None:
        if error is None:
            self.ack_us[index] = _now_us()
            return
        self.ack_us[index] = -1
        self.failed += 1
        if self.first_error is None:
            self.first_error = repr(error)

    def write(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(
                {
                    "failed": self.failed,
                    "first_error": self.first_error,
                    "due_us": self.due_us,
                    "ack_us": self.ack_us,
                },
                f,
            )


def _outcome(fut: asyncio.Future[Any]) -> object | None:
    return "cancelled" if fut.cancelled() else fut.exception()


async def run_aioproducer(args: argparse.Namespace, hints: bool) -> Record:
    from aioproducer import Producer

    value = os.urandom(args.size)
    log = Record()
    producer = Producer(
        args.bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        compression=args.compression,
        client_id="aioproducer-failover-bench",
    )
    await producer.start()
    try:
        if not hints:
            producer._running.client.use_leader_hints = False  # type: ignore[union-attr]
        await producer.send(args.topic, value)
        stop = _stop_on_stdin()
        _emit({"event": "ready"})
        loop = asyncio.get_running_loop()
        start, start_us = loop.time(), _now_us()
        futures = []
        sent = 0
        while not stop.is_set():
            due_now = int((loop.time() - start) * args.rate) + 1
            while sent < due_now:
                index = log.add(start_us + int(sent * 1e6 / args.rate))
                fut = await producer.enqueue(args.topic, value)
                fut.add_done_callback(lambda f, i=index: log.done(i, _outcome(f)))
                futures.append(fut)
                sent += 1
            await asyncio.sleep(_TICK)
        await asyncio.wait_for(producer.flush(), 300)
    finally:
        await producer.close()
    return log


def run_librdkafka(args: argparse.Namespace) -> Record:
    from confluent_kafka import Producer

    value = os.urandom(args.size)
    log = Record()
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": args.compression,
            "client.id": "librdkafka-failover-bench",
        }
    )
    warm: list[object] = []
    producer.produce(args.topic, value, on_delivery=lambda err, _msg: warm.append(err))
    producer.flush(120)
    if not warm or warm[0] is not None:
        raise RuntimeError(f"the warm-up record failed: {warm}")
    stop = _stop_on_stdin()
    _emit({"event": "ready"})
    start, start_us = time.monotonic(), _now_us()
    sent = 0
    while not stop.is_set():
        due_now = int((time.monotonic() - start) * args.rate) + 1
        while sent < due_now:
            index = log.add(start_us + int(sent * 1e6 / args.rate))
            producer.produce(
                args.topic, value, on_delivery=lambda err, _msg, i=index: log.done(i, err)
            )
            sent += 1
        producer.poll(_TICK)
    left = producer.flush(300)
    if left:
        raise RuntimeError(f"{left} records still unacknowledged 300 s after the stop")
    return log


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--client", choices=CLIENTS, required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--rate", type=int, default=10_000)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--compression", default="none")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.client == "librdkafka":
        log = run_librdkafka(args)
    else:
        log = asyncio.run(run_aioproducer(args, hints=args.client == "aioproducer"))
    log.write(args.out)
    _emit({"event": "done", "sent": len(log.due_us), "failed": log.failed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
