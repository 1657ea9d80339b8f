"""Golden message frames from Java's own serializer (the kafka-clients jar's
generated ``*Data`` classes), for the generated Python messages to match.

``java_golden/GoldenMessages.java`` builds a fixed sample of requests and
responses and prints ``<name> <version> <hex>`` per line; it is compiled on
first use like the read-back programs (:mod:`tests.support.javac`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.javac import compile_java

__all__ = ["java_golden_frames"]

SOURCE = Path(__file__).parent / "java_golden" / "GoldenMessages.java"

# Seconds a JVM may take to start and print a few lines on a loaded machine.
_TIMEOUT = 180.0


def java_golden_frames() -> dict[tuple[str, int], bytes]:
    """(message name, version) -> the body bytes Java wrote.

    Raises:
        JavaToolsUnavailable: no JDK or no Kafka jars.
        RuntimeError: the program failed.
    """
    program = compile_java([SOURCE], "golden-messages")
    proc = subprocess.run(
        program.command("GoldenMessages"),
        capture_output=True,
        text=True,
        timeout=_TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"GoldenMessages exited with {proc.returncode}:\n{proc.stderr[-4000:]}")
    frames: dict[tuple[str, int], bytes] = {}
    for line in proc.stdout.splitlines():
        name, version, hexed = line.split()
        frames[(name, int(version))] = bytes.fromhex(hexed)
    return frames
