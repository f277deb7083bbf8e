# node_0 (a3-node-0)
export RANK_TABLE_FILE=/shared/job/rank_table.json
export HCCL_IF_IP=172.16.0.110
export HCCL_CONNECT_TIMEOUT=1200
export MASTER_ADDR=172.16.0.110
export MASTER_PORT=6000

# node_1 (a3-node-1)
export RANK_TABLE_FILE=/shared/job/rank_table.json
export HCCL_IF_IP=172.16.0.111
export HCCL_CONNECT_TIMEOUT=1200
export MASTER_ADDR=172.16.0.110
export MASTER_PORT=6000
