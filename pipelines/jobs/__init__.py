"""Spark jobs that apply a staged batch to a Delta target over Spark Connect; no Dagster, no HTTP."""
