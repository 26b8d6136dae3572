"""Pure planning: what a table's run does next, decided from recorded state and provider facts."""
