"""The Delta target format: :data:`~sharesync.pipelines.targets.delta.format.DELTA`.

Inspection reads a target with ``deltalake`` alone (no Spark: identity, preflight, stats, commit
metrics and records, history rows, discard); :mod:`.write` is the Spark writer the jobs use, every commit of it numbered by
:mod:`.fencing` (the stale-writer fence on Delta Lake on Spark).
"""
