"""Test helpers: a local broker launcher; a mock cluster comes later."""
