"""Reaching one node: base.py (the Transport protocol and its bounds), local.py, ssh.py (Paramiko, imported only when an
SSH node is opened), slurm.py (srun steps), and factory.py, which picks one per node."""
