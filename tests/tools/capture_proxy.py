"""A loopback TCP proxy that records every Kafka frame in both directions.

Kafka frames are a 4-byte big-endian size followed by that many bytes. The
proxy forwards bytes unchanged and, on the side, cuts each direction into
frames. A request frame starts with ``api_key: int16, api_version: int16,
correlation_id: int32``; a response starts with the correlation id, which is
matched back to its request to label the response with the request's api key
and version.

Saved ``.frames`` files (see tests/golden/README.md) hold one frame per line::

    <conn> <dir> <api_key> <api_version> <correlation_id> <hex>

``dir`` is ``>`` for client-to-broker (request) and ``<`` for broker-to-client
(response); ``hex`` is the frame without its 4-byte size prefix. Lines starting
with ``#`` are comments. Use :func:`load_frames` to read them back.

Run standalone::

    python tests/tools/capture_proxy.py --listen 127.0.0.1:19092 \\
        --upstream 127.0.0.1:9092 --out capture.frames
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import struct
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import final

REQUEST = ">"
RESPONSE = "<"


@dataclasses.dataclass(frozen=True)
class Frame:
    """One captured frame (size prefix excluded)."""

    conn: int
    direction: str  # REQUEST or RESPONSE
    api_key: int
    api_version: int
    correlation_id: int
    payload: bytes

    def to_line(self) -> str:
        return (
            f"{self.conn} {self.direction} {self.api_key} {self.api_version} "
            f"{self.correlation_id} {self.payload.hex()}"
        )

    @classmethod
    def from_line(cls, line: str) -> Frame:
        conn, direction, key, version, corr, hexdata = line.split()
        return cls(int(conn), direction, int(key), int(version), int(corr), bytes.fromhex(hexdata))


def load_frames(path: str | Path) -> list[Frame]:
    """Read a ``.frames`` file."""
    frames = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            frames.append(Frame.from_line(line))
    return frames


def save_frames(path: str | Path, frames: Iterable[Frame], comments: Iterable[str] = ()) -> None:
    """Write a ``.frames`` file, comment lines first."""
    lines = [f"# {c}" for c in comments]
    lines.append("# conn dir api_key api_version correlation_id hex")
    lines.extend(f.to_line() for f in frames)
    Path(path).write_text("\n".join(lines) + "\n")


class CaptureProxy:
    """Forward ``listen`` to ``upstream`` on loopback, recording frames."""

    def __init__(self, listen_port: int, upstream_host: str, upstream_port: int) -> None:
        self.listen_port = listen_port
        self.upstream = (upstream_host, upstream_port)
        self.frames: list[Frame] = []
        self._lock = threading.Lock()
        self._next_conn = 0
        self._server: asyncio.base_events.Server | None = None
        self._open: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.listen_port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        # Python < 3.12 does not wait for (or close) accepted connections.
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def take(self) -> list[Frame]:
        """Return and forget the frames recorded so far."""
        with self._lock:
            frames, self.frames = self.frames, []
        return frames

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def _handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        conn = self._next_conn
        self._next_conn += 1
        self._open.add(conn)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            b_reader, b_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            c_writer.close()
            self._open.discard(conn)
            return
        pending: dict[int, tuple[int, int]] = {}
        try:
            await asyncio.gather(
                self._pump(conn, REQUEST, c_reader, b_writer, pending),
                self._pump(conn, RESPONSE, b_reader, c_writer, pending),
            )
        except asyncio.CancelledError:
            pass  # proxy shutting down
        finally:
            self._open.discard(conn)
            for writer in (c_writer, b_writer):
                writer.close()

    async def _pump(
        self,
        conn: int,
        direction: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pending: dict[int, tuple[int, int]],
    ) -> None:
        try:
            while True:
                size_bytes = await reader.readexactly(4)
                (size,) = struct.unpack(">i", size_bytes)
                payload = await reader.readexactly(size)
                if direction == REQUEST:
                    key, version, corr = struct.unpack_from(">hhi", payload)
                    pending[corr] = (key, version)
                else:
                    (corr,) = struct.unpack_from(">i", payload)
                    key, version = pending.pop(corr, (-1, -1))
                with self._lock:
                    self.frames.append(Frame(conn, direction, key, version, corr, payload))
                writer.write(size_bytes + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            # Half-close towards the other side so both pumps end.
            if writer.can_write_eof():
                try:
                    writer.write_eof()
                except OSError:
                    pass


@final
class ThreadedCaptureProxy:
    """Run a :class:`CaptureProxy` on its own event loop in a daemon thread.

    Handy for blocking clients (confluent-kafka, kafka-python).
    """

    def __init__(self, listen_port: int, upstream_host: str, upstream_port: int) -> None:
        self.proxy = CaptureProxy(listen_port, upstream_host, upstream_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ThreadedCaptureProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="127.0.0.1:PORT to accept clients on")
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the broker")
    parser.add_argument("--out", required=True, help=".frames file written on exit")
    args = parser.parse_args()
    listen_host, listen_port = args.listen.rsplit(":", 1)
    if listen_host not in ("127.0.0.1", "localhost"):
        parser.error("the proxy only listens on loopback")
    up_host, up_port = args.upstream.rsplit(":", 1)
    proxy = CaptureProxy(int(listen_port), up_host, int(up_port))
    await proxy.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await proxy.close()
    save_frames(args.out, proxy.take(), [f"captured via {args.listen} -> {args.upstream}"])


if __name__ == "__main__":
    asyncio.run(_main())
