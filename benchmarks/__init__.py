"""Throughput and CPU benchmarks of aioproducer against other Python Kafka producers."""
