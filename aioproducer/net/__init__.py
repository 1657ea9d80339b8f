"""Networking: broker connections, bootstrap and metadata, TLS and SASL set-up."""
