"""Jobs: plan, environment, record, runners (SSH, Slurm), supervision, the detached supervisor, and service.py,
what the commands call (launch, dry run, status, stop, logs)."""
