"""Names from aiokafka and librdkafka (confluent-kafka) that users bring along, and what to use here.

A misspelt setting gets a "did you mean" from :mod:`aioproducer.config`; a
name that is right in another client is not misspelt, so it gets the name
this producer uses instead (or why none is needed). Only names that do not
exist here are listed.
"""

from __future__ import annotations

__all__ = ["LIBRDKAFKA_PROPERTIES", "PEER_METHODS", "PEER_SETTINGS"]

#: aiokafka's ``AIOKafkaProducer(...)`` keywords -> what to do here.
PEER_SETTINGS = {
    "api_version": "aiokafka's api_version is not needed: the producer asks each broker "
    "which versions it speaks (ApiVersions) and uses the newest both know",
    "loop": "aiokafka's loop is not needed: the producer runs on the event loop that starts it",
    "compression_type": "aiokafka's compression_type is compression= here",
    "max_batch_size": "aiokafka's max_batch_size is batch_size= here",
    "sasl_kerberos_service_name": "GSSAPI (Kerberos) is not supported",
    "sasl_kerberos_domain_name": "GSSAPI (Kerberos) is not supported",
}

#: librdkafka property names (``Producer.from_config``) -> the Java name it takes.
LIBRDKAFKA_PROPERTIES = {
    "queue.buffering.max.ms": "librdkafka's queue.buffering.max.ms is Java's linger.ms",
    "queue.buffering.max.kbytes": "librdkafka's queue.buffering.max.kbytes is Java's "
    "buffer.memory (in bytes)",
    "queue.buffering.max.messages": "librdkafka's queue.buffering.max.messages has no "
    "equivalent: buffer.memory (bytes) bounds what waits",
    "batch.num.messages": "librdkafka's batch.num.messages has no equivalent: batch.size "
    "(bytes) bounds a batch",
    "message.max.bytes": "librdkafka's message.max.bytes is Java's max.request.size",
    "message.send.max.retries": "librdkafka's message.send.max.retries is Java's retries",
    "message.timeout.ms": "librdkafka's message.timeout.ms is Java's delivery.timeout.ms",
    "delivery.report.only.error": "delivery reports are the handles enqueue() returns",
    "compression.codec": "librdkafka's compression.codec is Java's compression.type",
    "socket.timeout.ms": "librdkafka's socket.timeout.ms is Java's request.timeout.ms",
    "request.required.acks": "librdkafka's request.required.acks is Java's acks",
    "topic.metadata.refresh.interval.ms": "librdkafka's topic.metadata.refresh.interval.ms "
    "is Java's metadata.max.age.ms",
    "debug": "librdkafka's debug is Python logging here: set the 'aioproducer' logger to DEBUG",
}

#: Methods of aiokafka's and confluent-kafka's producers -> what to call here.
PEER_METHODS = {
    "send_and_wait": "aiokafka's send_and_wait(...) is await producer.send(...) here",
    "stop": "aiokafka's stop() is await producer.close() here",
    "create_batch": "aiokafka's batches are producer.send_many(...) / enqueue_many(...) here",
    "send_batch": "aiokafka's send_batch is producer.send_many(...) / enqueue_many(...) here",
    "produce": "confluent-kafka's produce(...) is await producer.enqueue(...) here "
    "(it returns a handle to await instead of taking a callback)",
    "poll": "confluent-kafka's poll() is not needed: acknowledgements resolve the handles "
    "that enqueue() returns, on the event loop",
}
