"""Target inspection: what a target Delta table holds, read with deltalake alone (no Spark).

The run asks here before and after a job (identity, row count, history rows, what a commit
did); the Spark jobs write, this package only reads.
"""
