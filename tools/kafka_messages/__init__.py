"""Generate aioproducer's protocol message classes from Kafka's JSON message specs."""
