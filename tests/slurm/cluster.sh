#!/usr/bin/env bash
# slurm_up.sh - stand up (or tear down) a one-node Slurm cluster on localhost
# without systemd and without cgroups. Debian 12 (slurm-wlm 22.05.x, munge 0.5.15),
# run as root.
#
# Usage:
#   slurm_up.sh [up]        install if missing, configure, start munged/slurmctld/slurmd (idempotent)
#   slurm_up.sh down        cancel jobs, stop slurmd, slurmctld, munged (only the ones we started)
#   slurm_up.sh down --purge   same, and delete $SLURM_BASE (state, spool, logs)
#   slurm_up.sh status      show daemon PIDs + sinfo
#   slurm_up.sh test        submit a 3-task job array (%2 throttle) with sbatch --wait and check the output
#
# Tunables (environment):
#   SLURM_BASE=/tmp/slurm        state/spool/log/pid directory
#   SLURM_CLUSTER=localcluster   ClusterName
#   SLURM_PARTITION=debug        partition name
#   SLURM_CONF=/etc/slurm/slurm.conf
set -euo pipefail

SLURM_BASE=${SLURM_BASE:-/tmp/slurm}
SLURM_CLUSTER=${SLURM_CLUSTER:-localcluster}
SLURM_PARTITION=${SLURM_PARTITION:-debug}
SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
export SLURM_CONF

STATE=$SLURM_BASE/state
SPOOL=$SLURM_BASE/spool
LOGD=$SLURM_BASE/log
CTLD_PID=$SLURM_BASE/slurmctld.pid
SLURMD_PID=$SLURM_BASE/slurmd.pid
MUNGE_PID=/run/munge/munged.pid
MUNGE_MARK=$SLURM_BASE/.munged_started_by_us

log()  { printf '[slurm_up] %s\n' "$*" >&2; }
die()  { printf '[slurm_up] ERROR: %s\n' "$*" >&2; exit 1; }
tail_log() { [ -f "$1" ] && { echo "----- last lines of $1 -----" >&2; tail -n "${2:-20}" "$1" >&2; echo "-----" >&2; } || true; }

