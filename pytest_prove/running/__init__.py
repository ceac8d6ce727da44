"""Running a rollout: a block of replicates on the process that runs the item (an xdist worker
or the one process), each ending in a checked Episode or an error record. Imports neither
pytest nor the store."""
