"""Launch a throwaway Apache Kafka broker (KRaft, no ZooKeeper) on loopback ports.

The broker runs from the jars that ``tools/kafka/fetch.sh`` copies out of Maven
Central into ``.cache/kafka/<version>/libs`` (or the directory named by
``$AIOPRODUCER_KAFKA_LIBS``). Each :class:`KafkaBroker` formats its own storage
directory, starts ``kafka.Kafka`` as a combined broker and controller, and is
ready once it answers a Metadata request that lists itself: an open port alone
proves nothing, since a KRaft broker accepts connections before it has joined
the cluster. Unlike Tansu it keeps its data on disk, so :meth:`restart` and a
SIGKILL followed by :meth:`start` find the topics and records written before.

Example::

    with KafkaBroker() as broker:
        run_client(broker.bootstrap_servers)

Several brokers make a cluster when they share a ``cluster_id`` and a
``voters`` string (see :mod:`tests.support.kafka_cluster`).
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from aioproducer.embedded.broker_process import (
    HOST,
    BrokerProcess,
    BrokerStartError,
    free_port,
    port_accepts,
)
from aioproducer.protocol.apis import METADATA, Api
from aioproducer.protocol.framing import decode_response, encode_request, read_correlation_id
from aioproducer.protocol.generated import MetadataRequest, MetadataResponse
from aioproducer.protocol.generated.metadata import MetadataRequestTopic

__all__ = [
    "KAFKA_VERSION",
    "KafkaBroker",
    "KafkaJarsUnavailable",
    "Listener",
    "fetch_command",
    "find_kafka_libs",
    "probe",
    "probe_metadata",
]

KAFKA_VERSION = "4.4.0"
LIBS_ENV = "AIOPRODUCER_KAFKA_LIBS"
_REPO_ROOT = Path(__file__).resolve().parents[2]

# Small internal topics: the defaults (50 partitions each) make the first
# FindCoordinator of every test broker wait for 50 partitions to load.
_BASE_PROPERTIES: dict[str, str] = {
    "offsets.topic.num.partitions": "4",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
}

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = INFO
"""


class KafkaJarsUnavailable(RuntimeError):
    """The Apache Kafka jars have not been fetched (or Java is missing)."""


def fetch_command() -> str:
    """The command that fetches the pinned Apache Kafka jars into the cache."""
    return "tools/kafka/fetch.sh"


def find_kafka_libs() -> Path:
    """The directory holding the Apache Kafka jars; raises :class:`KafkaJarsUnavailable`."""
    configured = os.environ.get(LIBS_ENV, "").strip()
    libs = (
        Path(configured) if configured else _REPO_ROOT / ".cache" / "kafka" / KAFKA_VERSION / "libs"
    )
    if not (libs / ".complete").is_file() and not any(libs.glob("kafka_2.13-*.jar")):
        raise KafkaJarsUnavailable(
            f"the Apache Kafka {KAFKA_VERSION} jars are not in {libs}; "
            f"fetch them from Maven Central with: {fetch_command()}"
        )
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise KafkaJarsUnavailable("no Java runtime: Apache Kafka needs Java 17 or newer on PATH")
    return libs


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    return shutil.which("java") or "java"


def _random_cluster_id() -> str:
    # Kafka's Uuid.toString: URL-safe base64 of 16 random bytes, unpadded; it
    # never hands out an id starting with '-' (a command-line flag lookalike).
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def probe_metadata(
    port: int,
    timeout: float = 2.0,
    topics: Sequence[str] | None = None,
    *,
    host: str = HOST,
    source: str | None = None,
) -> MetadataResponse | None:
    """One Metadata v4 request to ``host:port``; the decoded body, or None.

    ``None`` means the broker did not answer (refused, closed, timed out). Used
    for readiness and, by cluster fixtures, to find partition leaders.
    """
    body = MetadataRequest(
        topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )
    response: MetadataResponse | None = probe(
        port, METADATA, 4, body, timeout, host=host, source=source
    )
    return response


def probe(
    port: int,
    api: Api[Any, Any],
    version: int,
    body: Any,
    timeout: float = 2.0,
    *,
    host: str = HOST,
    source: str | None = None,
) -> Any:
    """One request of ``api`` at ``version`` to ``host:port``; the decoded body, or None.

    ``body`` is an instance of ``api.request``; the answer one of ``api.response``.

    A blocking, connection-per-call client for fixtures that inspect a broker
    (no aioproducer machinery involved). ``None`` means no answer. ``source``
    is the local address to connect from (a harness address never cut off).
    """
    correlation_id = 0x5EED
    frame = encode_request(api, version, correlation_id, "aioproducer-probe", body)
    try:
        bind = None if source is None else (source, 0)
        with socket.create_connection((host, port), timeout=timeout, source_address=bind) as s:
            s.sendall(frame)
            size = struct.unpack(">i", _recv_exactly(s, 4))[0]
            data = _recv_exactly(s, size)
    except (OSError, EOFError):
        return None
    if read_correlation_id(data) != correlation_id:
        return None
    return decode_response(api, version, data)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise EOFError("connection closed")
        data += chunk
    return bytes(data)


