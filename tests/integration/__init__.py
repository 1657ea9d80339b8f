"""Tests against a real Kafka-compatible broker (marked ``integration``)."""
