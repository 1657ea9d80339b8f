"""What the commands share: exit codes, producer properties, error output, stop signals."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "EXIT_CODES_HELP",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "CommandError",
    "UsageError",
    "add_property_options",
    "fail",
    "parse_pairs",
    "parse_properties_file",
    "producer_properties",
    "start_producer",
    "stop_on_signals",
]

EXIT_OK = 0
#: A record was not delivered (or the command's job failed part-way).
EXIT_FAILED = 1
#: Bad arguments, a bad property or an unreadable file; nothing was sent.
EXIT_USAGE = 2
#: The cluster could not be reached, or the embedded broker could not start.
EXIT_UNAVAILABLE = 3
#: Stopped by Ctrl-C or SIGTERM before the work was done (128 + SIGINT).
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
exit codes:
  0    success
  1    a record was not delivered
  2    bad arguments, property or file (nothing sent)
  3    the cluster could not be reached or the embedded broker did not start
  130  interrupted (Ctrl-C / SIGTERM) before the end
"""


class CommandError(Exception):
    """Ends a command: ``aioproducer: <message>`` on stderr and exit status ``code``."""

    code = EXIT_FAILED

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class UsageError(CommandError):
    """A bad argument found after parsing (a malformed k=v, an unreadable file)."""

    code = EXIT_USAGE


async def start_producer(properties: dict[str, str], bootstrap: str) -> Any:
    """A started Producer from Java properties; UsageError or CommandError(3) otherwise."""
    from .. import Producer, errors

    try:
        producer = Producer.from_config({**properties, "bootstrap.servers": bootstrap})
    except errors.ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    try:
        await producer.start()
    except errors.KafkaError as exc:
        raise CommandError(f"cannot reach the cluster: {exc}", EXIT_UNAVAILABLE) from None
    return producer


def fail(message: str) -> None:
    """Print ``aioproducer: <message>`` on stderr."""
    print(f"aioproducer: {message}", file=sys.stderr, flush=True)


def parse_pairs(pairs: Iterable[str], what: str) -> list[tuple[str, str]]:
    """``["a=1", "b=x=y"]`` -> ``[("a", "1"), ("b", "x=y")]``; UsageError on a pair without '='."""
    out = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"{what} must look like name=value, got {pair!r}")
        out.append((name.strip(), value))
    return out


def parse_properties_file(path: str | Path) -> dict[str, str]:
    """Read a Java ``.properties`` file: ``k=v``, ``k: v`` or ``k v``; ``#``/``!`` comments,
    a trailing backslash continues a line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    for i, char in enumerate(line):
        if char in "=:" or char.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i], rest.strip()
    return line, ""


def add_property_options(parser: argparse.ArgumentParser, flag: str) -> None:
    """``flag NAME=VALUE`` (repeatable) and ``--producer-config FILE``."""
    parser.add_argument(
        flag,
        action="append",
        default=[],
        dest="properties",
        metavar="NAME=VALUE",
        help="a Java producer property, e.g. linger.ms=10 (repeatable; wins over the file)",
    )
    parser.add_argument(
        "--producer-config",
        "--producer.config",  # the spelling of Kafka's own tools
        dest="producer_config",
        metavar="FILE",
        help="a Java .properties file of producer properties",
    )


def producer_properties(args: argparse.Namespace, **defaults: str) -> dict[str, str]:
    """``defaults``, then the file's properties, then the command line's."""
    props = dict(defaults)
    if args.producer_config:
        props.update(parse_properties_file(args.producer_config))
    props.update(parse_pairs(args.properties, "a producer property"))
    return props


@contextlib.contextmanager
def stop_on_signals(loop: asyncio.AbstractEventLoop) -> Iterator[asyncio.Event]:
    """An event set by SIGINT or SIGTERM while the block runs (POSIX; elsewhere never set)."""
    stop = asyncio.Event()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
    try:
        yield stop
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
