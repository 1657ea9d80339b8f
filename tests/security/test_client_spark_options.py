"""The Spark sink passes kafka.security.protocol, kafka.sasl.* and kafka.ssl.* through."""

from __future__ import annotations

import pickle

import pytest

pytest.importorskip("pyspark")

from aioproducer import errors
from aioproducer.config import config_from_properties
from aioproducer.spark.datasource import parse_options

SECRET = "spark-Secret-77"


def test_security_options_reach_the_producer_configuration() -> None:
    # Spark lower-cases option names; Java property names already are.
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "broker:9093",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="spark" password="{SECRET}";'
            ),
            "kafka.ssl.endpoint.identification.algorithm": "https",
            "topic": "events",
        }
    )
    cfg = config_from_properties(opts.task_properties(3))
    assert cfg.security.protocol == "SASL_SSL"
    assert cfg.security.sasl is not None and cfg.security.sasl.mechanism == "SCRAM-SHA-512"
    assert (cfg.sasl_plain_username, cfg.sasl_plain_password) == ("spark", SECRET)
    assert cfg.security.ssl_context is not None and cfg.security.ssl_context.check_hostname
    # Shipped to executors by pickling, shown in logs by repr: the secret only travels.
    assert pickle.loads(pickle.dumps(opts)) == opts
    assert SECRET not in repr(opts) and "sasl.jaas.config" in repr(opts)


def test_inconsistent_security_options_fail_at_analysis_time() -> None:
    with pytest.raises(errors.ConfigurationError, match="needs sasl_mechanism"):
        parse_options({"kafka.bootstrap.servers": "b:9093", "kafka.security.protocol": "SASL_SSL"})
    with pytest.raises(errors.ConfigurationError, match="no such file"):
        parse_options(
            {
                "kafka.bootstrap.servers": "b:9093",
                "kafka.security.protocol": "SSL",
                "kafka.ssl.truststore.location": "/nonexistent/ca.pem",
            }
        )
