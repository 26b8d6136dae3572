"""Delta Lake table-format facts a reader needs beyond plain parquet: deletion vectors and column mapping.

Pure decoding, no HTTP and no engine: the protocol client and the stager call into it.
"""
