"""What nodes say about themselves: parsers of tool output (pure), the cluster endpoint (NIC, address) and NPU
devices (device IPs, SuperPoD ids) read from the nodes.

Imports the foundation, inventory/ and remote/ only."""
