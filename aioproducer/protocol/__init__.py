"""The Kafka wire protocol, sans-I/O: framing, schemas as data, record batch v2, compression."""
