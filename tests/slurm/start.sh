#!/usr/bin/env bash
# A one-host SLURM cluster for the tests (and for trying scripts/slurm/run.sbatch by hand):
#   tests/slurm/start.sh [DIR]     start it (default DIR: $SLURM_TEST_DIR or /tmp/slurm-test)
#   tests/slurm/stop.sh  [DIR]     stop it again
# Then `export SLURM_CONF=DIR/slurm.conf` (or `source DIR/env`) and use sbatch, srun, sinfo.
#
# What it does, each step said as it goes, a step already done skipped:
#   1. installs Debian's slurm-wlm and munge with apt-get, only if slurmctld, slurmd, sbatch
#      or munged are missing (needs root, or sudo);
#   2. writes everything under DIR, which it owns: a munge key, slurm.conf (slurmctld and
#      slurmd on this host as node "localhost", its CPUs and memory from `slurmd -C`, one
#      partition "test"; daemons run as root; no cgroups: proctrack/linuxproc, task/none),
#      the daemons' state, spool, logs and pid files; it writes nothing under /etc;
#   3. starts munged, slurmctld and slurmd, waits (at most 60 s) until sinfo shows the node
#      idle, and checks that `srun -N1 -n2 hostname` prints two lines.
# Run again while it is up, it only checks it. Ports 16817-16818 ($SLURM_TEST_PORT moves them).
# Exit status: 0 up, 3 SLURM cannot be installed here, 1 anything else (with the logs' tail).
set -euo pipefail

DIR=${1:-${SLURM_TEST_DIR:-/tmp/slurm-test}}
PORT=${SLURM_TEST_PORT:-16817}
say() { printf '[slurm] %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
cannot_install() { say "$*"; exit 3; }   # exit status 3: SLURM cannot be installed here

# 1. the packages
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
        || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || cannot_install "SLURM is not installed and this is not a Debian/Ubuntu machine (no apt-get)"
    sudo=()
    if [[ $(id -u) != 0 ]]; then
        command -v sudo >/dev/null || cannot_install "need root (or sudo) to install slurm-wlm and munge"
        sudo=(sudo)
    fi
    say "installing Debian packages slurm-wlm and munge (apt-get; their services are not used)"
    # another apt-get or dpkg (unattended upgrades, a second start.sh): wait for its lock (5 min)
    wait_lock=(-o DPkg::Lock::Timeout=300)
    { "${sudo[@]}" apt-get "${wait_lock[@]}" update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" \
        apt-get "${wait_lock[@]}" install -y -qq --no-install-recommends slurm-wlm munge >/dev/null; } \
        || cannot_install "apt-get could not install slurm-wlm and munge (messages above)"
else
    say "SLURM and munge present: $(dpkg-query -W -f 'slurm-wlm ${Version}' slurm-wlm 2>/dev/null), $(munged --version 2>&1 | head -1)"
fi

export SLURM_CONF=$DIR/slurm.conf
alive() {   # alive NAME: the daemon NAME of this folder's pid file runs
    local pid
    pid=$(cat "$DIR/run/$1.pid" 2>/dev/null) || return 1
    [[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == "$1"* ]]
}
idle() { [[ $(sinfo -h -n localhost -o %T 2>/dev/null) == idle* ]]; }
logs() {
    local log
    for log in "$DIR"/log/*.log; do
        [[ -f $log ]] && { say "--- last lines of $log:"; tail -n 15 "$log" >&2; }
    done
}

if alive munged && alive slurmctld && alive slurmd && idle; then
    say "already running (state in $DIR)"
else
    # a half-started cluster of an earlier call: stop what is left, start clean
    bash "$(dirname "${BASH_SOURCE[0]}")/stop.sh" "$DIR" 2>/dev/null || true
    rm -rf "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run"
    mkdir -p "$DIR"/{munge,state,spool,log,run}
    chmod 0755 "$DIR"
    chmod 0700 "$DIR/munge"

    # 2. the munge key and slurm.conf
    if [[ ! -s $DIR/munge/munge.key ]]; then
        say "generating a munge key: $DIR/munge/munge.key"
        mungekey --create --keyfile="$DIR/munge/munge.key"
    fi
    node=$(slurmd -C | head -1 | sed -e 's/^NodeName=[^ ]* //')   # CPUs=.. Boards=.. ... RealMemory=..
    [[ $node == CPUs=* ]] || die "cannot read this machine's CPUs and memory from 'slurmd -C': $node"
    say "writing $SLURM_CONF: node localhost, $node"
    cat >"$SLURM_CONF" <<EOF
# One-host test cluster written by tests/slurm/start.sh: do not edit, it is rewritten.
ClusterName=harness-test
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# no cgroups (containers rarely allow them): processes tracked by parent pid, no binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
# time between SIGTERM and SIGKILL when a job is cancelled or runs out of time (the default)
KillWait=30
# seconds a finished job's record is kept (default 300): under 5, \`sbatch --wait\` asks for the
# job's state every 2 s; with the default it waits 2, 8, then 32 s at a time (a job done after
# 62 s was seen done after 74)
MinJobAge=4
NodeName=localhost NodeAddr=127.0.0.1 $node State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    printf 'export SLURM_CONF=%q\n' "$SLURM_CONF" >"$DIR/env"

    # 3. the daemons (each forks into the background and writes its pid file)
    say "starting munged, slurmctld and slurmd (logs in $DIR/log)"
    munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
        --log-file="$DIR/log/munged.log" --pid-file="$DIR/run/munged.pid" \
        --seed-file="$DIR/munge/munged.seed" || { logs; die "munged did not start"; }
    slurmctld -f "$SLURM_CONF" || { logs; die "slurmctld did not start"; }
    slurmd -f "$SLURM_CONF" || { logs; die "slurmd did not start"; }

    deadline=$((SECONDS + 60))
    until idle; do
        if ((SECONDS > deadline)); then
            say "the node is not idle after 60 s: sinfo says '$(sinfo -h -n localhost -o '%T %E' 2>&1)'"
            logs
            die "SLURM did not come up (state in $DIR; tests/slurm/stop.sh $DIR stops what runs)"
        fi
        sleep 1
    done
    say "up: $(sinfo -h -o '%P %D %T %c CPUs %m MB' | head -1)"
fi

lines=$(timeout 60 srun -N1 -n2 hostname 2>&1) || { say "$lines"; logs; die "srun -N1 -n2 hostname failed"; }
[[ $(wc -l <<<"$lines") == 2 ]] || { logs; die "srun -N1 -n2 hostname printed: $lines"; }
say "srun -N1 -n2 hostname: $(tr '\n' ' ' <<<"$lines")(two tasks)"
say "use it with: export SLURM_CONF=$SLURM_CONF"
