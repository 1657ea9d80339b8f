"""Fixtures for the Spark sink tests: one local Spark session for the whole run.

Spark's JVM takes seconds to start, so a single session (``local[2,2]``: two
cores, and a task may fail once and be retried, which the transactional test
needs) serves every test. Tests share it and must not change its global
configuration without restoring it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the Spark sink tests need the 'spark' extra")
pytest.importorskip("pyarrow", reason="the Spark sink tests need the 'spark' extra")

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("the Spark sink tests need a Java runtime (17+)", allow_module_level=True)

from pyspark.sql import SparkSession

from aioproducer.spark import local_session

# Spark's Python workers must run in this interpreter, which has aioproducer.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """A ``local[2,2]`` Spark session with the ``aioproducer`` data source registered."""
    warehouse: Path = tmp_path_factory.mktemp("spark-warehouse")
    session = local_session(
        "aioproducer-tests",
        master="local[2,2]",  # two attempts per task: the transactional tests fail the first
        **{
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
        },
    )
    try:
        yield session
    finally:
        session.stop()