@dataclass
class Listener:
    """One extra listener: its name, security protocol, and port (picked when 0).

    ``properties`` are listener-scoped broker settings written with the
    ``listener.name.<name lower case>.`` prefix (for example a JAAS config).
    """

    name: str
    security_protocol: str
    port: int = 0
    properties: dict[str, str] = field(default_factory=dict)


class KafkaBroker(BrokerProcess):
    """An Apache Kafka broker-and-controller process on ``127.0.0.1``.

    Args:
        node_id: this node's id (``node.id``).
        workdir: directory for its config, data and log; a fresh temporary one
            when ``None`` (removed by :meth:`cleanup`).
        listeners: extra listeners beside the PLAINTEXT one that
            :attr:`bootstrap_servers` names and brokers talk over.
        properties: extra ``server.properties`` entries (they win over ours).
        scram_users: ``(mechanism, user, password)`` triples added to the
            metadata log when storage is formatted (``--add-scram``).
        features: feature levels fixed at format time, e.g.
            ``{"transaction.version": 1}``.
        cluster_id, voters, controller_port: set by a cluster of several
            brokers; a lone broker picks its own.
        host: the address its client listener binds to and advertises;
            ``controller_host`` the controller listener's (``host`` if None).
        launcher: a command prefix the broker process is run under, e.g.
            ``["ip", "netns", "exec", name]`` to run it in a network namespace.
        probe_source: the local address fixtures' probes connect from.
        heap: the JVM's maximum heap (``-Xmx``).
        jvm_args: extra JVM options, e.g. system properties such as
            ``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=...`` (Kafka 4
            reads no OAUTHBEARER JWKS or token URL not listed there).
        startup_timeout: seconds :meth:`start` waits for Metadata to list this node.
        stop_timeout: seconds :meth:`stop` waits after SIGTERM (a controlled
            shutdown) before SIGKILL.
    """

    def __init__(
        self,
        node_id: int = 1,
        *,
        workdir: str | os.PathLike[str] | None = None,
        listeners: Sequence[Listener] = (),
        properties: Mapping[str, str] | None = None,
        scram_users: Sequence[tuple[str, str, str]] = (),
        features: Mapping[str, int] | None = None,
        cluster_id: str | None = None,
        voters: str | None = None,
        controller_port: int | None = None,
        port: int | None = None,
        host: str = HOST,
        controller_host: str | None = None,
        launcher: Sequence[str] = (),
        probe_source: str | None = None,
        heap: str = "512m",
        jvm_args: Sequence[str] = (),
        startup_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        libs: str | os.PathLike[str] | None = None,
    ) -> None:
        self._owns_workdir = workdir is None
        self.workdir = Path(
            tempfile.mkdtemp(prefix=f"kafka-{node_id}-") if workdir is None else workdir
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        super().__init__(
            log_path=self.workdir / "broker.log",
            startup_timeout=startup_timeout,
            stop_timeout=stop_timeout,
        )
        self.node_id = node_id
        self._host = host
        self.controller_host = controller_host or host
        self.launcher = list(launcher)
        self.probe_source = probe_source
        self._libs = Path(libs) if libs is not None else None
        self._port = port if port is not None else free_port()
        self.controller_port = controller_port if controller_port is not None else free_port()
        self.listeners = [
            Listener(lsn.name, lsn.security_protocol, lsn.port or free_port(), dict(lsn.properties))
            for lsn in listeners
        ]
        self.cluster_id = cluster_id or _random_cluster_id()
        self.voters = voters or f"{node_id}@{self.controller_host}:{self.controller_port}"
        self._extra_properties = dict(properties or {})
        self._scram_users = list(scram_users)
        self._features = dict(features or {})
        self.heap = heap
        self.jvm_args = list(jvm_args)
        self._formatted = (self.workdir / "data" / "meta.properties").is_file()

    # -- addresses --------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The PLAINTEXT listener's port, kept across restarts."""
        return self._port

    @property
    def host(self) -> str:
        """The address of the listeners (``127.0.0.1`` unless set)."""
        return self._host

    @property
    def bootstrap_servers(self) -> str:
        """``"HOST:PORT"`` of the PLAINTEXT listener, valid across restarts."""
        return f"{self.host}:{self.port}"

    def address(self, listener: str) -> str:
        """``"HOST:PORT"`` of the extra listener called ``listener``."""
        for lsn in self.listeners:
            if lsn.name == listener:
                return f"{self.host}:{lsn.port}"
        raise KeyError(
            f"no listener named {listener!r}; have {[lsn.name for lsn in self.listeners]}"
        )

    @property
    def libs(self) -> Path:
        """The directory of Apache Kafka jars this broker runs from."""
        if self._libs is None:
            self._libs = find_kafka_libs()
        return self._libs

    # -- configuration ----------------------------------------------------------------

    def server_properties(self) -> dict[str, str]:
        """The complete ``server.properties`` this broker is started with."""
        host = self.host
        listeners = [
            f"PLAINTEXT://{host}:{self.port}",
            f"CONTROLLER://{self.controller_host}:{self.controller_port}",
        ]
        protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        advertised = [f"PLAINTEXT://{host}:{self.port}"]
        for lsn in self.listeners:
            listeners.append(f"{lsn.name}://{host}:{lsn.port}")
            advertised.append(f"{lsn.name}://{host}:{lsn.port}")
            protocols.append(f"{lsn.name}:{lsn.security_protocol}")
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "log.dirs": str(self.workdir / "data"),
            **_BASE_PROPERTIES,
        }
        for lsn in self.listeners:
            prefix = f"listener.name.{lsn.name.lower()}."
            props.update({prefix + key: value for key, value in lsn.properties.items()})
        props.update(self._extra_properties)
        return props

    def _write_config(self) -> Path:
        path = self.workdir / "server.properties"
        lines = [f"{key}={_escape(value)}" for key, value in self.server_properties().items()]
        path.write_text("\n".join(lines) + "\n")
        (self.workdir / "log4j2.properties").write_text(_LOG4J2)
        return path

    def _java_command(self, main_class: str, *args: str) -> list[str]:
        return [
            _java(),
            "-Xms128m",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            *self.jvm_args,
            "-cp",
            f"{self.libs}/*",
            main_class,
            *args,
        ]

    def _format(self, config: Path) -> None:
        args = ["format", "-t", self.cluster_id, "-c", str(config), "--ignore-formatted"]
        for mechanism, user, password in self._scram_users:
            args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        for name, level in self._features.items():
            args += ["--feature", f"{name}={level}"]
        with open(self.log_path, "ab") as log:
            result = subprocess.run(
                self._java_command("kafka.tools.StorageTool", *args),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=self.startup_timeout,
                check=False,
            )
        if result.returncode != 0:
            raise BrokerStartError(
                f"formatting storage of Kafka node {self.node_id} failed "
                f"(exit {result.returncode}); log {self.log_path}:\n{self.read_log(4000)}"
            )
        self._formatted = True

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> KafkaBroker:
        """Format storage (first start only), launch, and block until Metadata lists this node.

        Raises:
            KafkaJarsUnavailable: the jars were not fetched or Java is missing.
            BrokerStartError: a port is taken, or the broker died or was not
                ready within ``startup_timeout``; the message carries the log tail.
        """
        self.launch()
        self.wait_ready()
        return self

    def launch(self) -> KafkaBroker:
        """Format storage (first start only) and launch the process; do not wait.

        A node of a multi-node quorum only serves once a majority of the
        controllers runs, so a cluster launches every node before it waits for
        any (:meth:`wait_ready`). Raises as :meth:`start` does.
        """
        if self.is_running:
            raise RuntimeError(f"broker already running (pid {self.pid})")
        addresses = [(self.host, self.port), (self.controller_host, self.controller_port)]
        addresses += [(self.host, lsn.port) for lsn in self.listeners]
        for host, port in addresses:
            if port_accepts(port, host=host):
                raise BrokerStartError(f"port {host}:{port} is already in use")
        config = self._write_config()
        if not self._formatted:
            self._format(config)
        self._start_process(
            [*self.launcher, *self._java_command("kafka.Kafka", str(config))],
            dict(os.environ),
            self._what(),
        )
        return self

    def format_storage(self) -> None:
        """Write the config and format storage now, if not done yet (it takes a JVM start)."""
        if not self._formatted:
            self._format(self._write_config())

    def wait_ready(self) -> None:
        """Block until Metadata lists this node (at most ``startup_timeout`` from the launch)."""
        self._await_ready(self._what())

    def _what(self) -> str:
        return f"Kafka node {self.node_id} on {self.bootstrap_servers}"

    def request(self, api: Api[Any, Any], version: int, body: Any, timeout: float = 2.0) -> Any:
        """One request to this broker from the probe address (see :func:`probe`)."""
        return probe(
            self.port, api, version, body, timeout, host=self.host, source=self.probe_source
        )

    def _is_ready(self) -> bool:
        body = probe_metadata(self.port, timeout=1.0, host=self.host, source=self.probe_source)
        return body is not None and any(b.node_id == self.node_id for b in body.brokers)

    def restart(self) -> None:
        """Stop gracefully (if running) and start again: same ports, same data."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Kill the process if still running and remove a workdir this broker made."""
        self.kill()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- context manager --------------------------------------------------------------

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        super().__exit__(exc_type, exc, tb)
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"<KafkaBroker node {self.node_id} {self.bootstrap_servers} pid={self.pid} {self._state()}>"


def _escape(value: str) -> str:
    # java.util.Properties reads backslashes as escapes; JAAS configs and paths
    # must reach Kafka as written.
    return value.replace("\\", "\\\\").replace("\n", "\\n")
