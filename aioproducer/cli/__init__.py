"""The ``aioproducer`` command.

    aioproducer perf --topic t --num-records 100000 --record-size 100   # embedded broker
    aioproducer produce -b host:9092 -t orders < orders.txt
    aioproducer broker                                                  # local Tansu
    aioproducer mock-broker --brokers 3

Each subcommand lives in its own module and documents its exit codes in
``--help``: 0 success, 1 a record was not delivered, 2 bad arguments, 3 the
cluster or broker was unavailable, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from . import broker, mock_broker, perf, produce
from .common import CommandError, fail

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aioproducer",
        description="Command line of aioproducer, an asyncio Kafka producer.",
        epilog="Run 'aioproducer COMMAND --help' for a command's options and exit codes.",
    )
    parser.add_argument(
        "--version", action="version", version=f"aioproducer {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (perf, produce, broker, mock_broker):
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aioproducer`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CommandError as exc:
        fail(str(exc))
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
