"""One broker process that a test may start, pause, kill and restart.

:class:`BrokerProcess` owns the operating-system side of a throwaway broker:
the child process (its own session, killed with its parent on Linux), its
log file, and the signals tests use to make a broker misbehave (SIGSTOP for a
stall, SIGKILL for a crash, SIGTERM for a graceful stop). What the broker *is*
(Tansu, Apache Kafka) and how it is told apart from a broker that merely
accepts connections live in the subclasses, which implement :meth:`_command`
and :meth:`_is_ready`.

Invariant: every process started here is either reaped by :meth:`stop` or
:meth:`kill`, or killed at interpreter exit; none outlives the test run.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import TypeVar

__all__ = ["BrokerProcess", "BrokerStartError", "free_port", "port_accepts"]

HOST = "127.0.0.1"

# Every broker still alive when the interpreter exits is killed, so an aborted
# test run does not leave listeners behind.
_LIVE: weakref.WeakSet[BrokerProcess] = weakref.WeakSet()


_Broker = TypeVar("_Broker", bound="BrokerProcess")


class BrokerStartError(RuntimeError):
    """The broker process exited or did not become ready in time."""


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_accepts(port: int, timeout: float = 0.5, host: str = HOST) -> bool:
    """True if something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
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


class BrokerProcess:
    """Start, signal and reap one broker process; subclasses say what to run.

    Args:
        log_path: file receiving the process's stdout and stderr (appended to).
        startup_timeout: seconds :meth:`_spawn` waits for :meth:`_is_ready`.
        stop_timeout: seconds :meth:`stop` waits after SIGTERM before SIGKILL.
    """

    def __init__(self, *, log_path: Path, startup_timeout: float, stop_timeout: float) -> None:
        self._log_path = log_path
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._launched_at = 0.0

    # -- what subclasses provide ------------------------------------------------------

    def _is_ready(self) -> bool:
        """True once the broker serves clients (not merely accepts connections)."""
        raise NotImplementedError

    def start(self: _Broker) -> _Broker:
        """Launch the broker and block until it serves clients."""
        raise NotImplementedError

    @property
    def port(self) -> int:
        """The port clients connect to."""
        raise NotImplementedError

    @property
    def host(self) -> str:
        """The address clients connect to."""
        return HOST

    # -- state ------------------------------------------------------------------------

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
        """True between :meth:`pause` and :meth:`resume` of a running broker."""
        return self._paused and self.is_running

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

    def _spawn(self, cmd: list[str], env: dict[str, str], what: str) -> None:
        """Run ``cmd`` and block until :meth:`_is_ready`; ``what`` names it in errors."""
        self._start_process(cmd, env, what)
        self._await_ready(what)

    def _start_process(self, cmd: list[str], env: dict[str, str], what: str) -> None:
        """Run ``cmd`` without waiting for it to serve (see :meth:`_await_ready`).

        Several brokers that need each other to come up (a KRaft quorum) are
        all launched first and then awaited.
        """
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
        self._launched_at = time.monotonic()

    def _await_ready(self, what: str) -> None:
        """Block until :meth:`_is_ready`, at most ``startup_timeout`` from the launch.

        Raises:
            BrokerStartError: the process exited, or was not ready in time (it
                is then killed); the message carries the log tail.
        """
        if self._proc is None:
            raise BrokerStartError(f"{what} was not launched")
        deadline = self._launched_at + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise BrokerStartError(
                    f"{what} exited with code {code} during startup; "
                    f"log {self._log_path}:\n{self.read_log(4000)}"
                )
            # Re-check liveness: a broker that failed to bind may exit just after
            # someone else's listener on the same port answered the probe.
            if self._is_ready() and self._proc.poll() is None:
                time.sleep(0.05)
                if self._proc.poll() is None:
                    return
                continue
            if time.monotonic() > deadline:
                self._force_kill()
                self._reap()
                raise BrokerStartError(
                    f"{what} not ready after {self.startup_timeout}s; "
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

    def resume(self) -> None:
        """SIGCONT: undo :meth:`pause`."""
        self._require_running()
        self._signal(signal.SIGCONT)
        self._paused = False

    def wait_until_refusing(self, timeout: float = 10.0) -> bool:
        """Wait until the client port refuses connections; True if it did within ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not port_accepts(self.port, timeout=0.2, host=self.host):
                return True
            time.sleep(0.05)
        return False

    def _state(self) -> str:
        return "paused" if self.is_paused else ("running" if self.is_running else "stopped")

    def __enter__(self: _Broker) -> _Broker:
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
        raise BrokerStartError(
            f"broker pid {self._proc.pid} did not stop within {timeout} s of SIGSTOP"
        )

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


@atexit.register
def _kill_leftovers() -> None:
    for broker in list(_LIVE):
        try:
            broker.kill()
        except Exception:  # noqa: BLE001, S110 - interpreter exit: kill the others regardless
            pass
