"""The ``sharesync`` command line: one module per command group, loaded on demand."""
