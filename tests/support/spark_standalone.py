"""A Spark standalone cluster on loopback: one master and two workers, from pyspark's own jars.

Every Spark test that runs on ``local[N]`` has the driver, the executors and
their Python workers in one JVM's family of processes. A standalone cluster
separates them as a real deployment does: each application gets executor JVMs
launched by the workers, with Python workers of their own, and whatever the
tasks hand the driver (the commit messages of a two-phase write) crosses
process boundaries pickled.

:class:`SparkStandalone` starts ``org.apache.spark.deploy.master.Master`` and
two ``org.apache.spark.deploy.worker.Worker`` processes through pyspark's
``bin/spark-class`` (the pip-installed pyspark is a complete ``SPARK_HOME``),
each in a process group of its own so that stopping it stops the executors it
launched too. Every wait is bounded; a process that dies or a master that does
not see its workers fails the start with the tail of its log.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = ["SparkStandalone", "StartError", "executor_pids"]

# Generous: on a loaded CI host a JVM start alone has taken 30 s.
START_TIMEOUT = 180.0
STOP_TIMEOUT = 30.0

_MASTER_URL = re.compile(r"Starting Spark master at (spark://[^\s]+)")


class StartError(RuntimeError):
    """The cluster did not come up; the message carries the relevant log tail."""


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes] = field(repr=False)

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return f"--- {self.name} ({self.log_path}) ---\n" + "\n".join(text[-lines:])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    """A master and ``workers`` workers (1 core, ``worker_memory`` each) under ``directory``."""

    def __init__(
        self, directory: Path, *, workers: int = 2, worker_memory: str = "1g", python: str
    ) -> None:
        self.directory = directory
        self.workers = workers
        self.worker_memory = worker_memory
        self.python = python
        self.master_url = ""
        self._daemons: list[_Daemon] = []

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> str:
        """Start the master, then the workers; the master's ``spark://`` URL once all registered."""
        try:
            master = self._spawn(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--webui-port",
                    "0",
                ],
            )
            self.master_url = self._wait_for_master_url(master)
            for index in range(self.workers):
                self._spawn(
                    f"worker-{index}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        "0",
                        "--webui-port",
                        "0",
                        "--cores",
                        "1",
                        "--memory",
                        self.worker_memory,
                        "--work-dir",
                        str(self.directory / f"worker-{index}-work"),
                        self.master_url,
                    ],
                )
            self._wait_for_workers(master)
        except BaseException:
            self.stop()
            raise
        return self.master_url

    def stop(self) -> None:
        """Stop every daemon and what it launched (SIGTERM, then SIGKILL after a bound)."""
        for daemon in reversed(self._daemons):
            _signal_group(daemon.process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for daemon in reversed(self._daemons):
            try:
                daemon.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            # Executors launched by a worker are in its group: make sure none outlives the test.
            _signal_group(daemon.process, signal.SIGKILL)
            try:
                daemon.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
            daemon.log.close()
        self._daemons.clear()

    def __enter__(self) -> SparkStandalone:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def logs(self) -> str:
        """The tail of every daemon's log (for a failing test's report)."""
        return "\n".join(daemon.tail() for daemon in self._daemons)

    # -- helpers -----------------------------------------------------------------

    def _spawn(self, name: str, args: Sequence[str]) -> _Daemon:
        self.directory.mkdir(parents=True, exist_ok=True)
        home = _spark_home()
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.directory),
            # Executors' Python workers: the interpreter that has aioproducer.
            "PYSPARK_PYTHON": self.python,
            # No REST submission server (a fixed port, 6066) and no cleanup threads to wait for.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_DAEMON_MEMORY": "512m",
        }
        log_path = self.directory / f"{name}.log"
        log = log_path.open("wb")
        process = subprocess.Popen(
            [str(home / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.directory,
            start_new_session=True,
        )
        daemon = _Daemon(name, process, log_path, log)
        self._daemons.append(daemon)
        return daemon

    def _wait_for_master_url(self, master: _Daemon) -> str:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            match = _MASTER_URL.search(master.log_path.read_text(errors="replace"))
            if match:
                return match.group(1)
            self._check_alive()
            time.sleep(0.2)
        raise StartError(f"the Spark master gave no URL in {START_TIMEOUT:.0f} s\n{self.logs()}")

    def _wait_for_workers(self, master: _Daemon) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            registered = master.log_path.read_text(errors="replace").count("Registering worker")
            if registered >= self.workers:
                return
            self._check_alive()
            time.sleep(0.2)
        raise StartError(
            f"the Spark master saw fewer than {self.workers} workers in {START_TIMEOUT:.0f} s\n"
            f"{self.logs()}"
        )

    def _check_alive(self) -> None:
        for daemon in self._daemons:
            if daemon.process.poll() is not None:
                raise StartError(
                    f"Spark's {daemon.name} exited with {daemon.process.returncode}\n{self.logs()}"
                )


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def executor_pids() -> list[int]:
    """Process ids of the executor JVMs (``CoarseGrainedExecutorBackend``) on this machine."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmdline:
            pids.append(int(entry.name))
    return pids
