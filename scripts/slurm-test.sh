#!/usr/bin/env bash
# The README's Slurm recipe under a real Slurm (22.05, Debian 12) on this one
# machine, with lavapipe and the CPU producer:
#   1. a 4-task array (scripts/slurm/dump.sbatch, --verify --validate) into
#      one folder: the union of the tasks' files is byte-equal to one
#      unsharded run's folder;
#   2. preemption: a longer 4-task array; one task is sent SIGTERM the way
#      Slurm preempts (scancel --signal=TERM --full: it must exit 143), one
#      is killed outright (SIGKILL); the first is requeued (scontrol
#      requeue), the second resubmitted, and both resume: the folder ends
#      byte-equal to one run's, and their logs say what was kept;
#   3. the final check as a dependent job (check-dump, exit 0).
# Installs slurmctld, slurmd, slurm-client and munge if missing (prints
# "slurm-test: skipped: <reason>" and exits 0 only where they cannot be
# installed), writes its own slurm.conf in a temporary folder, starts munged,
# slurmctld and slurmd, and stops each by its pid file on exit.
#   VKCUDA_BIN  the binary   default target/release/vkcuda
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
BIN=$(realpath "${VKCUDA_BIN:-target/release/vkcuda}")
started=$(date +%s)
say() { echo "slurm-test: $*"; }
fail() { say "FAILED: $*"; exit 1; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null ||
    ! command -v munged >/dev/null; then
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        slurmctld slurmd slurm-client munge >/tmp/vkcuda-slurm-apt.log 2>&1; then
        say "skipped: slurmctld slurmd slurm-client munge cannot be installed ($(tail -n1 /tmp/vkcuda-slurm-apt.log))"
        exit 0
    fi
fi

work=$(mktemp -d /tmp/vkcuda-slurm.XXXXXX)
chmod 755 "$work"
stop() {
    # Jobs first (a test that failed half-way may leave tasks running), then the daemons.
    scancel --full --signal=KILL --user=root >/dev/null 2>&1
    for _ in $(seq 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
    for d in slurmd slurmctld; do
        [ -s "$work/$d.pid" ] && kill "$(cat "$work/$d.pid")" 2>/dev/null
    done
    [ -s "${munge_pid:-}" ] && kill "$(cat "$munge_pid")" 2>/dev/null
    sleep 0.5
    rm -rf "$work"
}
trap stop EXIT

# munge: the key the package made, a socket folder, the daemon as its user.
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || { mungekey -c -f >/dev/null 2>&1 || fail "no munge key"; }
chown munge:munge /etc/munge/munge.key
munge_pid=/run/munge/vkcuda-munged.pid
runuser -u munge -- munged --pid-file="$munge_pid" --socket=/run/munge/munge.socket.2 ||
    fail "munged did not start"

node=$(slurmd -C | head -n1 | sed 's/^NodeName=[^ ]*/NodeName=localhost/')
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<CONF
ClusterName=vkcuda
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
MpiDefault=none
KillWait=30
$node
PartitionName=main Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
mkdir -p "$work/state" "$work/spool"
slurmctld -i || fail "slurmctld did not start: $(tail -n3 "$work/slurmctld.log" 2>/dev/null)"
slurmd -N localhost || fail "slurmd did not start: $(tail -n3 "$work/slurmd.log" 2>/dev/null)"
for _ in $(seq 100); do
    [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && break
    sleep 0.2
done
[ "$(sinfo -h -o %T 2>/dev/null)" = idle ] || fail "the node did not come up: $(sinfo 2>&1 | tail -n1)"
say "Slurm $(sinfo --version | cut -d' ' -f2) up in $(($(date +%s) - started)) s: $(sinfo -h -o '%P %D %T %C')"

# Waits (bounded) until job $1's tasks have all left the queue.
wait_gone() {
    for _ in $(seq 600); do
        [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
        sleep 0.2
    done
    fail "job $1 still queued after 120 s: $(squeue -j "$1")"
}
# The state and exit code of each task of job $1, from slurmctld (no accounting here).
task_lines() { scontrol show job "$1" 2>/dev/null | grep -oE '(ArrayTaskId|JobState|ExitCode)=[^ ]+' | paste -d' ' - - - ; }
# One unsharded run of $1 frames with options $2 into $3.
single() { "$BIN" --headless --frames "$1" $2 --out "$3" >"$3.log" 2>&1 || fail "the single run: $(tail -n3 "$3.log")"; }
# Whether folders $1 and $2 hold the same files, byte for byte.
same() { diff -r "$1" "$2" >/dev/null; }
submit() { sbatch --parsable --chdir="$work" --output="$work/%A_%a.out" "$@" scripts/slurm/dump.sbatch; }

# 1. The recipe: 4 tasks, one folder, byte-equal to one run.
opts="--producer cpu --size 61x33 --verify --validate"
single 40 "$opts" "$work/single"
t0=$(date +%s.%N)
job=$(submit --array=0-3 --export=ALL,FRAMES=40,SHARDS=4,OUT=$work/array,VKCUDA=$BIN,VKCUDA_ARGS="$opts") ||
    fail "sbatch refused the array"
wait_gone "$job"
took=$(echo "$(date +%s.%N) - $t0" | bc)
bad=$(task_lines "$job" | grep -v 'JobState=COMPLETED ExitCode=0:0')
[ -z "$bad" ] || fail "array $job: $bad"
for a in 0 1 2 3; do
    grep -q '0 mismatches' "$work/${job}_$a.out" && grep -q 'validation: 0 errors, 0 warnings' "$work/${job}_$a.out" ||
        fail "task $a: $(tail -n4 "$work/${job}_$a.out")"
done
same "$work/single" "$work/array" || fail "the array's folder differs from the single run's"
say "array $job: 4 tasks COMPLETED in ${took%???????} s, $(ls "$work/array" | wc -l) files, byte-equal to the single run's 40 (verified, 0 validation messages)"

# 2. Preemption: SIGTERM to one running task (exit 143), SIGKILL to another's process.
opts="--producer cpu --size 160x90 --scene julia --cost 4000 --verify --validate"
single 400 "$opts" "$work/single2"
env="ALL,FRAMES=400,SHARDS=4,OUT=$work/farm,VKCUDA=$BIN,VKCUDA_ARGS=$opts"
job=$(submit --array=0-3 --requeue --export="$env") || fail "sbatch refused the array"
# A running task other than $1 whose shard has 10 to 60 of its 100 frames in the folder (Slurm
# starts array tasks in no set order, two at a time here): mid-run, whichever it is.
running_task() {
    for _ in $(seq 1200); do
        for t in $(squeue -h -j "$job" -t R -o %K 2>/dev/null); do
            [ "$t" = "$1" ] && continue
            n=$(ls "$work/farm" 2>/dev/null | awk -F'[_.]' -v a=$((t * 100)) \
                '/^frame_[0-9]+\.png$/ { f = $2 + 0; if (f >= a && f < a + 100) c++ } END { print c + 0 }')
            [ "$n" -ge 10 ] && [ "$n" -le 60 ] && { echo "$t"; return 0; }
        done
        sleep 0.05
    done
    return 1
}
termed=$(running_task none) || fail "no task of $job was caught mid-run: $(squeue)"
# Its exit status is not the test: scancel may retry and then report the task gone, since the
# task ends at once; the task's state and exit code below say what happened.
scancel --full --signal=TERM "${job}_$termed" 2>/dev/null
# Slurm cancels with SIGTERM first (then SIGKILL after KillWait): a node lost or an
# out-of-memory kill is SIGKILL alone, sent here to the task's process itself.
killed=$(running_task "$termed") || fail "no second task of $job was caught mid-run: $(squeue)"
pkill -KILL -f -- "--shard $killed/4 " ||
    fail "no process of task $killed to kill: $(squeue; pgrep -af vkcuda; tail -n3 "$work/${job}_$killed.out")"
wait_gone "$job"
lines=$(task_lines "$job")
echo "$lines" | grep -q "ArrayTaskId=$termed JobState=FAILED ExitCode=143:0" ||
    fail "task $termed did not exit 143 on SIGTERM: $lines $(tail -n3 "$work/${job}_$termed.out")"
echo "$lines" | grep -q "ArrayTaskId=$killed JobState=FAILED ExitCode=0:9" ||
    fail "task $killed was not killed by SIGKILL: $lines"
kept=$(ls "$work/farm" | grep -c '^frame_')
leftovers=$(ls -A "$work/farm" | grep -c '\.tmp$')
say "array $job: task $termed SIGTERM → exit 143 ($(grep -o 'stopped after [0-9]* frames' "$work/${job}_$termed.out")), task $killed SIGKILL; $kept of 400 frames there, $leftovers temporary files"
# The first requeued (the job asked for --requeue), the second resubmitted: both resume.
scontrol requeue "${job}_$termed" || fail "scontrol requeue ${job}_$termed"
# A requeued job waits about two minutes before it may start again (BeginTime): start it now.
scontrol update JobId="${job}_$termed" StartTime=now || fail "scontrol update ${job}_$termed StartTime=now"
again=$(submit --array="$killed" --export="$env") || fail "sbatch refused the resubmission"
wait_gone "$job"
wait_gone "$again"
for t in "$job $termed" "$again $killed"; do
    set -- $t
    task_lines "$1" | grep -q "ArrayTaskId=$2 JobState=COMPLETED ExitCode=0:0" ||
        fail "task $2 again ($1): $(task_lines "$1")"
    log="$work/${1}_$2.out"
    grep -q 'validation: 0 errors, 0 warnings' "$log" && grep -q ' 0 mismatches' "$log" || fail "resumed task $2: $(tail -n4 "$log")"
    removed=$(grep -o 'removed [0-9]* temporary files' "$log")
    say "task $2 $([ "$1" = "$job" ] && echo requeued || echo resubmitted): $(grep -o 'resumed: .*' "$log")${removed:+, $removed}"
done
same "$work/single2" "$work/farm" || fail "the resumed folder differs from the single run's"
say "after resuming: $(ls "$work/farm" | wc -l) files, byte-equal to the single run's 400"

# 3. The farm job's last step: check-dump as a job that depends on the tasks.
check=$(sbatch --parsable --chdir="$work" --output="$work/check.out" --dependency=afterany:"$job":"$again" \
    --wrap "$BIN check-dump $work/farm --frames 400") || fail "sbatch refused the check"
wait_gone "$check"
task_lines "$check" | grep -q 'JobState=COMPLETED ExitCode=0:0' || fail "check-dump: $(cat "$work/check.out")"
say "check job $check: $(cat "$work/check.out")"
say "passed in $(($(date +%s) - started)) s"
