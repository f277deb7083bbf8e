# node_0 (a3-node-0)
export HCCL_IF_IP=172.16.0.100
export HCCL_SOCKET_IFNAME=eth0
export GLOO_SOCKET_IFNAME=eth0
export NCCL_SOCKET_IFNAME=eth0
export MASTER_ADDR=172.16.0.100
export MASTER_PORT=6000
export HCCL_CONNECT_TIMEOUT=1200
export RANK_TABLE_FILE=/shared/job/rank_table.json

# node_1 (a3-node-1)
export HCCL_IF_IP=172.16.0.101
export HCCL_SOCKET_IFNAME=eth0
export GLOO_SOCKET_IFNAME=eth0
export NCCL_SOCKET_IFNAME=eth0
export MASTER_ADDR=172.16.0.100
export MASTER_PORT=6000
export HCCL_CONNECT_TIMEOUT=1200
export RANK_TABLE_FILE=/shared/job/rank_table.json
