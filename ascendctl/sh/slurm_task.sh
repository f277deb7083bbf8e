#!/bin/sh
# slurm_task.sh LOG_DIR JOB_ID: one task of `ascendctl launch`'s srun step (one task per node), run by srun.
#
# stdin (srun --input=all, the same stream on every node) is a tar with one directory per node; this task
# unpacks only its own node's (umask 077: .job.env holds the job's environment), checks that Slurm's node
# rank (SLURM_NODEID) is the rank ascendctl planned for this node, then runs the same job_wrapper.sh as the
# SSH runner in the foreground (so the step lives as long as the launcher), with ascendctl's job marker.
log_dir=$1 job=$2
node=${SLURMD_NODENAME:?not a Slurm task}
dir="$log_dir/$node"
mkdir -p "$dir/workers" && rm -f "$dir/exit_code" "$dir/pid" && : > "$dir/launcher.log" || exit 96
# .job.env holds secrets: removed first (so tar creates it anew, 0600), and on every way out of this task until
# the wrapper owns it (it reads it, then deletes it, first thing): a full disk part way through the unpack, a
# rank mismatch, a signal
trap 'rm -f "$dir/.job.env"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
rm -f "$dir/.job.env"
(umask 077 && tar -xf - -C "$log_dir" "$node") || { echo "ascendctl: $node: cannot unpack the job into $dir" >&2; exit 96; }
rank=$(cat "$dir/.job.rank")
rm -f "$dir/.job.rank"
if [ "$rank" != "${SLURM_NODEID:-}" ]; then
    echo "ascendctl: $node: Slurm node rank ${SLURM_NODEID:-unset} is not the planned node rank $rank" >&2
    exit 97
fi
trap - EXIT HUP INT TERM
exec env "ASCENDCTL_JOB=$job/$node" /bin/sh "$dir/job_wrapper.sh" "$dir" < /dev/null
