"""aioproducer test suite."""
