#!/usr/bin/env bash
# A one-node Slurm on this machine, for the tests marked `slurm` (tests/cluster/) and docs/cluster.md's example.
#
#   .ci/slurm.sh install   apt-get Debian's slurm-wlm and munge (root; quiet; bounded time)
#   .ci/slurm.sh start     munged, slurmctld and slurmd on localhost; prints SLURM_CONF=<file> on its last line
#   .ci/slurm.sh stop      stops the daemons this script started (by their pid files)
#   .ci/slurm.sh status    exit code 0 when the controller answers
#
# Two partitions over the one node, `ma` and `mb`, with the node's features `ma,mb`, stand for two machine
# types. Its state (configuration, spools, logs, pid files) stays under $SBPROF_SLURM_STATE (default
# /tmp/sbprof-slurm); /etc/slurm is not touched: clients find the cluster through SLURM_CONF.
# Used by .ci/run and by the pytest fixture of tests/cluster/ (which skips with the reason when this fails).
set -euo pipefail
STATE=${SBPROF_SLURM_STATE:-/tmp/sbprof-slurm}
CONF=$STATE/slurm.conf
export SLURM_CONF=$CONF

die() { echo "slurm.sh: $*" >&2; exit 1; }

install() {
    [ "$(id -u)" = 0 ] || die "installing Slurm needs root"
    command -v apt-get >/dev/null || die "no apt-get on this machine"
    export DEBIAN_FRONTEND=noninteractive
    timeout 300 apt-get update -qq >/dev/null || die "apt-get update failed"
    timeout 600 apt-get install -y -qq slurm-wlm munge >/dev/null || die "apt-get install slurm-wlm munge failed"
}

answers() { timeout 10 scontrol ping 2>/dev/null | grep -q "UP"; }

write_conf() {
    local node cpus mem
    node=$(hostname -s)
    cpus=$(nproc)
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
    mkdir -p "$STATE/ctld" "$STATE/slurmd" "$STATE/log"
    cat > "$CONF" <<EOF
ClusterName=sbproftest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
# Finished jobs stay visible to scontrol for 10 minutes (their state and reason), and a cancel is quick.
MinJobAge=600
KillWait=5
InactiveLimit=0
SchedulerTimeSlice=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Features=ma,mb State=UNKNOWN
PartitionName=ma Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=mb Nodes=$node MaxTime=INFINITE State=UP
EOF
}

start() {
    command -v slurmctld >/dev/null || die "Slurm is not installed (run: .ci/slurm.sh install, as root)"
    [ "$(id -u)" = 0 ] || die "starting slurmctld and slurmd needs root"
    if [ -f "$CONF" ] && answers; then
        echo "SLURM_CONF=$CONF"
        return
    fi
    write_conf
    if ! pgrep -x munged >/dev/null; then
        mkdir -p /run/munge && chown munge:munge /run/munge
        runuser -u munge -- /usr/sbin/munged || die "munged did not start"
    fi
    slurmctld -f "$CONF" || die "slurmctld did not start (see $STATE/log/slurmctld.log)"
    slurmd -f "$CONF" || die "slurmd did not start (see $STATE/log/slurmd.log)"
    for _ in $(seq 60); do
        if answers && sinfo -h -o "%t" 2>/dev/null | grep -q -E "^idle|^mix|^alloc"; then
            echo "SLURM_CONF=$CONF"
            return
        fi
        sleep 0.5
    done
    die "the one-node Slurm did not come up within 30 s (see $STATE/log/)"
}

stop() {
    local f
    for f in "$STATE/slurmd.pid" "$STATE/slurmctld.pid"; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    sleep 1
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    stop) stop ;;
    status) answers ;;
    *) die "usage: $0 install|start|stop|status" ;;
esac
