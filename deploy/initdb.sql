-- One PostgreSQL server, two databases: Dagster's (created by POSTGRES_DB) and sharesync's state.
CREATE DATABASE sharesync;
