#!/usr/bin/env bash
# Prefix every line read on stdin with the node's local time: "2026-11-23T10:00:00.123456 | line".
# Run by bash (EPOCHREALTIME needs bash >= 5; older bash stamps whole seconds). Used by `ascendctl launch`
# between a node's launcher and its launcher.log, so that triage can order lines across nodes.
# Signals are ignored: the stamper ends at end of input, after the last process writing to it,
# so a launcher's last words (its failure report) are never cut off by a teardown.
trap '' TERM INT HUP
while IFS= read -r line || [ -n "$line" ]; do
    now=${EPOCHREALTIME:-}
    if [ -n "$now" ]; then
        printf '%(%Y-%m-%dT%H:%M:%S)T.%s | %s\n' "${now%.*}" "${now#*.}" "$line"
    else
        printf '%(%Y-%m-%dT%H:%M:%S)T.000000 | %s\n' -1 "$line"
    fi
done
