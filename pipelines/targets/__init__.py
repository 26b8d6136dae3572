"""Target formats: everything sharesync does to a target, behind one port.

:mod:`.port` names the operations (glance, inspect, create, evolve, commit metrics and records,
rows for checks, discard, preflight); :mod:`.delta` is the only implementation. The format-neutral
parts sit here: the target's state before a job (:mod:`.state`), sharesync's own columns
(:mod:`.guard_columns`) and the schema decision (:mod:`.schema_evolution`).
"""
