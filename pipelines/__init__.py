"""The engine side: Spark jobs (``jobs``), one pass over the tables (``run``) and the Dagster layer (``dagster``)."""
