"""Shared test support: the independent librdkafka-based verifier."""