proc_alive() {  # proc_alive PID EXPECTED_COMM
  local p=$1 comm=$2
  [ -n "$p" ] && [ -r "/proc/$p/comm" ] || return 1
  [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$comm" ] || return 1
  # a kill -9'd daemon can linger as a zombie (PID 1 here is not a reaping init) -> treat as dead
  [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] || return 1
}
pid_alive() {   # pid_alive PIDFILE EXPECTED_COMM -> echoes pid if alive and comm matches
  local f=$1 comm=$2 p
  [ -s "$f" ] || return 1
  p=$(tr -dc '0-9' <"$f")
  proc_alive "$p" "$comm" || return 1
  echo "$p"
}

wait_for() {    # wait_for SECONDS DESCRIPTION CMD...
  local t=$1 what=$2; shift 2
  local i
  for ((i = 0; i < t * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  log "timed out after ${t}s waiting for: $what"
  return 1
}

# ------------------------------------------------------------------ install
install_pkgs() {
  local missing=0 b
  for b in munged munge unmunge slurmctld slurmd sbatch sinfo scontrol; do
    command -v "$b" >/dev/null 2>&1 || missing=1
  done
  [ $missing -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "must run as root to install packages"
  command -v apt-get >/dev/null || die "apt-get not found; install slurm-wlm and munge manually"
  log "installing slurm-wlm + munge via apt-get (takes ~10-20s)..."
  local t0=$SECONDS
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >"/tmp/slurm_up.apt.log" 2>&1 || { tail_log /tmp/slurm_up.apt.log; die "apt-get update failed"; }
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >>"/tmp/slurm_up.apt.log" 2>&1 \
    || { tail_log /tmp/slurm_up.apt.log; die "apt-get install slurm-wlm munge failed"; }
  log "installed in $((SECONDS - t0))s: $(slurmctld -V)"
}

# ------------------------------------------------------------------ munge
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  if munge_ok; then log "munged already running"; return 0; fi
  getent passwd munge >/dev/null || die "user 'munge' missing (munge package not installed correctly?)"
  install -d -o munge -g munge -m 0700 /etc/munge /var/log/munge
  install -d -o munge -g munge -m 0711 /var/lib/munge
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    if command -v mungekey >/dev/null; then
      mungekey --create --keyfile=/etc/munge/munge.key --force
    else
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
  fi
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  # stale socket/pid from an earlier crash would make munged refuse to start
  if ! pid_alive "$MUNGE_PID" munged >/dev/null; then
    rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock "$MUNGE_PID"
  fi
  log "starting munged"
  runuser -u munge -- /usr/sbin/munged </dev/null >/dev/null 2>&1 \
    || { tail_log /var/log/munge/munged.log; die "munged failed to start"; }
  mkdir -p "$SLURM_BASE"; touch "$MUNGE_MARK"
  wait_for 10 "munge credential round trip" munge_ok \
    || { tail_log /var/log/munge/munged.log; die "munged started but 'munge -n | unmunge' fails"; }
}

# ------------------------------------------------------------------ config
gen_conf() {
  local host node_line
  host=$(hostname -s)
  # e.g. "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105"
  node_line=$(slurmd -C 2>/dev/null | head -n1)
  [[ $node_line == NodeName=* ]] || die "'slurmd -C' did not return a NodeName line: $node_line"
  cat <<EOF
# generated by slurm_up.sh - one-node localhost cluster, no systemd, no cgroups
ClusterName=$SLURM_CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOGD/slurmctld.log
SlurmdLogFile=$LOGD/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=60
KillWait=5
MinJobAge=300
$node_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$SLURM_PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

write_conf() {   # returns 0 if config changed
  mkdir -p "$(dirname "$SLURM_CONF")" "$STATE" "$SPOOL" "$LOGD"
  local new; new=$(mktemp)
  gen_conf >"$new"
  if [ -f "$SLURM_CONF" ] && cmp -s "$new" "$SLURM_CONF"; then rm -f "$new"; return 1; fi
  [ -f "$SLURM_CONF" ] && cp -f "$SLURM_CONF" "$SLURM_CONF.bak"
  mv -f "$new" "$SLURM_CONF"; chmod 0644 "$SLURM_CONF"
  log "wrote $SLURM_CONF"
  return 0
}

# ------------------------------------------------------------------ slurm daemons
ctld_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }
node_state() { sinfo -h -N -n "$(hostname -s)" -o '%T' 2>/dev/null | head -n1; }
node_ready() { case "$(node_state)" in idle|mixed|allocated|completing) return 0;; *) return 1;; esac; }

start_slurmctld() {
  if pid_alive "$CTLD_PID" slurmctld >/dev/null && ctld_up; then log "slurmctld already running"; return 0; fi
  log "starting slurmctld"
  # -i: ignore errors reading state files (first start / after crash). Daemonizes itself.
  setsid slurmctld -i </dev/null >>"$LOGD/slurmctld.stdout" 2>&1 \
    || { tail_log "$LOGD/slurmctld.stdout"; tail_log "$LOGD/slurmctld.log"; die "slurmctld failed to start"; }
  wait_for 20 "slurmctld to answer 'scontrol ping'" ctld_up \
    || { tail_log "$LOGD/slurmctld.log"; die "slurmctld not responding"; }
}

start_slurmd() {
  if pid_alive "$SLURMD_PID" slurmd >/dev/null; then
    log "slurmd already running"
  else
    log "starting slurmd"
    setsid slurmd </dev/null >>"$LOGD/slurmd.stdout" 2>&1 \
      || { tail_log "$LOGD/slurmd.stdout"; tail_log "$LOGD/slurmd.log"; die "slurmd failed to start"; }
  fi
  if ! wait_for 20 "node $(hostname -s) to become idle" node_ready; then
    local st; st=$(node_state)
    case "$st" in
      down*|drain*|fail*)
        log "node state is '$st'; trying 'scontrol update state=resume'"
        scontrol update nodename="$(hostname -s)" state=resume 2>&1 | sed 's/^/[slurm_up]   /' >&2 || true ;;
      *) log "node state is '$st' (slurmd not registered?)" ;;
    esac
    wait_for 10 "node to become idle after resume" node_ready || {
      scontrol show node "$(hostname -s)" | grep -E 'State=|Reason=' >&2 || true
      tail_log "$LOGD/slurmd.log"; tail_log "$LOGD/slurmctld.log"
      die "node did not become usable"; }
  fi
}

