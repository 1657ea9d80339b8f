"""TLS and SASL: the mock cluster's secured listeners and the secure front to Tansu."""
