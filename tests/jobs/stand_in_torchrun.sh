#!/bin/sh
# Stand-in torchrun: starts --nproc-per-node workers of the script with torchrun's RANK and LOCAL_RANK, and waits.
for a in "$@"; do
  case $a in --node-rank=*) node=${a#--node-rank=};; --nproc-per-node=*) n=${a#--nproc-per-node=};; -*) ;; *) script=${script:-$a};; esac
done
i=0
while [ "$i" -lt "$n" ]; do
  RANK=$((node * n + i)) LOCAL_RANK=$i "$(dirname "$0")/python" "$script" &
  i=$((i + 1))
done
wait
