"""Kafka sink for Apache Spark 4 built on aioproducer.

``register(spark)`` makes ``format("aioproducer")`` available to
``df.write`` and ``df.writeStream``. PySpark is an optional dependency
(``pip install 'aioproducer[spark]'``): importing :mod:`aioproducer` never
imports it, and this package only does when its contents are used.
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "AioproducerDataSource",
    "KafkaCommitMessage",
    "check_python_workers",
    "local_session",
    "register",
]

_INSTALL_HINT = "pip install 'aioproducer[spark]'"
#: Seconds register() waits for its probe task on Spark's Python workers.
PROBE_TIMEOUT = 120.0


def _require_pyspark() -> None:
    try:
        import pyspark
        import pyspark.sql.datasource  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"the aioproducer Spark sink needs PySpark 4.0 or later with pyarrow ({_INSTALL_HINT}); "
            f"importing it failed: {exc}"
        ) from exc
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"the aioproducer Spark sink needs pyarrow ({_INSTALL_HINT}): {exc}"
        ) from exc


def register(spark: SparkSession, *, check_workers: bool = True) -> None:
    """Register the ``aioproducer`` data source with ``spark``.

    ``check_workers``: first run one tiny task to see that Spark's Python
    workers import the same aioproducer as this driver (ImportError naming
    ``PYSPARK_PYTHON`` if not), so that a wrong worker interpreter fails here
    in seconds rather than in the first write's tasks. Skipped where the
    session has no SparkContext (Spark Connect).
    """
    _require_pyspark()
    from .datasource import AioproducerDataSource

    if check_workers:
        check_python_workers(spark)
    spark.dataSource.register(AioproducerDataSource)


def _worker_probe() -> Any:
    # A nested function: cloudpickle ships it by value, so a worker that lacks
    # aioproducer can still run it and say so (a module-level function would
    # be pickled as a reference to this module, whose import would fail).
    def probe(_: object) -> tuple[str, str | None, str | None]:
        import sys

        try:
            import aioproducer
        except Exception as exc:  # noqa: BLE001 - reported to the driver as it is
            return sys.executable, None, f"{type(exc).__name__}: {exc}"
        return sys.executable, aioproducer.__version__, None

    return probe


def _python_error(text: str) -> str:
    """The last Python exception line in a Spark error's text (its JVM trace around it), or ''."""
    lines = [
        line.strip()
        for line in text.splitlines()
        if re.match(r"\s*[A-Za-z_.]*(Error|Exception): ", line)
    ]
    return lines[-1] if lines else (text.strip().splitlines() or [""])[0]


def check_python_workers(spark: SparkSession, timeout: float = PROBE_TIMEOUT) -> None:
    """Raise ImportError unless Spark's Python workers import this driver's aioproducer version.

    PySpark starts its workers with ``PYSPARK_PYTHON`` (or the
    ``spark.pyspark.python`` setting), else ``python3`` from PATH: not the
    driver's interpreter, so a virtualenv that was not activated gives
    workers without aioproducer. The probe task is cancelled after
    ``timeout`` seconds (a cluster that grants no executor): TimeoutError.
    """
    import os
    import sys
    import threading
    import uuid

    from .. import __version__

    try:
        context = spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: nothing to probe
        return
    configured = os.environ.get("PYSPARK_PYTHON") or context.getConf().get("spark.pyspark.python")
    where = (
        f"PYSPARK_PYTHON / spark.pyspark.python is {configured!r}"
        if configured
        else "PYSPARK_PYTHON is not set, so they run python3 from PATH"
    )
    fix = (
        f"set PYSPARK_PYTHON={sys.executable} (this driver's interpreter) before the session starts"
    )
    group = f"aioproducer-worker-probe-{uuid.uuid4().hex}"
    timed_out = threading.Event()

    def cancel() -> None:
        timed_out.set()
        context.cancelJobGroup(group)

    context.setJobGroup(group, "aioproducer: can the Python workers import it?", True)
    timer = threading.Timer(timeout, cancel)
    timer.daemon = True
    timer.start()
    try:
        [(executable, version, error)] = context.parallelize([0], 1).map(_worker_probe()).collect()
    except Exception as exc:  # the worker could not even start, or the probe was cancelled
        if timed_out.is_set():
            raise TimeoutError(
                f"no Spark Python worker ran the aioproducer probe task within {timeout} s "
                "(does the cluster grant executors?); register(spark, check_workers=False) "
                "skips the check"
            ) from exc
        raise ImportError(
            f"Spark's Python workers could not run a probe task ({where}): "
            f"{_python_error(str(exc)) or type(exc).__name__}; {fix}"
        ) from exc
    finally:
        timer.cancel()
        for prop in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            context.setLocalProperty(prop, None)  # type: ignore[arg-type]  # None clears it
    if error is not None:
        raise ImportError(
            f"Spark's Python workers ({executable}) cannot import aioproducer ({error}): "
            f"{where}; {fix}"
        )
    if version != __version__:
        raise ImportError(
            f"Spark's Python workers ({executable}) have aioproducer {version}, this driver "
            f"{__version__}: the writer pickled here may not load there; {where}; {fix}"
        )


def local_session(app_name: str, master: str = "local[2]", **conf: str) -> SparkSession:
    """A quiet local Spark session with the data source registered.

    For examples, benchmarks and tests on one machine: no UI, no progress
    bars, two shuffle partitions, UTC session time. ``conf`` adds or
    overrides Spark settings by their real names: ``**{"spark.x": "y"}``.
    """
    _require_pyspark()
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


_LAZY = {
    "AioproducerDataSource": "aioproducer.spark.datasource",
    "KafkaCommitMessage": "aioproducer.spark.writer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _require_pyspark()
    return getattr(importlib.import_module(module), name)
