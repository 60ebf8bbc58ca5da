#!/usr/bin/env bash
# Stop the one-host SLURM cluster of tests/slurm/start.sh [DIR]: cancel its jobs, then stop
# slurmd, slurmctld and munged by the pid files under DIR (only those). DIR is kept (the
# munge key, logs); remove it by hand to start from nothing.
set -uo pipefail

DIR=${1:-${SLURM_TEST_DIR:-/tmp/slurm-test}}
export SLURM_CONF=$DIR/slurm.conf
say() { printf '[slurm] %s\n' "$*" >&2; }

if [[ -f $SLURM_CONF ]] && timeout 10 scontrol ping >/dev/null 2>&1; then
    jobs=$(squeue -h -o %i 2>/dev/null)
    if [[ -n $jobs ]]; then
        say "cancelling jobs: $(tr '\n' ' ' <<<"$jobs")"
        # shellcheck disable=SC2086
        scancel $jobs
        for _ in $(seq 40); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 1; done
    fi
fi
for name in slurmd slurmctld munged; do
    pid=$(cat "$DIR/run/$name.pid" 2>/dev/null) || continue
    [[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == "$name"* ]] || continue
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { say "$name did not stop in 10 s: SIGKILL"; kill -KILL "$pid"; }
done
exit 0
