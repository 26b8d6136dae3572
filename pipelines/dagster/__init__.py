"""The thin Dagster layer over ``pipelines.run``: assets, observable sources, sensor, checks, resources, the component."""
