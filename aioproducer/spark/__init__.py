"""Kafka sink for Apache Spark 4 built on aioproducer.

``register(spark)`` makes ``format("aioproducer")`` available to
``df.write`` and ``df.writeStream``. PySpark is an optional dependency
(``pip install 'aioproducer[spark]'``): importing :mod:`aioproducer` never
imports it, and this package only does when its contents are used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["AioproducerDataSource", "KafkaCommitMessage", "local_session", "register"]

_INSTALL_HINT = "pip install 'aioproducer[spark]'"


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
        import pyarrow  # type: ignore[import-untyped]  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"the aioproducer Spark sink needs pyarrow ({_INSTALL_HINT}): {exc}"
        ) from exc


def register(spark: SparkSession) -> None:
    """Register the ``aioproducer`` data source with ``spark``."""
    _require_pyspark()
    from .datasource import AioproducerDataSource

    spark.dataSource.register(AioproducerDataSource)


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
