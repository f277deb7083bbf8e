"""Reaching nodes: transports (local, SSH, Slurm), the node group that owns their connections, bounded fan-out,
the file-descriptor budget, the framed probe and the shell programs (sh/) run on nodes.

Imports the foundation and inventory/ only."""
