"""The Delta Sharing protocol client: wire models, transport, credentials, NDJSON streams, endpoints, downloads."""