stop_pidfile() {  # stop_pidfile PIDFILE COMM
  local p i
  p=$(pid_alive "$1" "$2") || { rm -f "$1"; return 0; }
  log "stopping $2 (pid $p)"
  kill -TERM "$p" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do proc_alive "$p" "$2" || break; sleep 0.2; done
  if proc_alive "$p" "$2"; then
    log "$2 (pid $p) did not exit, sending KILL"; kill -KILL "$p" 2>/dev/null || true
  fi
  rm -f "$1"
}

# ------------------------------------------------------------------ commands
cmd_up() {
  [ "$(id -u)" -eq 0 ] || die "run as root"
  local t0=$SECONDS changed=0
  install_pkgs
  start_munge
  # ClusterName is pinned in the state dir; a mismatch makes slurmctld exit ("ClusterName ... not match")
  if [ -f "$STATE/clustername" ] && [ "$(cat "$STATE/clustername")" != "$SLURM_CLUSTER" ]; then
    die "$STATE/clustername is '$(cat "$STATE/clustername")' but ClusterName=$SLURM_CLUSTER; run '$0 down --purge' first"
  fi
  write_conf && changed=1 || true
  if [ $changed -eq 1 ] && { pid_alive "$CTLD_PID" slurmctld >/dev/null || pid_alive "$SLURMD_PID" slurmd >/dev/null; }; then
    log "config changed - restarting slurm daemons"
    stop_pidfile "$SLURMD_PID" slurmd
    stop_pidfile "$CTLD_PID" slurmctld
  fi
  start_slurmctld
  start_slurmd
  log "cluster up in $((SECONDS - t0))s"
  sinfo
}

cmd_down() {
  local purge=${1:-}
  if ctld_up; then
    scancel --full --quiet --user=root 2>/dev/null || true
    scancel --full --quiet 2>/dev/null || true
    sleep 1
  fi
  stop_pidfile "$SLURMD_PID" slurmd
  stop_pidfile "$CTLD_PID" slurmctld
  # leftover job step daemons (only ours: slurmstepd exists only for this cluster)
  local p
  for p in $(pgrep -x slurmstepd 2>/dev/null || true); do log "killing leftover slurmstepd $p"; kill -KILL "$p" 2>/dev/null || true; done
  if [ -f "$MUNGE_MARK" ]; then
    munged --stop >/dev/null 2>&1 || stop_pidfile "$MUNGE_PID" munged
    log "stopped munged"
    rm -f "$MUNGE_MARK"
  else
    log "munged was not started by this script - leaving it running"
  fi
  if [ "$purge" = "--purge" ]; then
    log "removing $SLURM_BASE"; rm -rf "$SLURM_BASE"
  fi
  log "cluster down"
}

cmd_status() {
  echo "munged:    $(pid_alive "$MUNGE_PID" munged || echo 'not running')"
  echo "slurmctld: $(pid_alive "$CTLD_PID" slurmctld || echo 'not running')"
  echo "slurmd:    $(pid_alive "$SLURMD_PID" slurmd || echo 'not running')"
  ctld_up && { sinfo; squeue; } || echo "controller not reachable"
}

cmd_test() {
  local d; d=$(mktemp -d /tmp/slurmtest.XXXXXX)
  local t0=$SECONDS
  local rc=0
  timeout "${SLURM_TEST_TIMEOUT:-120}" sbatch --wait --array=0-2%2 -o "$d/slurm-%A_%a.log" \
    --wrap "echo \$SLURM_ARRAY_TASK_ID \$SLURM_ARRAY_TASK_COUNT > $d/out.\$SLURM_ARRAY_TASK_ID" || rc=$?
  if [ $rc -ne 0 ]; then
    squeue >&2 || true
    [ $rc -eq 124 ] && die "sbatch --wait timed out after ${SLURM_TEST_TIMEOUT:-120}s (job left queued; see squeue)"
    die "sbatch --wait returned $rc"
  fi
  local i ok=1
  for i in 0 1 2; do
    if [ "$(cat "$d/out.$i" 2>/dev/null)" = "$i 3" ]; then echo "out.$i: $(cat "$d/out.$i")"; else ok=0; echo "out.$i: MISSING/WRONG"; fi
  done
  [ $ok -eq 1 ] || die "job array test failed (see $d)"
  log "job array test OK in $((SECONDS - t0))s ($d)"
}

case "${1:-up}" in
  up)     cmd_up ;;
  down)   cmd_down "${2:-}" ;;
  status) cmd_status ;;
  test)   cmd_test ;;
  *)      die "usage: $0 [up|down [--purge]|status|test]" ;;
esac
