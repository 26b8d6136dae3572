"""One sync pass: per table, lease, plan, stage, apply, checkpoint; used by the CLI and Dagster alike."""
