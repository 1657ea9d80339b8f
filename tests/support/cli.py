"""Run the ``aioproducer`` command in a subprocess without blocking the event loop.

The test's event loop keeps running (a mock cluster in the same loop keeps
answering) while the command runs; a command that hangs fails the test.
"""

from __future__ import annotations

import asyncio
import sys

from tests.support.aio import within

__all__ = ["run_cli"]


async def run_cli(*args: str, stdin: bytes = b"", timeout: float = 90) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``aioproducer *args`` fed ``stdin``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aioproducer.cli", *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await within(proc.communicate(stdin), timeout, f"aioproducer {args[0]}")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
