"""CPU per record of the producer's own work against MockCluster: compiled kernels vs pure Python.

Usage (from the repository root)::

    python -m benchmarks.kernels                      # both paths, alternating, 5 rounds
    python -m benchmarks.kernels --records 200000 --rounds 7 --patterns a,ak,d
    python -m benchmarks.kernels --profile a          # cProfile of one pattern, top entries
    python -m benchmarks.kernels --split a            # CPU per record by task, both paths

Each measurement runs in a fresh process, ``AIOPRODUCER_NO_EXTENSIONS=1`` selecting the pure
Python path, the two paths alternating so that load on a shared machine hits both alike. The
figure is the producer process's CPU time (``time.process_time``) per record,
not wall time, which a busy machine distorts more. MockCluster runs in a process of its own,
so its work (parsing every batch) is not counted. Patterns: ``a`` (``await enqueue()`` per
record, keep the futures, ``flush()``), ``ak`` (the same with a distinct key per record:
murmur2 and keyed encoding), ``d`` (``enqueue_many()``, 10,000 values per call), ``dk`` (the
same with keys and a header).

``--split`` says where that CPU goes: each event-loop callback's thread time is
charged to its task (the caller's, the sender's request tasks, the sender's
loop, the connection's reader) or to the loop itself, per record, with the
cyclic garbage collector on and then off (its share lands on whichever task
allocated when it ran).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

PATTERNS = ("a", "ak", "d", "dk")
_CHUNK = 10_000


_CLUSTER = """
import asyncio, sys
from aioproducer.testing import MockCluster

async def serve():
    async with MockCluster(brokers=1) as cluster:
        cluster.create_topic("kernels", partitions=4)
        print(cluster.bootstrap_servers, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(serve())
"""


async def _run(pattern: str, records: int, size: int) -> float:
    from aioproducer import Producer

    value = b"x" * size
    keys = [b"key-%d" % i for i in range(records)] if pattern.endswith("k") else None
    # The mock broker runs in a process of its own: its parsing of every
    # record is not the producer's work and stays out of this process's CPU.
    cluster = subprocess.Popen(  # noqa: ASYNC220 - before the measured span
        [sys.executable, "-c", _CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert cluster.stdout is not None
        bootstrap = cluster.stdout.readline().strip()
        async with Producer(bootstrap, linger_ms=5, acks="all") as producer:
            await producer.send("kernels", value)
            start = time.process_time()
            if pattern in ("a", "ak"):
                enqueue = producer.enqueue
                futures = []
                append = futures.append
                if keys is None:
                    for _ in range(records):
                        append(await enqueue("kernels", value))
                else:
                    for key in keys:
                        append(await enqueue("kernels", value, key=key))
                await producer.flush()
            else:
                values = [value] * _CHUNK
                headers = [("source", b"kernels")] if keys is not None else None
                calls = []
                for first in range(0, records, _CHUNK):
                    n = min(_CHUNK, records - first)
                    chunk_keys = None if keys is None else keys[first : first + n]
                    calls.append(
                        await producer.enqueue_many(
                            "kernels", values[:n], keys=chunk_keys, headers=headers
                        )
                    )
                await asyncio.gather(*calls)
            return (time.process_time() - start) / records
    finally:
        assert cluster.stdin is not None
        cluster.stdin.close()
        cluster.wait(timeout=30)


def _task_name(handle: asyncio.Handle) -> str:
    """Who a loop callback works for: a task's coroutine name, else the callback's."""
    owner = getattr(handle._callback, "__self__", None)  # type: ignore[attr-defined]
    if isinstance(owner, asyncio.Task):
        name = str(getattr(owner.get_coro(), "__qualname__", "task"))
        return "caller (the measured loop)" if name == "_run" else name
    return "loop callbacks"


def _split(pattern: str, records: int, size: int, collect: bool) -> dict[str, float]:
    """CPU microseconds per record by task (see the module docstring)."""
    import gc
    from asyncio import events

    spent: dict[str, float] = {}
    original = events.Handle._run

    def charged(handle: asyncio.Handle) -> None:
        began = time.thread_time()
        try:
            original(handle)
        finally:
            name = _task_name(handle)
            spent[name] = spent.get(name, 0.0) + time.thread_time() - began

    events.Handle._run = charged  # type: ignore[method-assign]
    if not collect:
        gc.disable()
    try:
        total = asyncio.run(_run(pattern, records, size))
    finally:
        events.Handle._run = original  # type: ignore[method-assign]
        gc.enable()
    # The caller's task is the measured run itself: everything it did counts.
    out = {name: cpu / records * 1e6 for name, cpu in spent.items() if cpu / records * 1e6 >= 0.005}
    out["total (process CPU)"] = total * 1e6
    return out


def _child(args: argparse.Namespace) -> None:
    from aioproducer.protocol import records

    if args.split:
        for collect in (True, False):
            shares = _split(args.split, args.records, args.size, collect)
            print(
                f"compiled={records.COMPILED} gc={'on' if collect else 'off'}: "
                + ", ".join(
                    f"{k} {v:.3f}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1])
                )
            )
        return

    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        asyncio.run(_run(args.profile, args.records, args.size))
        profiler.disable()
        print(f"compiled={getattr(records, 'COMPILED', False)}")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)
        return
    cpu = asyncio.run(_run(args.child, args.records, args.size))
    print(json.dumps({"compiled": records.COMPILED, "cpu_us": cpu * 1e6}))


def _measure(pattern: str, pure: bool, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("AIOPRODUCER_NO_EXTENSIONS", None)
    if pure:
        env["AIOPRODUCER_NO_EXTENSIONS"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.kernels",
        "--child",
        pattern,
        "--records",
        str(args.records),
        "--size",
        str(args.size),
    ]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--patterns", default="a,d")
    parser.add_argument("--profile", choices=PATTERNS, help="cProfile one pattern in-process")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--split", choices=PATTERNS, help="CPU per record by task, in-process")
    parser.add_argument("--child", choices=PATTERNS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.split and not args.child:
        for pure in (False, True):
            env = dict(os.environ)
            env.pop("AIOPRODUCER_NO_EXTENSIONS", None)
            if pure:
                env["AIOPRODUCER_NO_EXTENSIONS"] = "1"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.kernels",
                    "--child",
                    args.split,
                    "--split",
                    args.split,
                    "--records",
                    str(args.records),
                    "--size",
                    str(args.size),
                ],
                env=env,
                check=True,
            )
        return
    if args.child or args.profile:
        _child(args)
        return
    for pattern in args.patterns.split(","):
        runs: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for pure in (False, True):
                result = _measure(pattern, pure, args)
                if not pure and not result["compiled"]:
                    sys.exit("the compiled kernels are not built (pip install -e .)")
                runs[pure].append(result["cpu_us"])
        compiled, pure_ = statistics.median(runs[False]), statistics.median(runs[True])
        print(
            f"pattern {pattern}: compiled {compiled:.2f} us/record, pure {pure_:.2f} us/record, "
            f"compiled/pure {compiled / pure_:.2f} "
            f"(medians of {args.rounds}; compiled {[round(x, 2) for x in runs[False]]}, "
            f"pure {[round(x, 2) for x in runs[True]]})"
        )


if __name__ == "__main__":
    main()
