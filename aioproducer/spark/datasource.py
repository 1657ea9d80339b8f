"""The ``aioproducer`` Python Data Source: Kafka as a Spark batch and streaming sink.

::

    from aioproducer.spark import register
    register(spark)
    (df.write.format("aioproducer")
       .option("kafka.bootstrap.servers", "host:9092")
       .option("topic", "events")
       .mode("append").save())

Spark calls :meth:`AioproducerDataSource.writer` (or ``streamWriter``) while it
plans the query, on the driver, with the DataFrame's schema. Options and
columns are checked there, so a mistake fails ``save()`` / ``start()`` before
any task runs; the returned writer is pickled and shipped to the tasks.

The options are described and checked in :mod:`aioproducer.spark.options`.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, DataSourceWriter
from pyspark.sql.types import StructType

from ..errors import ConfigurationError
from .avro_columns import plan_avro
from .columns import ColumnPlan, plan_columns
from .options import SinkOptions, parse_options
from .writer import KafkaBatchWriter, stream_writer_class

__all__ = ["AioproducerDataSource", "SinkOptions", "parse_options"]


class AioproducerDataSource(DataSource):
    """Writes DataFrames to Kafka with aioproducer; see the Spark guide (docs/guides/spark.md)."""

    @classmethod
    def name(cls) -> str:
        """The format name: ``df.write.format("aioproducer")``."""
        return "aioproducer"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer; checks the options and columns first (AnalysisException on error)."""
        options, plan = self._prepare(schema, overwrite)
        return KafkaBatchWriter(options, plan)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The micro-batch writer (Arrow input on Spark 4.1+, Rows on 4.0); checks as ``writer``."""
        options, plan = self._prepare(schema, overwrite)
        return stream_writer_class()(options, plan)

    def _prepare(self, schema: StructType, overwrite: bool) -> tuple[SinkOptions, ColumnPlan]:
        if overwrite:
            # Kafka topics are append-only logs; pretending otherwise would lose
            # nothing but surprise everyone.
            raise ConfigurationError(
                "the aioproducer sink only appends: Kafka cannot overwrite a topic; "
                "use mode('append') (or outputMode('append') for streams)"
            )
        options = parse_options(self.options)
        avro = () if options.avro is None else tuple(c.which for c in options.avro.columns)
        plan = plan_columns(schema, options.topic, avro=avro)
        # Avro columns: their schemas derived, and resolved with the registry if possible.
        return plan_avro(schema, plan, options), plan
