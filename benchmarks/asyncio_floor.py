"""What patterns (a) and (b) cost any asyncio client, before it produces anything.

Usage (from the repository root)::

    python -m benchmarks.asyncio_floor [--records 200000] [--runs 3]

A stand-in client with no encoding, no batching and no network does only what
every asyncio producer's per-record API implies. Per record:

* an ``await send(topic, value)`` coroutine that returns a new future;
* the caller keeps every future, as patterns a and b do;
* the result is a per-record metadata namedtuple, set in slices of 1,000 as
  acknowledgements would set them.

Pattern a then waits for the last future. Pattern b gathers the futures 1,000
at a time, so ``asyncio.gather`` adds a done-callback, a loop ``Handle`` and a
Python call per future.

``--handles`` also measures the same client returning
:class:`aioproducer.engine.record_handle.RecordHandle` views instead of
futures (one ``BatchOutcome`` per 500 records, each decided in one step): what
the floor becomes when a record's future is a view on its batch (compiled
when the kernels are built, else the pure reference). The CPU per record printed here is a floor. Compare
it with ``docs/benchmarks.md``: whatever a client spends above it goes on
encoding, partitioning, memory accounting, batching and I/O.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import resource
import statistics
from typing import Any

Metadata = collections.namedtuple(
    "Metadata", "topic partition offset timestamp key_size value_size"
)
SLICE = 1000
HANDLES_PER_BATCH = 500  # records per BatchOutcome with --handles


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _pattern(records: int, chunked: bool) -> float:
    """CPU seconds per record of one run of pattern a (``chunked=False``) or b."""
    loop = asyncio.get_running_loop()
    pending: list[asyncio.Future[Metadata]] = []
    new = tuple.__new__

    def acknowledge(start: int) -> None:
        stop = min(start + SLICE, len(pending))
        for offset in range(start, stop):
            pending[offset].set_result(new(Metadata, ("t", 0, offset, 0, -1, 100)))
        if stop < len(pending):
            loop.call_soon(acknowledge, stop)

    async def send(topic: str, value: bytes) -> asyncio.Future[Metadata]:
        future = loop.create_future()
        pending.append(future)
        return future

    value = bytes(100)
    futures = []
    keep = futures.append
    start = _cpu()
    for i in range(records):
        keep(await send("t", value))
        if i % 100 == 99:
            await asyncio.sleep(0)  # a producer gives the loop a turn now and then
    loop.call_soon(acknowledge, 0)
    if chunked:
        for first in range(0, records, SLICE):
            await asyncio.gather(*futures[first : first + SLICE])
    else:
        await futures[-1]
    return (_cpu() - start) / records


async def _handle_pattern(records: int, chunked: bool) -> float:
    """As :func:`_pattern`, with record handles over batch outcomes instead of futures."""
    from aioproducer.engine.batch import RecordMetadata
    from aioproducer.engine.record_handle import BatchOutcome, register_record_metadata

    register_record_metadata(RecordMetadata)  # as the producer does
    loop = asyncio.get_running_loop()
    outcomes: list[Any] = []
    filling: list[Any] = [None, HANDLES_PER_BATCH]  # the open outcome, records in it

    async def send(topic: str, value: bytes) -> Any:
        outcome, count = filling
        if count == HANDLES_PER_BATCH:
            outcome = BatchOutcome(loop, topic, 0, RecordMetadata)
            outcomes.append(outcome)
            count = 0
        filling[0], filling[1] = outcome, count + 1
        return outcome.handle(count, 0, 101)

    def acknowledge(start: int) -> None:
        stop = min(start + SLICE // HANDLES_PER_BATCH, len(outcomes))
        for i in range(start, stop):
            outcomes[i].complete(i * HANDLES_PER_BATCH)
        if stop < len(outcomes):
            loop.call_soon(acknowledge, stop)

    value = bytes(100)
    handles = []
    keep = handles.append
    start = _cpu()
    for i in range(records):
        keep(await send("t", value))
        if i % 100 == 99:
            await asyncio.sleep(0)
    loop.call_soon(acknowledge, 0)
    if chunked:
        for first in range(0, records, SLICE):
            await asyncio.gather(*handles[first : first + SLICE])
    else:
        await handles[-1]
    return (_cpu() - start) / records


def measure(records: int, runs: int, handles: bool = False) -> dict[str, list[float]]:
    """CPU µs per record of each run, by pattern (``"a"``, ``"b"``; ``"a handles"``,
    ``"b handles"`` too with ``handles``)."""
    out: dict[str, list[float]] = {}
    for name, chunked in (("a", False), ("b", True)):
        # Each run in a fresh event loop, as each client runs in its own process in run.py.
        out[name] = [asyncio.run(_pattern(records, chunked)) * 1e6 for _ in range(runs)]
        if handles:
            out[f"{name} handles"] = [
                asyncio.run(_handle_pattern(records, chunked)) * 1e6 for _ in range(runs)
            ]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--json", action="store_true", help="print one JSON line (benchmarks.run reads it)"
    )
    parser.add_argument(
        "--handles", action="store_true", help="also with record handles instead of futures"
    )
    args = parser.parse_args(argv)
    costs = measure(args.records, args.runs, args.handles)
    if args.json:
        print(json.dumps(costs))
        return
    for name, runs in costs.items():
        print(
            f"pattern {name}: {statistics.median(runs):.2f} µs CPU/record "
            f"(min {min(runs):.2f}, max {max(runs):.2f})"
        )


if __name__ == "__main__":
    main()
