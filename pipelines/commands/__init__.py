"""What the CLI and the Dagster layer ask of the run outside a pass: the status rows, the verification of a target."""
