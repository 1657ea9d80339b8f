"""Compile small Java programs against the fetched Kafka jars, once, and run them.

The Java reference clients (a ``KafkaConsumer`` reading back what aioproducer
wrote, Java's ``KafkaProducer`` as a benchmark peer) are single source files
compiled with ``javac`` against the jars that ``tools/kafka/fetch.sh`` puts in
``.cache/kafka/<version>/libs`` (see
:func:`tests.support.kafka_broker.find_kafka_libs`). Classes land in
``.cache/java/<kafka-clients jar>/<name>`` and are reused while each class file
is newer than its source; a process compiles a given set at most once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from tests.support.kafka_broker import KafkaJarsUnavailable, find_kafka_libs

__all__ = ["SMALL_JVM", "JavaProgram", "JavaToolsUnavailable", "compile_java", "skip_or_fail"]

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = REPO_ROOT / ".cache" / "java"

# The JVM's own logging (SLF4J -> log4j2 from the Kafka libs) goes to stderr:
# stdout carries the programs' JSON lines only.
_LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""

# A short-lived helper: a small heap and the serial collector (fewest threads) spare a
# shared machine; a benchmark passes its own options.
SMALL_JVM = ("-Xmx256m", "-XX:+UseSerialGC")

_lock = threading.Lock()
_compiled: dict[tuple[str, tuple[str, ...]], JavaProgram] = {}


class JavaToolsUnavailable(KafkaJarsUnavailable):
    """No JDK (``javac``) or no Kafka jars to compile against."""


def skip_or_fail(exc: Exception) -> NoReturn:
    """A test without its Java tools: skipped on a developer's machine, failed in CI."""
    import pytest

    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{exc} (CI must check interop with the Java client)")
    pytest.skip(str(exc))


def _tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", name).is_file():
        return str(Path(home, "bin", name))
    found = shutil.which(name)
    if found is None:
        raise JavaToolsUnavailable(
            f"no {name} on PATH: the Java interop tools need a JDK 17+ "
            "(Debian: apt-get install openjdk-17-jdk-headless)"
        )
    return found


def _clients_jar(libs: Path) -> Path:
    jars = sorted(libs.glob("kafka-clients-*.jar"))
    if not jars:
        raise JavaToolsUnavailable(f"no kafka-clients jar in {libs}")
    return jars[-1]


@dataclass(frozen=True)
class JavaProgram:
    """Compiled classes and the class path to run them with."""

    libs: Path
    classes: Path
    log_config: Path

    def command(
        self, main_class: str, *args: str, jvm_options: Sequence[str] = SMALL_JVM
    ) -> list[str]:
        """``java ... main_class args`` with the Kafka libs and the compiled classes."""
        return [
            _tool("java"),
            *jvm_options,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log_config}",
            "-cp",
            f"{self.libs}/*{os.pathsep}{self.classes}",
            main_class,
            *args,
        ]


def _fresh(sources: Sequence[Path], classes: Path) -> bool:
    for src in sources:
        cls = classes / (src.stem + ".class")
        if not cls.is_file() or cls.stat().st_mtime <= src.stat().st_mtime:
            return False
    return True


def compile_java(
    sources: Sequence[Path], name: str, libs: Path | None = None, timeout: float = 180.0
) -> JavaProgram:
    """Compile ``sources`` into ``.cache/java/<clients jar>/<name>`` unless up to date.

    Raises:
        JavaToolsUnavailable: no JDK, or the Kafka jars were not fetched.
        RuntimeError: ``javac`` failed (its output is in the message).
    """
    libs = libs or find_kafka_libs()
    sources = [Path(s).resolve() for s in sources]
    key = (str(libs), tuple(str(s) for s in sources))
    with _lock:
        if key in _compiled and _fresh(sources, _compiled[key].classes):
            return _compiled[key]
        classes = CACHE / _clients_jar(libs).stem / name
        classes.mkdir(parents=True, exist_ok=True)
        log_config = classes / "log4j2.properties"
        if not log_config.is_file() or log_config.read_text() != _LOG4J2:
            log_config.write_text(_LOG4J2)
        if not _fresh(sources, classes):
            _javac(sources, libs, classes, timeout)
        program = JavaProgram(libs, classes, log_config)
        _compiled[key] = program
        return program


def _javac(sources: Sequence[Path], libs: Path, classes: Path, timeout: float) -> None:
    # Compiled aside, then moved in file by file: a concurrent run sees either
    # the old class files or the new ones, never a half-written one.
    with tempfile.TemporaryDirectory(dir=classes.parent, prefix=f".{classes.name}-") as tmp:
        cmd = [
            _tool("javac"),
            "-nowarn",
            "-encoding",
            "UTF-8",
            "--release",
            "17",
            "-cp",
            f"{_clients_jar(libs)}{os.pathsep}{libs}/*",
            "-d",
            tmp,
            *map(str, sources),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"javac failed (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
            )
        for produced in Path(tmp).iterdir():
            os.replace(produced, classes / produced.name)
