"""``aioproducer mock-broker``: run a MockCluster until interrupted.

Example::

    $ aioproducer mock-broker --brokers 3 --partitions 4
    127.0.0.1:40417,127.0.0.1:36229,127.0.0.1:45121

By default every broker takes a free port (a local Kafka on 9092 is no
clash); ``--port 9092`` puts them on 9092, 9093 and so on.

The first line on stdout is the bootstrap servers string, so a script can read
it and point clients at the cluster; Ctrl-C or SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import sys
from typing import Any

from .common import EXIT_OK, EXIT_UNAVAILABLE, UsageError, fail, stop_on_signals

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    mock = commands.add_parser(
        "mock-broker",
        help="run an in-memory mock Kafka cluster on loopback",
        description="Run an in-memory mock Kafka cluster until Ctrl-C or SIGTERM. "
        "The first line on stdout is its bootstrap servers string.",
        epilog="exit codes: 0 stopped by a signal, 2 bad arguments, 3 a port is taken",
    )
    mock.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    mock.add_argument(
        "--port",
        type=int,
        default=0,
        help="port of the first broker, the others on the following ports "
        "(default 0: each broker takes a free port)",
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
    mock.set_defaults(run=run)


async def _serve(args: argparse.Namespace) -> int:
    from ..testing.mock import MockCluster  # only this command needs the mock

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
    with stop_on_signals(asyncio.get_running_loop()) as stop:
        async with cluster:
            print(cluster.bootstrap_servers, flush=True)
            print(
                f"mock cluster {cluster.cluster_id}: {args.brokers} broker(s); Ctrl-C to stop",
                file=sys.stderr,
                flush=True,
            )
            await stop.wait()
    print("mock cluster stopped", file=sys.stderr, flush=True)
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    if args.brokers < 1 or args.partitions < 1 or not 0 <= args.port <= 65535:
        raise UsageError("--brokers and --partitions must be >= 1, --port 0..65535")
    try:
        return asyncio.run(_serve(args))
    except OSError as exc:  # e.g. the port is taken
        hint = ""
        if args.port and exc.errno == errno.EADDRINUSE:
            last = args.port + args.brokers - 1
            ports = f"{args.port}" if last == args.port else f"{args.port}-{last}"
            hint = (
                f"; a port of {ports} is taken (a local Kafka?): leave out --port for free "
                "ports, or choose another"
            )
        fail(f"cannot start the mock cluster: {exc}{hint}")
        return EXIT_UNAVAILABLE
