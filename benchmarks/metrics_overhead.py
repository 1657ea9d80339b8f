"""What recording metrics costs per record: the same workload with metrics on and off.

    python -m benchmarks.metrics_overhead [--records 200000] [--repeat 7] [--bootstrap host:port]

Each run is one fresh producer enqueueing ``--records`` records of 100 bytes
(4 partitions, no key) and flushing; the clock (wall time and this process's
CPU time) covers enqueue + flush only. Without ``--bootstrap`` a mock cluster
runs in a child process (``aioproducer mock-broker``), so the CPU measured is
the producer's alone (a fresh one per run: it keeps every record in memory). Runs alternate on/off so drift on a shared machine hits
both alike; the table reports medians, and the on/off ratios of the medians
and of the best runs (the least disturbed by other load).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

from aioproducer import Producer


@contextlib.contextmanager
def mock_broker() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aioproducer.cli",
            "mock-broker",
            "--brokers",
            "1",
            "--port",
            "0",
            "--partitions",
            "4",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(10)


async def one_run(bootstrap: str, records: int, metrics: bool, topic: str) -> tuple[float, float]:
    value = b"x" * 100
    async with Producer(bootstrap, metrics_enabled=metrics) as producer:
        await producer.send(topic, b"warm-up")
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(records):
            await producer.enqueue(topic, value)
        await producer.flush()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if metrics:
            sent = next(v for m, v in producer.metrics().items() if m.name == "record-send-total")
            assert sent == records + 1, sent
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--bootstrap")
    parser.add_argument("--json", help="write the raw runs to this file")
    args = parser.parse_args()
    runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for i in range(args.repeat):
        for on in (True, False) if i % 2 else (False, True):
            # A fresh mock broker per run: it keeps every record in memory.
            with contextlib.ExitStack() as stack:
                bootstrap = args.bootstrap or stack.enter_context(mock_broker())
                runs[on].append(
                    asyncio.run(one_run(bootstrap, args.records, on, f"overhead-{i}-{on}"))
                )
    rows = []
    for on in (False, True):
        wall = statistics.median(w for w, _c in runs[on])
        cpu = statistics.median(c for _w, c in runs[on])
        rows.append((on, wall, cpu))
    print(f"{args.records} records x {args.repeat} runs each (medians)")
    print(f"{'metrics':>8} {'wall s':>8} {'CPU s':>8} {'CPU us/record':>14} {'records/s':>10}")
    for on, wall, cpu in rows:
        print(
            f"{'on' if on else 'off':>8} {wall:8.3f} {cpu:8.3f} {cpu / args.records * 1e6:14.2f} "
            f"{args.records / wall:10.0f}"
        )
    (_, off_wall, off_cpu), (_, on_wall, on_cpu) = rows
    print(f"on/off: wall {on_wall / off_wall:.3f}, CPU {on_cpu / off_cpu:.3f} (medians)")
    # The best run of each is the least disturbed by other load on a shared machine.
    best = {on: (min(w for w, _c in runs[on]), min(c for _w, c in runs[on])) for on in runs}
    print(
        f"on/off: wall {best[True][0] / best[False][0]:.3f}, "
        f"CPU {best[True][1] / best[False][1]:.3f} (best runs)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"records": args.records, "runs": {str(k): v for k, v in runs.items()}}, f)


if __name__ == "__main__":
    main()
