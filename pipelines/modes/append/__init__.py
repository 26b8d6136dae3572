"""Append mode (docs/modes.md): its strategy, staging choices, Spark write and accounting."""
