"""The shared kernel every layer may import: errors, redaction, timestamps, configuration, the change-feed vocabulary."""
