"""From downloaded provider files to a staged batch the engine reads: schema, file staging, netting, history planning."""
