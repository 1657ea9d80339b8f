"""The bulk path: whole columns of records encoded in one pass."""
