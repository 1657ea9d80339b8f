"""Runnable examples; a package so that tests and benchmarks can import them."""
