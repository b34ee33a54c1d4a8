"""The domain's rules and records: pure, below everything else."""
