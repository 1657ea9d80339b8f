"""Command line: ``aioproducer mock-broker`` runs a MockCluster until interrupted.

Example::

    $ python -m aioproducer.cli mock-broker --brokers 3 --port 9092 --partitions 4
    127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094

The first line on stdout is the bootstrap servers string, so a script can read
it and point clients at the cluster; Ctrl-C or SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence

from .testing.mock import MockCluster

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aioproducer", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    mock = commands.add_parser(
        "mock-broker",
        help="run an in-memory mock Kafka cluster on loopback",
        description="Run an in-memory mock Kafka cluster until Ctrl-C or SIGTERM.",
    )
    mock.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    mock.add_argument(
        "--port",
        type=int,
        default=9092,
        help="port of the first broker, the others on the following ports; 0 = free ports",
    )
    mock.add_argument(
        "--partitions", type=int, default=4, help="partitions of auto-created topics (default 4)"
    )
    mock.add_argument("--host", default="127.0.0.1", help="address to listen on")
    mock.add_argument(
        "--no-auto-create", action="store_true", help="answer unknown topics with an error"
    )
    mock.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="create a topic at start (repeatable)",
    )
    return parser


async def _run_mock(args: argparse.Namespace) -> int:
    cluster = MockCluster(
        brokers=args.brokers,
        default_partitions=args.partitions,
        auto_create_topics=not args.no_auto_create,
        host=args.host,
        base_port=args.port,
    )
    for spec in args.topic:
        name, _, count = spec.partition(":")
        cluster.create_topic(name, int(count) if count else None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # add_signal_handler is POSIX-only
            loop.add_signal_handler(sig, stop.set)
    async with cluster:
        print(cluster.bootstrap_servers, flush=True)
        print(
            f"mock cluster {cluster.cluster_id}: {args.brokers} broker(s); Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        await stop.wait()
    print("mock cluster stopped", file=sys.stderr, flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aioproducer`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "mock-broker":
        if args.brokers < 1 or args.partitions < 1 or not 0 <= args.port <= 65535:
            print(
                "aioproducer: --brokers and --partitions must be >= 1, --port 0..65535",
                file=sys.stderr,
            )
            return 2
        try:
            return asyncio.run(_run_mock(args))
        except OSError as exc:  # e.g. the port is taken
            print(f"aioproducer: cannot start the mock cluster: {exc}", file=sys.stderr)
            return 1
    return 2  # unreachable: argparse requires a command


if __name__ == "__main__":
    sys.exit(main())
