"""One module per producer client; each runs in its own process (``python -m``)."""
