"""Which nodes there are and how to reach them: the inventory file, hostfiles, Slurm allocations, their settings
(the only defaults), node selection, the starter inventory and the nodes the last run left failed.

Imports only ascendctl's foundation modules (errors, models, paths, nodeset, slurm, redact)."""
