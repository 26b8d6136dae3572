"""The recipient side of Delta Sharing without an engine: kernel (``core``), Delta format (``delta``), protocol client, predicates, planning, staging, the local sharing server and the CLI."""
