"""Spark's own Kafka connector (``spark-sql-kafka-0-10``) for ``df.write.format("kafka")``.

The pyspark wheel does not ship it. ``tools/spark-kafka/fetch.sh`` fetches the
connector of the installed pyspark version (or the one pinned in
``tools/spark-kafka/pom.xml`` when Maven Central has none of that version) and
its runtime dependencies into ``.cache/spark-kafka/<pyspark version>/jars``;
:func:`spark_kafka_jars` runs it when that cache is missing and returns the
jars to pass as ``spark.jars``, leaving out every library the wheel already
has (Spark's own jars, Scala, Hadoop, SLF4J...), so Spark keeps its versions.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

__all__ = ["SparkKafkaUnavailable", "spark_kafka_jars"]

REPO_ROOT = Path(__file__).resolve().parent.parent
FETCH = REPO_ROOT / "tools" / "spark-kafka" / "fetch.sh"

# "kafka-clients-3.9.2.jar" -> "kafka-clients"; "spark-tags_2.13-4.2.0.jar" -> "spark-tags_2.13"
_ARTIFACT = re.compile(r"^(?P<name>.+?)-\d[^-]*(?:-[A-Za-z][\w.]*)?\.jar$")


class SparkKafkaUnavailable(RuntimeError):
    """The connector could not be fetched (no Maven, or Maven Central unreachable)."""


def artifact_name(jar: str) -> str:
    """A jar file name without its version."""
    m = _ARTIFACT.match(jar)
    return m.group("name") if m else jar.removesuffix(".jar")


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def spark_kafka_jars(timeout: float = 600.0) -> list[Path]:
    """The connector's jars that the pyspark wheel lacks, fetched first if needed."""
    import pyspark

    cache = REPO_ROOT / ".cache" / "spark-kafka" / pyspark.__version__ / "jars"
    if not (cache / ".complete").is_file():
        print(
            f"fetching spark-sql-kafka-0-10 for pyspark {pyspark.__version__} ({FETCH})", flush=True
        )
        try:
            proc = subprocess.run(
                ["bash", str(FETCH), pyspark.__version__],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                env={**os.environ, "PYTHON": sys.executable},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SparkKafkaUnavailable(f"{FETCH} did not run: {exc}") from exc
        if proc.returncode != 0 or not (cache / ".complete").is_file():
            raise SparkKafkaUnavailable(
                f"{FETCH} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
            )
        if "WARNING" in proc.stderr:
            print(proc.stderr.strip().splitlines()[0], flush=True)
    provided = {artifact_name(j.name) for j in _pyspark_jars().glob("*.jar")}
    jars = [j for j in sorted(cache.glob("*.jar")) if artifact_name(j.name) not in provided]
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in jars):
        raise SparkKafkaUnavailable(f"no spark-sql-kafka-0-10 jar in {cache}")
    return jars
