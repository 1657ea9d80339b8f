"""The engine: batches, the accumulator, the sender and its pure decisions."""
