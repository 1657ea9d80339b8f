"""``aioproducer produce``: a console producer, one record per input line (like ``kcat -P``).

Lines come from stdin or from the files named (``-`` is stdin), in order; the
trailing newline is not part of the record. With ``--key-separator`` each line
is ``KEY<sep>VALUE``. It stops at the first record that fails (input it cannot
turn into a record, or a delivery the cluster refused), waits for the records
already handed over, and reports how many were delivered; with
``--continue-on-error`` it goes on and reports the failures at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import ExitStack
from typing import IO, Any

from .common import (
    EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    add_property_options,
    fail,
    parse_pairs,
    producer_properties,
    start_producer,
    stop_on_signals,
)

__all__ = ["add_parser", "run"]

# Lines read per hop to the reading thread (a size hint in bytes).
_READ_HINT = 1 << 16


def add_parser(commands: Any) -> None:
    produce = commands.add_parser(
        "produce",
        help="produce lines from stdin or files, one record each (like kcat -P)",
        description=__doc__.split("\n\n")[1].replace("``", "") if __doc__ else None,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    produce.add_argument("files", nargs="*", metavar="FILE", help="input files (default: stdin)")
    produce.add_argument("-b", "--bootstrap-server", required=True, help="host:port,...")
    produce.add_argument("-t", "--topic", required=True, help="topic to produce to")
    produce.add_argument(
        "-K",
        "--key-separator",
        metavar="SEP",
        help="split each line at the first SEP into key and value",
    )
    produce.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header on every record (repeatable)",
    )
    produce.add_argument("-p", "--partition", type=int, help="write every record to this partition")
    add_property_options(produce, "--property")
    produce.add_argument(
        "--continue-on-error",
        action="store_true",
        help="go on after a failed record; exit 1 at the end if any failed",
    )
    produce.set_defaults(run=run)


class Tally:
    """Outcome of every record handed to the producer, and the first failure."""

    def __init__(self) -> None:
        self.sent = self.delivered = self.failed = 0
        self.first_failure: str | None = None

    def failure(self, where: str, error: BaseException | str) -> None:
        self.failed += 1
        message = f"record at {where} failed: {error}"
        if self.first_failure is None:
            self.first_failure = message
        fail(message)

    def watch(self, fut: asyncio.Future[Any], where: str) -> None:
        self.sent += 1

        def done(f: asyncio.Future[Any]) -> None:
            error = asyncio.CancelledError() if f.cancelled() else f.exception()
            if error is None:
                self.delivered += 1
            else:
                self.failure(where, error)

        fut.add_done_callback(done)


async def _lines(stream: IO[bytes], name: str) -> AsyncIterator[tuple[str, bytes]]:
    """``(where, line)`` pairs, read on a thread so the event loop keeps delivering."""
    number = 0
    while True:
        chunk = await asyncio.to_thread(stream.readlines, _READ_HINT)
        if not chunk:
            return
        for line in chunk:
            number += 1
            if line.endswith(b"\n"):
                line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            yield f"{name}:{number}", line


async def _produce_all(
    args: argparse.Namespace,
    producer: Any,
    streams: list[tuple[str, IO[bytes]]],
    tally: Tally,
    stop: asyncio.Event,
) -> bool:
    """Hand every line to the producer; False when stopped early (failure or signal)."""
    from .. import errors

    headers = [(k, v.encode()) for k, v in parse_pairs(args.header, "a header")] or None
    separator = args.key_separator.encode() if args.key_separator else None
    for name, stream in streams:
        async for where, line in _lines(stream, name):
            if stop.is_set() or (tally.failed and not args.continue_on_error):
                return False
            key: bytes | None = None
            if separator is not None:
                key, found, line = line.partition(separator)
                if not found:
                    tally.failure(where, f"no key separator {args.key_separator!r} in the line")
                    continue
            try:
                fut = await producer.enqueue(
                    args.topic, line, key=key, partition=args.partition, headers=headers
                )
            except errors.KafkaError as exc:
                tally.failure(where, exc)
                continue
            tally.watch(fut, where)
    return not (tally.failed and not args.continue_on_error)


async def _run(
    args: argparse.Namespace, props: dict[str, str], streams: list[tuple[str, IO[bytes]]]
) -> int:
    producer = await start_producer(props, args.bootstrap_server)
    tally = Tally()
    try:
        with stop_on_signals(asyncio.get_running_loop()) as stop:
            finished = await _produce_all(args, producer, streams, tally, stop)
            interrupted = stop.is_set()
    finally:
        # close() delivers what was handed over (each record bounded by delivery.timeout.ms).
        await producer.close()
    summary = f"delivered {tally.delivered} record(s) to {args.topic!r}"
    if tally.failed:
        summary += f"; {tally.failed} failed"
    print(summary, file=sys.stderr, flush=True)
    if tally.failed:
        return EXIT_FAILED
    return EXIT_INTERRUPTED if interrupted or not finished else EXIT_OK


def run(args: argparse.Namespace) -> int:
    if args.partition is not None and args.partition < 0:
        raise UsageError("--partition must be >= 0")
    if args.key_separator == "":
        raise UsageError("--key-separator must not be empty")
    props = producer_properties(args)
    parse_pairs(args.header, "a header")  # a malformed header is refused before sending
    with ExitStack() as files:
        try:  # every file opens before anything is sent
            streams = [
                ("stdin", sys.stdin.buffer)
                if path == "-"
                else (path, files.enter_context(open(path, "rb")))
                for path in (args.files or ["-"])
            ]
        except OSError as exc:
            raise UsageError(f"cannot read {exc.filename}: {exc.strerror}") from None
        return asyncio.run(_run(args, props, streams))
