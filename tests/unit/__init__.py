"""Unit tests: no broker needed."""
