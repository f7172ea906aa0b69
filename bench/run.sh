#!/usr/bin/env bash
# Benchmarks leasewrap against flock and etcdctl lock on this machine, in one
# run, and writes the results to BENCHMARKS.md. Usage:
#
#   bench/run.sh            # full run, about 45 minutes
#   QUICK=1 bench/run.sh    # fewer trials and smaller fleets, about 15 minutes
#   SIM_DIRECT_JOBS=100 bench/run.sh   # a smaller simulated fleet directly
#   OUT=/tmp/b.md bench/run.sh         # write the results elsewhere
#
# It installs its Debian packages if missing (etcd-server, etcd-client,
# hyperfine, pgbouncer, postgresql), and starts its own PostgreSQL cluster
# (with pg_stat_statements), etcd and PgBouncer on free loopback ports, all
# removed at the end. The shared PostgreSQL is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUICK=${QUICK:-}
TRIALS=${TRIALS:-$([ -n "$QUICK" ] && echo 10 || echo 50)}
FAILOVER_TRIALS=${FAILOVER_TRIALS:-$([ -n "$QUICK" ] && echo 2 || echo 5)}
FLEET=${FLEET:-$([ -n "$QUICK" ] && echo 100 || echo 1000)}
JOBS=${JOBS:-$((FLEET / 10))}
FLEET_SECONDS=${FLEET_SECONDS:-$([ -n "$QUICK" ] && echo 20 || echo 60)}
# The simulated fleet (bench/fleet), measured for SIM_SECONDS: SIM_JOBS
# jobs of 10 participants through PgBouncer, and SIM_DIRECT_JOBS directly.
SIM_JOBS=${SIM_JOBS:-$([ -n "$QUICK" ] && echo 100 || echo 1000)}
SIM_SECONDS=${SIM_SECONDS:-$([ -n "$QUICK" ] && echo 45 || echo 300)}
# Participants started per second: each direct one is a backend the
# postmaster forks, and on a slow machine 250 a second saturated 2 cores
# until connects timed out.
SIM_START_RATE=${SIM_START_RATE:-100}
# Directly, each start is a backend the postmaster forks and sets up,
# which slows as the backends grow to thousands on 2 cores: at 100 a
# second the connects of 3,000 participants queued past their 10 s
# timeout and were retried in a storm. 25 a second lets each connect.
SIM_DIRECT_START_RATE=${SIM_DIRECT_START_RATE:-25}
COST_SECONDS=$([ -n "$QUICK" ] && echo 20 || echo 60)
CENSUS_SECONDS=$([ -n "$QUICK" ] && echo 15 || echo 50)
SWITCH_TRIALS=${SWITCH_TRIALS:-$([ -n "$QUICK" ] && echo 3 || echo 10)}
# Connected directly, each participant holds a backend of its own (2.4 MiB
# of PSS each, measured; 3 are counted for margin): the direct run has 300
# jobs (3,000 wrappers, the size its goals are set for; the quick mode's
# SIM_JOBS), or as many as fit in half of the memory available now.
SIM_FIT=$(awk '/^MemAvailable:/ { printf "%d", $2 * 0.5 / 1024 / 3 / 10 }' /proc/meminfo)
if [ -n "$QUICK" ]; then
  SIM_DIRECT_WANT=$SIM_JOBS SIM_DIRECT_WHY="the quick mode's size (the goals are set for 300)"
else
  SIM_DIRECT_WANT=300 SIM_DIRECT_WHY="the size the direct goals are set for"
fi
if [ -n "${SIM_DIRECT_JOBS:-}" ]; then
  SIM_DIRECT_WHY="as set by SIM_DIRECT_JOBS for this run (the goals are set for 300)"
elif [ "$SIM_FIT" -lt "$SIM_DIRECT_WANT" ]; then
  SIM_DIRECT_JOBS=$SIM_FIT
  SIM_DIRECT_WHY="as many as fit in half of the memory available ($SIM_DIRECT_WANT jobs would not)"
else
  SIM_DIRECT_JOBS=$SIM_DIRECT_WANT
fi
# A participant holds one connection, but one whose connect timed out
# leaves its backend behind for a while: a tenth more than the
# participants, and 200.
MOST=$(( FLEET > SIM_DIRECT_JOBS * 10 ? FLEET : SIM_DIRECT_JOBS * 10 ))
MAX_CONNECTIONS=$(( MOST + MOST / 10 + 200 ))
OUT=${OUT:-$ROOT/BENCHMARKS.md}

need=()
for pair in etcd:etcd-server etcdctl:etcd-client hyperfine:hyperfine pgbouncer:pgbouncer flock:util-linux; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
[ -x "$PGBIN/initdb" ] || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  echo "bench: installing ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)
fi

W=$(mktemp -d /tmp/leasewrap-bench.XXXXXX)
chmod 755 "$W"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  pkill -f "$W/" 2>/dev/null || true
  [ -d "$W/pg" ] && as_pg "$PGBIN/pg_ctl" -D "$W/pg" -m immediate stop >/dev/null 2>&1 || true
  [ -n "${KEEP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ns() { date +%s%N; }
log() { echo "bench: [${SECONDS}s] $*" >&2; }

# wait_file FILE PID: wait until FILE has content, as long as PID lives.
wait_file() {
  until [ -s "$1" ] || [ -e "$1" -a "${1##*/}" = leading ]; do
    kill -0 "$2" 2>/dev/null || { log "process $2 ended before writing $1"; exit 1; }
    sleep 0.005
  done
}

# stats FILE: median and p99 of the numbers in FILE (ns), printed in ms.
stats() {
  sort -n "$1" | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "n/a n/a"; exit }
    m = v[int((NR + 1) / 2)]; p = v[int(NR * 0.99 + 0.999)]; if (p == "") p = v[NR]
    printf "%.1f %.1f\n", m / 1e6, p / 1e6 }'
}

log "building leasewrap and the empty, prom, floor and fleet programs"
# empty-libs and floor-libs are empty and floor linking every library
# leasewrap links (bench/libs): the references its goals are set against.
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -trimpath -o "$W/leasewrap" .
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -trimpath -o "$W/empty" ./bench/empty
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -trimpath -o "$W/prom" ./bench/prom
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -trimpath -o "$W/floor" ./bench/floor
CGO_ENABLED=0 go build -tags urfave_cli_no_docs,samelibs -trimpath -o "$W/empty-libs" ./bench/empty
CGO_ENABLED=0 go build -tags urfave_cli_no_docs,samelibs -trimpath -o "$W/floor-libs" ./bench/floor
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -trimpath -o "$W/fleet" ./bench/fleet
LW=$W/leasewrap

log "starting PostgreSQL, etcd and PgBouncer on loopback"
PGPORT=$(free_port)
mkdir -p "$W/pg" "$W/sock" && chown postgres "$W/pg" "$W/sock" 2>/dev/null || true
as_pg "$PGBIN/initdb" -D "$W/pg" -A trust -U postgres --no-sync >/dev/null
as_pg "$PGBIN/pg_ctl" -D "$W/pg" -l "$W/pg/log" -w -o "-p $PGPORT -k $W/sock -c listen_addresses=127.0.0.1 \
  -c max_connections=$MAX_CONNECTIONS -c shared_preload_libraries=pg_stat_statements -c shared_buffers=256MB" start >/dev/null
PSQL=(psql -X -q -At -h 127.0.0.1 -p "$PGPORT" -U postgres postgres)
"${PSQL[@]}" -c "CREATE EXTENSION pg_stat_statements; CREATE ROLE bench_leader LOGIN; CREATE ROLE bench_standby LOGIN; CREATE ROLE bench_scheduler LOGIN;
  GRANT ALL ON SCHEMA public TO bench_leader, bench_standby, bench_scheduler;"
DB="postgres://postgres@127.0.0.1:$PGPORT/postgres?sslmode=disable"
"$LW" migrate --database-url "$DB" --log-level warn >/dev/null
"${PSQL[@]}" -c "GRANT ALL ON ALL TABLES IN SCHEMA public TO bench_leader, bench_standby, bench_scheduler"
# The database-cost run has a database of its own, so that its transaction
# counts hold nothing but the leader's and the standby's.
"${PSQL[@]}" -c "CREATE DATABASE cost"
"${PSQL[@]}" -d cost -c "GRANT ALL ON SCHEMA public TO bench_leader, bench_standby, bench_scheduler"
"$LW" migrate --database-url "postgres://postgres@127.0.0.1:$PGPORT/cost?sslmode=disable" --log-level warn >/dev/null
"${PSQL[@]}" -d cost -c "GRANT ALL ON ALL TABLES IN SCHEMA public TO bench_leader, bench_standby, bench_scheduler"

ETCD_PORT=$(free_port); ETCD_PEER=$(free_port)
etcd --data-dir "$W/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
  --initial-cluster "default=http://127.0.0.1:$ETCD_PEER" >"$W/etcd.log" 2>&1 &
PIDS+=($!)
export ETCDCTL_API=3 ETCDCTL_ENDPOINTS="127.0.0.1:$ETCD_PORT"
for _ in $(seq 100); do etcdctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done

BOUNCER_PORT=$(free_port)
# A few server connections per core: fewer backends, each kept busy, cost
# PostgreSQL less than many taking turns (docs/configuration.md).
BOUNCER_POOL=${BOUNCER_POOL:-6}
mkdir -p "$W/bouncer" && chown postgres "$W/bouncer" 2>/dev/null || true
cat >"$W/bouncer/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$PGPORT
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $W/bouncer/users.txt
pool_mode = transaction
max_client_conn = $(( (FLEET * 2 > SIM_JOBS * 15 ? FLEET * 2 : SIM_JOBS * 15) + 100 ))
default_pool_size = $BOUNCER_POOL
logfile = $W/bouncer/log
pidfile = $W/bouncer/pgbouncer.pid
INI
echo '"postgres" ""' >"$W/bouncer/users.txt"
# A client connection is a descriptor: the soft limit (often 1024) would
# refuse the simulated fleet's.
as_pg sh -c "ulimit -n \$(ulimit -Hn); exec pgbouncer $W/bouncer/pgbouncer.ini" >/dev/null 2>&1 &
PIDS+=($!)
BOUNCED="postgres://postgres@127.0.0.1:$BOUNCER_PORT/postgres?sslmode=disable"

CORES=$(nproc)
PGVERSION=$("${PSQL[@]}" -c "SHOW server_version")
ETCDVERSION=$(etcd --version | awk 'NR==1 {print $3}')

# ---------------------------------------------------------------- overhead
log "1/7 wrapper overhead (hyperfine)"
RUNS=$([ -n "$QUICK" ] && echo 30 || echo 200)
hyperfine -N --warmup 10 --runs "$RUNS" --export-json "$W/overhead.json" --style none \
  -n 'true' 'true' \
  -n 'flock -n FILE true' "flock -n $W/flock true" \
  -n 'empty Go program' "$W/empty" \
  -n 'Go program linking client_golang only' "$W/prom" \
  -n 'empty Go program linking the same libraries' "$W/empty-libs" \
  -n 'leasewrap version' "$LW version" \
  -n 'floor: pgx, one take, true, one release' "$W/floor $DB floor true" \
  -n 'floor linking the same libraries' "$W/floor-libs $DB floor true" \
  -n 'leasewrap --job x -- true' "$LW --database-url $DB --job overhead --log-level warn -- true" \
  -n 'leasewrap via PgBouncer' "$LW --database-url $BOUNCED --job overhead-bounced --log-level warn -- true" \
  -n 'etcdctl lock x true' "etcdctl lock overhead true" >/dev/null
overhead_table=$(python3 - "$W/overhead.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
flock = r["flock -n FILE true"]["mean"]
for name, x in r.items():
    print(f"| `{name}` | {x['mean']*1e3:.2f} | {x['stddev']*1e3:.2f} | {x['mean']/flock:.1f}× |")
PY
)
ratio() { python3 -c "import json, sys; r={x['command']:x for x in json.load(open('$W/overhead.json'))['results']}; print(round(r[sys.argv[1]]['mean']/r[sys.argv[2]]['mean'], 2))" "$1" "$2"; }
lw_ratio=$(ratio 'leasewrap --job x -- true' 'flock -n FILE true')
version_ratio=$(ratio 'leasewrap version' 'empty Go program')
prom_ratio=$(ratio 'Go program linking client_golang only' 'empty Go program')
floor_ratio=$(ratio 'leasewrap --job x -- true' 'floor: pgx, one take, true, one release')
libs_ratio=$(ratio 'empty Go program linking the same libraries' 'empty Go program')
version_libs_ratio=$(ratio 'leasewrap version' 'empty Go program linking the same libraries')
floor_libs_ratio=$(ratio 'leasewrap --job x -- true' 'floor linking the same libraries')
bounced_etcd_ratio=$(ratio 'leasewrap via PgBouncer' 'etcdctl lock x true')

log "    where the time goes (go test -bench)"
micro=$(cd "$ROOT" && LEASEWRAP_TEST_DATABASE_URL="$DB" go test -tags urfave_cli_no_docs -run '^$' -bench . -benchtime 200x -count 1 ./lease ./runner 2>&1 | grep -E '^Benchmark')
micro_ms() { awk -v b="$1" '$1 ~ "^"b"(-[0-9]+)?$" { printf "%.2f", $3 / 1e6 }' <<<"$micro"; }
cold_checked=$(micro_ms BenchmarkColdTakeChecked); cold_plain=$(micro_ms BenchmarkColdTakePlain)

# ---------------------------------------------------------------- handoff
# One trial: a leader runs a child that records when it ends; a standby,
# started once the leader runs, records when its child starts.
handoff_leasewrap() { # name extra-flags...
  local name=$1; shift
  : >"$W/handoff-$name"
  for i in $(seq "$TRIALS"); do
    local d=$W/h; rm -rf "$d"; mkdir -p "$d"
    "$LW" --database-url "$DB" --job "handoff-$name" --log-level warn "$@" -- \
      sh -c "touch $d/leading; sleep 0.4; date +%s%N >$d/end" &
    local leader=$!
    wait_file "$d/leading" "$leader"
    "$LW" --database-url "$DB" --job "handoff-$name" --wait --log-level warn "$@" -- sh -c "date +%s%N >$d/start" &
    local standby=$!
    wait "$leader" "$standby"
    echo $(( $(cat "$d/start") - $(cat "$d/end") )) >>"$W/handoff-$name"
  done
}
handoff_etcd() {
  : >"$W/handoff-etcd"
  for i in $(seq "$TRIALS"); do
    local d=$W/h; rm -rf "$d"; mkdir -p "$d"
    etcdctl lock handoff -- sh -c "touch $d/leading; sleep 0.4; date +%s%N >$d/end" >/dev/null &
    local leader=$!
    wait_file "$d/leading" "$leader"
    etcdctl lock handoff -- sh -c "date +%s%N >$d/start" >/dev/null &
    local standby=$!
    wait "$leader" "$standby"
    echo $(( $(cat "$d/start") - $(cat "$d/end") )) >>"$W/handoff-etcd"
  done
}
log "2/7 graceful handoff, $TRIALS trials each"
handoff_leasewrap notify
handoff_leasewrap poll --listen=false --retry-interval 500ms
handoff_etcd
read -r notify_med notify_p99 < <(stats "$W/handoff-notify")
read -r poll_med poll_p99 < <(stats "$W/handoff-poll")
read -r etcd_med etcd_p99 < <(stats "$W/handoff-etcd")

# ---------------------------------------------------------------- failover
# The leader's wrapper is SIGKILLed; when does the standby's child start,
# and does the dead leader's child still run then?
failover() { # name leader-cmd... (the child is appended by the caller)
  local name=$1
  : >"$W/failover-$name"; : >"$W/orphans-$name"; : >"$W/after-expiry-$name"
  for i in $(seq "$FAILOVER_TRIALS"); do
    local d=$W/f; rm -rf "$d"; mkdir -p "$d"
    local child="echo \$\$ >$d/leader-pid; while :; do sleep 0.02; done"
    if [ "$name" = etcd ]; then
      etcdctl lock --ttl 5 failover -- sh -c "$child" >/dev/null &
    else
      "$LW" --database-url "$DB" --job failover --ttl 5s --renew-interval 1s --grace 2s --retry-interval 200ms --log-level error -- sh -c "$child" &
    fi
    local leader=$!
    wait_file "$d/leader-pid" "$leader"
    if [ "$name" = etcd ]; then
      etcdctl lock --ttl 5 failover -- sh -c "date +%s%N >$d/start" >/dev/null &
    else
      "$LW" --database-url "$DB" --job failover --ttl 5s --renew-interval 1s --grace 2s --retry-interval 200ms --wait --log-level error -- sh -c "date +%s%N >$d/start" &
    fi
    local standby=$!
    sleep 0.5
    local killed; killed=$(now_ns); kill -9 "$leader"
    if [ "$name" != etcd ]; then
      # The dead leader renews no more: this is the expiry the standby waits for.
      "${PSQL[@]}" -c "SELECT (extract(epoch FROM expires_at) * 1e9)::bigint FROM leader_lease WHERE job_name = 'failover'" >"$d/expiry"
    fi
    wait "$standby" || true
    echo $(( $(cat "$d/start") - killed )) >>"$W/failover-$name"
    [ "$name" = etcd ] || echo $(( $(cat "$d/start") - $(cat "$d/expiry") )) >>"$W/after-expiry-$name"
    local old; old=$(cat "$d/leader-pid")
    if kill -0 "$old" 2>/dev/null; then echo 1 >>"$W/orphans-$name"; kill -9 "$old"; else echo 0 >>"$W/orphans-$name"; fi
    wait "$leader" 2>/dev/null || true
  done
}
log "3/7 crash failover, TTL 5s, $FAILOVER_TRIALS trials each"
failover leasewrap
failover etcd
read -r fo_lw_med fo_lw_p99 < <(stats "$W/failover-leasewrap")
read -r fo_etcd_med fo_etcd_p99 < <(stats "$W/failover-etcd")
read -r fo_late_med fo_late_p99 < <(stats "$W/after-expiry-leasewrap")
orphans_lw=$(paste -sd+ "$W/orphans-leasewrap" | bc)
orphans_etcd=$(paste -sd+ "$W/orphans-etcd" | bc)

# ---------------------------------------------------------------- switchover
# One trial: a holder and two standbys of a job of its own, at the default
# timings, directly; once both stand in the queue, `release --to` names
# the head of the queue ($1 = head: it listens) or the standby right
# behind it ($1 = behind: it polls); from just before the request to the
# chosen standby's command starting. The other standby must not start,
# and the holder's command must be gone when the chosen one's starts.
# The request comes at least 1.5 s into the holder's lease, as an
# operator's would: a holder listens for requests from its first second.
switchover() {
  local out=$W/switchover-$1 standbys="chosen other"
  [ "$1" = head ] || standbys="other chosen"
  : >"$out"; : >>"$W/switchover-wrong"
  local i
  for i in $(seq "$SWITCH_TRIALS"); do
    local d=$W/s job=switchover-$1-$i; rm -rf "$d"; mkdir -p "$d"
    "$LW" --database-url "$DB" --job "$job" --id holder --log-level error -- \
      sh -c "echo \$\$ >$d/holder-pid; exec sleep 100000" &
    local holder=$! held; held=$(now_ns)
    wait_file "$d/holder-pid" "$holder"
    local pids=() who queued_by=$((SECONDS + 60))
    for who in $standbys; do
      "$LW" --database-url "$DB" --job "$job" --id "$who" --wait --log-level error -- \
        sh -c "date +%s%N >$d/$who; exec sleep 100000" &
      pids+=($!)
      until "${PSQL[@]}" -c "SELECT 1 FROM leader_lease WHERE job_name = '$job'
        AND queue @> jsonb_build_array(jsonb_build_object('holder', '$who'))" | grep -q 1; do
        kill -0 "${pids[-1]}" || { log "standby $who ended before it was queued"; exit 1; }
        [ $SECONDS -lt "$queued_by" ] || { log "standby $who not in $job's queue (leader_lease.queue) after 60 s"; exit 1; }
        sleep 0.05
      done
    done
    while [ $(( $(now_ns) - held )) -lt 1500000000 ]; do sleep 0.05; done
    local asked; asked=$(now_ns)
    "$LW" release --database-url "$DB" --job "$job" --to chosen --log-level error >/dev/null
    # The holder hears the request at once; the chosen standby takes the
    # lease at once at the head, at its next look behind it.
    local deadline=$((SECONDS + 60))
    until [ -s "$d/chosen" ] || [ -s "$d/other" ] || [ $SECONDS -ge $deadline ]; do sleep 0.002; done
    if [ -s "$d/chosen" ]; then
      echo $(( $(cat "$d/chosen") - asked )) >>"$out"
      kill -0 "$(cat "$d/holder-pid")" 2>/dev/null && echo "$1 trial $i: the holder's command still ran" >>"$W/switchover-wrong"
    else
      echo "$1 trial $i: $([ -s "$d/other" ] && echo "the other standby started" || echo "nothing started within 60 s")" >>"$W/switchover-wrong"
    fi
    sleep 0.2
    [ -s "$d/other" ] && [ -s "$d/chosen" ] && echo "$1 trial $i: both standbys started" >>"$W/switchover-wrong"
    kill "$holder" "${pids[@]}" 2>/dev/null; wait "$holder" "${pids[@]}" 2>/dev/null || true
  done
}
log "4/7 switchover: release --to at the default timings, $SWITCH_TRIALS trials to the head of the queue and as many behind it"
: >"$W/switchover-wrong"
switchover head
switchover behind
# median and worst, in ms, of the trials in $1
switch_stats() { sort -n "$1" | awk '{ v[NR] = $1 } END {
  if (NR == 0) { print "n/a n/a"; exit } printf "%.1f %.1f\n", v[int((NR + 1) / 2)] / 1e6, v[NR] / 1e6 }'; }
read -r switch_med switch_worst < <(switch_stats "$W/switchover-head")
read -r switch_behind_med switch_behind_worst < <(switch_stats "$W/switchover-behind")
switch_n=$(wc -l <"$W/switchover-head")
switch_behind_n=$(wc -l <"$W/switchover-behind")
switch_wrong=$(wc -l <"$W/switchover-wrong")

# ---------------------------------------------------------------- db cost
log "5/7 database cost of one leader and one standby (defaults, ${COST_SECONDS}s)"
# as_role ROLE APP [DATABASE]: a URL that logs in as ROLE (its statements
# are told apart in pg_stat_statements) under application_name APP (its
# backends in pg_stat_activity).
as_role() { echo "postgres://$1@127.0.0.1:$PGPORT/${3:-cost}?sslmode=disable&application_name=$2"; }
# sample_backends FILE: every half second, each bench-* process's backends,
# appended to FILE as "application_name count" until killed.
sample_backends() {
  while :; do
    "${PSQL[@]}" -F ' ' -c "SELECT application_name, count(*) FROM pg_stat_activity
      WHERE application_name LIKE 'bench-%' GROUP BY 1" >>"$1" 2>/dev/null || true
    sleep 0.5
  done
}
# most_backends FILE APP: the most backends APP held in one sample.
most_backends() { awk -v a="$2" '$1 == a && $2 > n { n = $2 } END { print n + 0 }' "$1"; }
# Autovacuum would add transactions (and, analysing the tables of the runs
# before, transaction ids) of its own: off while this is measured, and a
# worker already at work in the database is waited for, before the counts
# below start to settle.
"${PSQL[@]}" -c "ALTER SYSTEM SET autovacuum = off" -c "SELECT pg_reload_conf()" >/dev/null
until [ "$("${PSQL[@]}" -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")" = 0 ]; do sleep 0.2; done
"$LW" --database-url "$(as_role bench_leader bench-leader)" --job cost --log-level warn -- sleep 100000 &
cost_leader=$!
until "${PSQL[@]}" -d cost -c "SELECT 1 FROM leader_lease WHERE job_name = 'cost' AND expires_at > now()" | grep -q 1; do sleep 0.05; done
"$LW" --database-url "$(as_role bench_standby bench-standby)" --job cost --wait --log-level warn -- true &
cost_standby=$!
# PostgreSQL 15 holds a backend's counts for up to 10 s after its last
# report: let the start-up statements (catalog check, look, LISTEN) be
# counted before the window opens.
sleep 11
"${PSQL[@]}" -c "SELECT pg_stat_statements_reset()" >/dev/null
# Transactions committed in the cost database (every statement is one, a
# pool's ping too), transaction ids (the next one to be assigned: reading
# it assigns none) and WAL position, before and after.
cost_sample() {
  "${PSQL[@]}" -F ' ' -c "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = 'cost'),
    txid_snapshot_xmax(txid_current_snapshot()), pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
}
sample_backends "$W/cost-backends" & sampler=$!
read -r commits0 xid0 wal0 < <(cost_sample)
sleep "$COST_SECONDS"
# And the window's own statements before it closes (up to 10 s late).
sleep 11
read -r commits1 xid1 wal1 < <(cost_sample)
kill "$sampler"; wait "$sampler" 2>/dev/null || true
"${PSQL[@]}" -c "ALTER SYSTEM RESET autovacuum" -c "SELECT pg_reload_conf()" >/dev/null
cost_rows=$("${PSQL[@]}" -F ' ' -c "SELECT r.rolname, sum(s.calls) FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
  WHERE r.rolname IN ('bench_leader','bench_standby') GROUP BY 1 ORDER BY 1")
kill "$cost_standby" "$cost_leader" 2>/dev/null; wait "$cost_standby" "$cost_leader" 2>/dev/null || true
per_min() { awk -v r="$1" -v s="$COST_SECONDS" '$1 == r { n = $2 } END { printf "%.0f", n * 60 / s }' <<<"$cost_rows"; }
leader_spm=$(per_min bench_leader); standby_spm=$(per_min bench_standby)
rate() { awk -v d="$1" -v s="$COST_SECONDS" 'BEGIN { printf "%.1f", d * 60 / (s + 11) }'; }
commits_pm=$(rate $((commits1 - commits0))); xids_pm=$(rate $((xid1 - xid0))); wal_pm=$(rate $((wal1 - wal0)))
leader_conns=$(most_backends "$W/cost-backends" bench-leader); standby_conns=$(most_backends "$W/cost-backends" bench-standby)

# Backends per process: a leader, the head of its queue and a standby
# behind it, and two idle schedulers of a job whose next time is a day
# away at most (none is caught up), each under an application_name of its
# own, counted every half second for CENSUS_SECONDS (more than a TTL, so
# that every renewal, look and keepalive of the default timings falls in
# it). In the postgres database, after the cost window: nothing of it
# counts there.
log "    backends per process: a leader, two standbys, two schedulers, ${CENSUS_SECONDS}s"
census_url() { as_role "$1" "$2" postgres; }
"$LW" --database-url "$(census_url bench_leader bench-census-leader)" --job census --log-level error -- sleep 100000 &
census_pids=($!)
until "${PSQL[@]}" -c "SELECT 1 FROM leader_lease WHERE job_name = 'census' AND expires_at > now()" | grep -q 1; do sleep 0.05; done
# queued ID: whether the holder id ID is in the census job's queue.
queued() { "${PSQL[@]}" -c "SELECT 1 FROM leader_lease WHERE job_name = 'census' AND queue @> jsonb_build_array(jsonb_build_object('holder', '$1'))" | grep -q 1; }
for who in head behind; do
  "$LW" --database-url "$(census_url bench_standby "bench-census-$who")" --job census --id "census-$who" --wait --log-level error -- true &
  census_pids+=($!)
  queued_by=$((SECONDS + 60))
  until queued "census-$who"; do
    kill -0 "${census_pids[-1]}" || { log "the $who standby ended"; exit 1; }
    [ $SECONDS -lt "$queued_by" ] || { log "the $who standby not in the queue (leader_lease.queue) after 60 s"; exit 1; }
    sleep 0.05
  done
done
for n in 1 2; do
  "$LW" --database-url "$(census_url bench_scheduler "bench-census-scheduler-$n")" --job census-schedule \
    --schedule '@every 24h' --catch-up none --log-level error -- true &
  census_pids+=($!)
done
sample_backends "$W/census-backends" & sampler=$!
sleep "$CENSUS_SECONDS"
kill "$sampler"; wait "$sampler" 2>/dev/null || true
kill "${census_pids[@]}" 2>/dev/null; wait "${census_pids[@]}" 2>/dev/null || true
census_of() { most_backends "$W/census-backends" "bench-census-$1"; }
census_leader=$(census_of leader); census_head=$(census_of head); census_behind=$(census_of behind)
census_sched1=$(census_of scheduler-1); census_sched2=$(census_of scheduler-2)
census_standby=$(( census_head > census_behind ? census_head : census_behind ))
census_sched=$(( census_sched1 > census_sched2 ? census_sched1 : census_sched2 ))

# ---------------------------------------------------------------- simulated fleet
# bench/fleet: SIM_JOBS jobs of one leader and nine standbys each, as
# goroutines of one process using the lease package, at the default
# timings; a tenth of the leaders crash and a fifth release during the
# measurement. Directly (standbys listen) and through PgBouncer in
# transaction mode (standbys poll), in a database of its own. It runs
# before the fleet of real wrappers: after a thousand of those, connects
# to PostgreSQL on a 2-core machine were seen to time out for minutes.
log "6/7 simulated fleet: $SIM_DIRECT_JOBS jobs directly, $SIM_JOBS through PgBouncer, ${SIM_SECONDS}s each"
"${PSQL[@]}" -c "CREATE DATABASE fleet"
SIM_DB="postgres://postgres@127.0.0.1:$PGPORT/fleet?sslmode=disable"
SIM_BOUNCED="postgres://postgres@127.0.0.1:$BOUNCER_PORT/fleet?sslmode=disable"
SIM_DIRECT_CMD="fleet -start-rate $SIM_DIRECT_START_RATE -url DIRECT_URL -jobs $SIM_DIRECT_JOBS -duration ${SIM_SECONDS}s -postmaster PID"
SIM_BOUNCED_CMD="fleet -start-rate $SIM_START_RATE -url PGBOUNCER_URL -admin-url DIRECT_URL -listen=false -jobs $SIM_JOBS -duration ${SIM_SECONDS}s -postmaster PID -pgbouncer PID"
sim() { # out, then fleet's flags
  local out=$1; shift
  "$W/fleet" -postmaster "$(head -1 "$W/pg/postmaster.pid")" -duration "${SIM_SECONDS}s" -start-rate "$SIM_START_RATE" -out "$out" "$@"
}
# The kernel's own memory monitor (kdamond, DAMON, which some virtual
# machines run to give unused memory back to their host) scans every
# process's pages: with thousands of backends it competes for the cores.
# Its CPU time during the direct run is reported beside the fleet's.
kdamond_ticks() { local t=0 p; for p in $(pgrep -x 'kdamond.*' 2>/dev/null); do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo "$t"; }
kd0=$(kdamond_ticks); kd_t0=$(now_ns)
sim "$W/sim-direct.json" -url "$SIM_DB" -jobs "$SIM_DIRECT_JOBS" -start-rate "$SIM_DIRECT_START_RATE"
kd1=$(kdamond_ticks); kd_t1=$(now_ns)
KDAMOND_CPU=$(awk -v d=$((kd1 - kd0)) -v hz="$(getconf CLK_TCK)" -v ns=$((kd_t1 - kd_t0)) 'BEGIN { printf "%.2f", d / hz / (ns / 1e9) }')
sim "$W/sim-bounced.json" -url "$SIM_BOUNCED" -admin-url "$SIM_DB" -listen=false -jobs "$SIM_JOBS" \
  -pgbouncer "$(cat "$W/bouncer/pgbouncer.pid")"
# The reference for the polling fleet: SELECT 1 from as many connections
# as it has standbys, through the same PgBouncer, together at the
# fleet's own statement rate (statements_per_s: every statement its
# participants sent, leaders' and standbys').
SIM_RATE=$(python3 -c "import json, sys; print('%.1f' % json.load(open(sys.argv[1]))['statements_per_s'])" "$W/sim-bounced.json")
FLOOR_SECONDS=$(( SIM_SECONDS < 60 ? SIM_SECONDS : 60 ))
log "    the floor: SELECT 1 at the PgBouncer fleet's $SIM_RATE statements a second, ${FLOOR_SECONDS}s"
sim "$W/sim-floor.json" -floor -rate "$SIM_RATE" -url "$SIM_BOUNCED" -admin-url "$SIM_DB" -jobs "$SIM_JOBS" -duration "${FLOOR_SECONDS}s" \
  -pgbouncer "$(cat "$W/bouncer/pgbouncer.pid")"
SIM_FLOOR_CMD="fleet -floor -rate $SIM_RATE -start-rate $SIM_START_RATE -url PGBOUNCER_URL -admin-url DIRECT_URL -jobs $SIM_JOBS -duration ${FLOOR_SECONDS}s -postmaster PID -pgbouncer PID"
sim_md() { # goals | table
  python3 - "$1" "$W/sim-direct.json" "$W/sim-bounced.json" "$W/sim-floor.json" <<'PY'
import json, sys
what, d, b, fl = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
def met(ok): return "**met**" if ok else "**not met**"
def bad(r): return r["violations"] + r["token_regressions"] + r["history_overlaps"]
def fleet(r): return f"{r['participants']:,} participants, {r['jobs']:,} jobs"
def wph(r):
    if r["handoffs_completed"] == 0: return "n/a (none completed)"
    if r["writes_per_handoff"] < 0: return "n/a (fewer writes counted than handoffs: see the fleet's log)"
    return f"{r['writes_per_handoff']:.2f}"
def writes(r): return f"{r['standby_takes']} takes + {r['standby_adopts']} adopts ÷ {r['handoffs_completed']} handoffs and takeovers"
# The PgBouncer fleet's statement rate the goal is set against, per
# participant: 1,750.5 a second for 10,000 (as measured on this machine
# with every standby behind the head polling every four retry intervals).
RATE_BEFORE = 1750.5 / 10000
if what == "bad":
    print(bad(d) + bad(b))
    sys.exit()
if what == "goals":
    print(f"| direct simulated fleet ({fleet(d)}): database CPU s per s | {d['db_cpu_per_s']:.3f} | ≤ 0.25 | {met(0 <= d['db_cpu_per_s'] <= 0.25)} |")
    print(f"| same: graceful handoff p99 | {d['handoff_ms']['p99']:.1f} ms | ≤ 100 ms | {met(d['handoff_ms']['n'] > 0 and d['handoff_ms']['p99'] <= 100)} |")
    most = d["participants"] + 100
    # Fewer backends than wrappers are wrappers that could not connect:
    # then nothing of the run is the fleet's, and the goal is not met.
    failed = f"; {d['acquire_errors']:,} connects or acquires failed and were retried" if d["acquire_errors"] else ""
    print(f"| same: backends held (most seen) | {d['backends_max']:,}{failed} | ≤ {most:,} (one per wrapper, and 100) | {met(d['participants'] <= d['backends_max'] <= most)} |")
    # The floor at the fleet's own statement rate: the ratio is how much
    # the fleet's statements cost the database above SELECT 1's.
    ratio = b["db_cpu_per_s"] / fl["db_cpu_per_s"] if fl["db_cpu_per_s"] > 0 else float("inf")
    print(f"| through PgBouncer ({fleet(b)}): database CPU ÷ `SELECT 1` at the fleet's own statement rate "
          f"| {ratio:.2f}× ({b['db_cpu_per_s']:.3f} ÷ {fl['db_cpu_per_s']:.3f} s per s, the floor at {fl['statements_per_s']:,.1f} statements per s) "
          f"| ≤ 2× | {met(b['db_cpu_per_s'] >= 0 and ratio <= 2)} |")
    most = RATE_BEFORE * b["participants"]
    print(f"| same: statements sent per s | {b['statements_per_s']:,.1f} | ≤ {most:,.1f} (1,750.5 per 10,000 wrappers) "
          f"| {met(0 < b['statements_per_s'] <= most)} |")
    print(f"| same: graceful handoff p99 | {b['handoff_ms']['p99']:.0f} ms | ≤ {b['retry_s'] * 1000:.0f} ms (one retry interval) | {met(b['handoff_ms']['n'] > 0 and b['handoff_ms']['p99'] <= b['retry_s'] * 1000)} |")
    print(f"| same: standby writes per handoff | {wph(b)} ({writes(b)}) | ≤ 1 (1 write) | {met(b['handoffs_completed'] > 0 and 0 <= b['writes_per_handoff'] <= 1)} |")
    sys.exit()
rows = [
    ("participants / jobs", lambda r: f"{r['participants']:,} / {r['jobs']:,}"),
    ("measured for", lambda r: f"{r['seconds']:.0f} s"),
    ("database CPU, s per s (postmaster and children)", lambda r: f"{r['db_cpu_per_s']:.3f}"),
    ("PgBouncer CPU, s per s", lambda r: "n/a" if r["pgbouncer_cpu_per_s"] < 0 else f"{r['pgbouncer_cpu_per_s']:.3f}"),
    ("the simulation's own CPU, s per s (all participants)", lambda r: f"{r['sim_cpu_per_s']:.3f}"),
    ("transactions committed per s", lambda r: f"{r['commits_per_s']:.0f}"),
    ("transaction ids per s", lambda r: f"{r['xids_per_s']:.1f}"),
    ("statements sent per s (all participants, leaders and standbys)", lambda r: f"{r['statements_per_s']:,.1f}"),
    ("PostgreSQL backends held (most seen)", lambda r: f"{r['backends_max']:,}"),
    ("their memory (PSS), total / per backend", lambda r: f"{r['backend_mem_mib'] / 1024:.1f} GiB / {r['backend_mem_mib'] / max(r['backend_procs'], 1):.1f} MiB"),
    ("pooled client connections (most seen; listening ones not included)", lambda r: f"{r['pool_conns_max']:,}"),
    ("graceful handoffs: n, p50 / p99 / worst (ms)", lambda r: f"{r['handoff_ms']['n']}, {r['handoff_ms']['p50']:.1f} / {r['handoff_ms']['p99']:.1f} / {r['handoff_ms']['max']:.1f}"),
    ("crash takeovers: n, kill → taken p50 / p99 (s), TTL", lambda r: f"{r['takeover_s']['n']}, {r['takeover_s']['p50']:.1f} / {r['takeover_s']['p99']:.1f}, {r['ttl_s']:.0f} s"),
    ("same, lease expiry → taken p50 / p99 (ms)", lambda r: f"{r['after_expiry_ms']['p50']:.1f} / {r['after_expiry_ms']['p99']:.1f}"),
    ("standby writes per handoff: takes + adopts sent while standing by ÷ handoffs and takeovers completed", lambda r: f"{wph(r)}: {writes(r)}"),
    ("handoffs not completed at the end / events skipped", lambda r: f"{r['pending_handoffs']} / {r['skipped_events']}"),
    ("two holders at once (live) / token regressions", lambda r: f"{r['violations']} / {r['token_regressions']}"),
    ("overlapping runs of one job in the history (runs checked)", lambda r: f"{r['history_overlaps']} ({r['history_runs']:,})"),
    ("leases lost unplanned / failed statements", lambda r: f"{r['lost']} / {r['failures']}"),
    ("renewals: n, p99 (ms), failed", lambda r: f"{r['renewals']:,}, {r['renew_p99_ms']:.1f}, {r['renew_failures']}"),
]
print("| | directly, standbys listening | through PgBouncer (transaction mode), standbys polling |")
print("|---|---|---|")
for label, f in rows:
    print(f"| {label} | {f(d)} | {f(b)} |")
print(f"| the floor: SELECT 1 from {fl['pollers']:,} connections, each once per {fl['every_s']:.2f} s (together the PgBouncer fleet's "
      f"{fl['rate_per_s']:,.1f} statements per s): statements per s; database / PgBouncer CPU, s per s | n/a "
      f"| {fl['statements_per_s']:,.1f}; {fl['db_cpu_per_s']:.3f} / {fl['pgbouncer_cpu_per_s']:.3f} |")
PY
}
sim_goals=$(sim_md goals)
sim_bad=$(sim_md bad)
sim_table=$(sim_md table)

# ---------------------------------------------------------------- fleet
# FLEET wrappers over JOBS jobs; each job's child sleeps 100000 plus the
# job's number (seconds), so that the children of one job can be counted. They start at about 50 a
# second, as a rollout would: a thousand Go processes started at once on
# two cores starve PostgreSQL and PgBouncer of CPU until connects time out
# (docs/configuration.md says so for operators).
pg_cpu_ticks() { # utime+stime of every process of the test cluster
  local pm; pm=$(head -1 "$W/pg/postmaster.pid")
  for p in $pm $(pgrep -P "$pm"); do awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null; done | paste -sd+ | bc
}
fleet() { # name url [extra flags]
  local name=$1 url=$2; shift 2
  log "    $name: $FLEET wrappers over $JOBS jobs for ${FLEET_SECONDS}s"
  "${PSQL[@]}" -c "DELETE FROM leader_lease WHERE job_name LIKE 'fleet%'" >/dev/null
  local port=20000 pids=()
  for i in $(seq 0 $((FLEET - 1))); do
    local job=$((i % JOBS))
    "$LW" --database-url "$url" --job "fleet$job" --wait --ttl 9s --renew-interval 3s --grace 3s --retry-interval 1s \
      --log-level error --http-addr "127.0.0.1:$((port + i))" "$@" -- sleep "$((100000 + job))" &
    pids+=($!)
    sleep 0.02
  done
  # Wait until every job has a leader, then watch.
  local deadline=$((SECONDS + 60))
  until [ "$("${PSQL[@]}" -c "SELECT count(*) FROM leader_lease WHERE job_name LIKE 'fleet%' AND expires_at > now()")" = "$JOBS" ]; do
    [ $SECONDS -lt $deadline ] || { log "not every job got a leader"; break; }
    sleep 0.2
  done
  local cpu0; cpu0=$(pg_cpu_ticks)
  local violations=0 doubles=0 samples=0 end=$((SECONDS + FLEET_SECONDS))
  while [ $SECONDS -lt $end ]; do
    # Exactly one child per job at every sample.
    # And, of those, more than one: two holders at once.
    local bad two
    read -r bad two < <(ps -eo args= | awk -v jobs="$JOBS" '$1 == "sleep" && $2 >= 100000 && $2 < 100000 + jobs { n[$2]++ }
      END { bad = 0; two = 0; for (j = 100000; j < 100000 + jobs; j++) { if (n[j] != 1) bad++; if (n[j] > 1) two++ }; print bad, two }')
    violations=$((violations + bad)); doubles=$((doubles + two)); samples=$((samples + 1))
    sleep 1
  done
  local cpu1; cpu1=$(pg_cpu_ticks)
  local hz; hz=$(getconf CLK_TCK)
  local cpu_per_min; cpu_per_min=$(echo "scale=2; ($cpu1 - $cpu0) / $hz * 60 / $FLEET_SECONDS" | bc)
  # p99 renewal latency from the leaders' histograms; RSS per wrapper.
  local p99
  p99=$(for i in $(seq 0 $((FLEET - 1))); do curl -s "127.0.0.1:$((port + i))/metrics"; done | python3 -c '
import sys, re, collections
b = collections.Counter()
for line in sys.stdin:
    m = re.match(r"leasewrap_renewal_duration_seconds_bucket\{.*le=\"([^\"]+)\"\} (\d+)", line)
    if m: b[float(m.group(1))] += int(m.group(2))
total = b[float("inf")]
if not total: print("n/a"); sys.exit()
for le in sorted(b):
    if b[le] >= 0.99 * total: print(f"≤ {le*1000:.1f} ms ({total} renewals)"); break')
  local rss
  rss=$(for p in "${pids[@]}"; do awk '/VmRSS/ { print $2 }' "/proc/$p/status" 2>/dev/null; done | awk '{ s += $1; n++ } END { printf "%.1f", s / n / 1024 }')
  local dbconns; dbconns=$("${PSQL[@]}" -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
  kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null || true
  echo "$doubles" >>"$W/fleet-doubles"
  echo "| $name | $FLEET / $JOBS | $violations in $samples samples ($doubles with two at once) | $cpu_per_min | $p99 | $rss | $dbconns |"
}
log "7/7 fleet of real wrappers"
fleet_direct=$(fleet direct "$DB")
fleet_bounced=$(fleet "via PgBouncer (transaction mode), \`--listen=false\`" "$BOUNCED" --listen=false)

# ---------------------------------------------------------------- report
two_holders=$(( sim_bad + $(paste -sd+ "$W/fleet-doubles" | bc) + $(grep -c -e 'still ran' -e 'both standbys' "$W/switchover-wrong" || true) ))
goal() { if python3 -c "import sys; sys.exit(0 if $1 else 1)"; then echo met; else echo "not met"; fi; }
cat >"$OUT" <<MD
# Benchmarks

Produced by \`bench/run.sh\` on $(date -u +%Y-%m-%d): $CORES cores, PostgreSQL $PGVERSION
(a cluster of its own, default durability settings: every lease write is a
committed, fsynced transaction), etcd $ETCDVERSION, all on loopback. Ratios
against the peers measured in the same run are what to compare; absolute
times are for orientation.

## Goals

| figure | this run | goal | |
|---|---|---|---|
| \`leasewrap version\` ÷ an empty Go program linking the same libraries | ${version_libs_ratio}× (÷ an empty one: ${version_ratio}×) | ≤ 1.1× | **$(goal "$version_libs_ratio <= 1.1")** |
| \`leasewrap --job x -- true\` ÷ the floor program linking the same libraries | ${floor_libs_ratio}× | ≤ 1.15× | **$(goal "$floor_libs_ratio <= 1.15")** |
| same, through PgBouncer, ÷ \`etcdctl lock x true\` | ${bounced_etcd_ratio}× | ≤ 0.8× | **$(goal "$bounced_etcd_ratio <= 0.8")** |
| graceful handoff median ÷ \`etcdctl lock\` | $(python3 -c "print(round($notify_med / $etcd_med, 2))")× ($notify_med vs $etcd_med ms) | ≤ 1.0× | **$(goal "$notify_med <= $etcd_med")** |
| graceful handoff p99 ÷ its median | $(python3 -c "print(round($notify_p99 / $notify_med, 2))")× | ≤ 3× | **$(goal "$notify_p99 <= 3 * $notify_med")** |
| crash failover, TTL 5 s: kill → standby's command (worst) | $(echo "scale=2; $fo_lw_p99/1000" | bc) s | ≤ 5.1 s, child dead | **$(goal "$fo_lw_p99 <= 5100 and $orphans_lw == 0")** |
| same: lease expiry → standby's command (worst) | $fo_late_p99 ms | ≤ 100 ms | **$(goal "$fo_late_p99 <= 100")** |
| backends held by a leader / a standby / a scheduler (most seen, per process) | $census_leader / $census_standby / $census_sched | 1 / 1 / 1 | **$(goal "$census_leader == 1 and $census_standby == 1 and $census_sched == 1")** |
$sim_goals
| \`release --to\` the head of the queue, on a direct connection, default timings: request → the chosen standby's command, median / worst ($switch_n of $SWITCH_TRIALS trials) | $switch_med / $switch_worst ms | ≤ 100 ms | **$(goal "$switch_n == $SWITCH_TRIALS and $switch_wrong == 0 and $switch_worst <= 100")** |
| same, to the standby right behind the head (it polls: only the head listens) | $switch_behind_med / $switch_behind_worst ms | ≤ 2000 ms (one retry interval) | **$(goal "$switch_behind_n == $SWITCH_TRIALS and $switch_wrong == 0 and $switch_behind_worst <= 2000")** |
| one leader + one \`--wait\` standby, transactions committed per minute | $commits_pm | ≤ 10 | **$(goal "$commits_pm <= 10")** |
| same, transaction ids per minute | $xids_pm | ≤ 5 | **$(goal "$xids_pm <= 5")** |
| two holders of one job at once, any fleet (both simulated fleets, both fleets of wrappers, the switchovers) | $two_holders | 0 | **$(goal "$two_holders == 0")** |

## 1. Wrapper overhead

Mean time to run \`true\` under each tool (hyperfine, $RUNS runs).

| command | mean (ms) | σ (ms) | vs flock |
|---|---|---|---|
$overhead_table

\`leasewrap version\` is ${version_libs_ratio}× an empty Go program that links
the same libraries (bench/libs: pgx, urfave/cli, zerolog, client_golang,
exporter-toolkit and the rest), and ${version_ratio}× one that links none; a
wrapped \`true\` is ${floor_libs_ratio}× the floor program linking the same
libraries, and ${floor_ratio}× the floor alone, which connects with pgx, takes
the lease in one INSERT … ON CONFLICT, runs \`true\` and releases in one
UPDATE (bench/floor). flock (${lw_ratio}×) is a reference only: it cannot coordinate
hosts. Where a wrapped \`true\` spends its time (\`go test -bench\`, benchstat
format):

\`\`\`
$micro
\`\`\`

A wrapped \`true\` is: starting leasewrap itself (the \`leasewrap version\`
row: the Go runtime and its libraries' initialisation), one new connection
(PostgreSQL forks a backend for it; \`BenchmarkConnect\`), the acquire with
its shape check in the same pipeline and the release (one committed write
each, \`BenchmarkFirstAcquireRelease\`; \`BenchmarkSchemaCheck\` is the
separate catalog query this replaced), and starting the command in its own
process group (\`BenchmarkRunTrue\`). The floor program pays the same
connection and commits; what is left between the two is start-up and the
shape checks.

**Start-up.** A Go program that links client_golang and nothing else
(bench/prom) is ${prom_ratio}× the empty one: client_golang's packages and
theirs (protobuf, procfs) initialise themselves before \`main\` — its
default registry with the Go and process collectors, protobuf's, which
reads samples of the executable to seed its randomness — and a larger
binary costs more page faults to start (about 600 against 200, measured
with \`perf stat\`). All the libraries leasewrap links together
(bench/libs) make an empty program ${libs_ratio}× the one that links none.
\`GODEBUG=inittrace=1\` puts leasewrap's own packages at under 0.1 ms of
its start-up: what leasewrap adds to its libraries' start is the first
goal's ratio.

**The shape checks.** On a new backend, whose catalog caches are cold, the
first take with the shape checks in its pipeline took ${cold_checked} ms and the
take alone ${cold_plain} ms (\`BenchmarkColdTake*\`, connection excluded):
planning the two catalog queries is most of the difference, not a round
trip. They stay, because a take that checks its own table cannot prove
all that they prove. The take could refuse in the statement itself, with
no catalog query, a wrong type (\`pg_typeof\` of a column is known at
parse time; a row cast to the table's type applies its modifiers, so
\`timestamptz(0)\` would show), a missing key (\`ON CONFLICT (job_name)\`
fails without a unique index on job_name alone, and on a deferrable one),
a relation that is not a plain table (\`pg_relation_filenode\` is NULL for
a view or a partitioned table), an extra column (the row's width) and a
missing grant (\`has_table_privilege\`); a failed take writes nothing. But
two things the strict check refuses or upgrades are in the catalog alone:
the NOT NULL of holder, expires_at and fencing_token (its absence is
upgraded, or refused with rows that lack them), and which column a primary key is on
(\`PRIMARY KEY (holder)\` next to \`UNIQUE (job_name)\` passes every
in-statement test). A stamp left on a verified table would not notice an
\`ALTER TABLE\` after it without an event trigger, which needs a superuser.
So the first take of a process keeps its catalog checks, in the same round
trip, and the strict check's tests (wrong type, wrong key, unrelated
table, nothing altered) stay as they were.

## 2. Graceful handoff

The leader's command exits; how long until the standby's command starts
($TRIALS trials; each side's timestamp is taken by \`date\` in the command).

| tool | median (ms) | p99 (ms) |
|---|---|---|
| leasewrap, NOTIFY (default) | $notify_med | $notify_p99 |
| leasewrap, polling only (\`--listen=false --retry-interval 500ms\`) | $poll_med | $poll_p99 |
| etcdctl lock | $etcd_med | $etcd_p99 |

Goal: leasewrap's median ≤ etcdctl lock's — **$(goal "$notify_med <= $etcd_med")**; p99 ≤ 3× the median —
**$(goal "$notify_p99 <= 3 * $notify_med")**.

A leasewrap handoff is two committed writes in a row — the leader's release,
which hands the lease to the first standby in the job's queue and carries
the NOTIFY, and that standby's adopt, which renews the lease and starts its
run — plus the wake-up and starting the command; etcdctl lock's is one
delete and a watch event. The adopt is durable, as a take is, as it must
be: a lease that is lost in a crash of the database could let two holders
run. The release is durable too: it could be
committed without waiting for its fsync (a release a crash lost would only
keep the lease held until its expiry), but the run it records would then
be closed by the next holder as lost, its exit status gone from the
history, so leasewrap pays that fsync.
The NOTIFY goes to the job's own channel, so it wakes only that job's
standbys. Go's once-per-process pidfd check (a throwaway child) runs while
the lease is taken, not between the take and the command. The release
is planned ahead once the command has run 50 ms (an EXPLAIN, which runs
and writes nothing): a backend's first plan of a statement is several
times slower than the next (its catalog lookups), and planned when it
ran, the release cost the handoff about 2.4 ms more. The adopt is not:
planned ahead, it saved 0.2 ms, and every standby's new connection paid
for a plan that only the standby handed the lease uses. Without NOTIFY the handoff
waits for the next poll.

### A switchover: \`release --to\`

A holder and two \`--wait\` standbys of one job, connected directly, at
the default timings (TTL 45 s, renew 15 s, retry 2 s); once both stand in
the queue, and 1.5 s into the holder's lease, \`leasewrap release --job J
--to B\` names the head of the queue, or the standby right behind it:
from just before the request to B's command starting (each trial a job
of its own). The head listens and takes the lease in the statement's
wake; the standby behind it polls (only the head of a queue listens) and
takes it at its next look, within a retry interval.

| chosen standby | trials completed | median (ms) | worst (ms) |
|---|---|---|---|
| the head of the queue | $switch_n of $SWITCH_TRIALS | $switch_med | $switch_worst |
| right behind the head | $switch_behind_n of $SWITCH_TRIALS | $switch_behind_med | $switch_behind_worst |

Trials that went wrong: $switch_wrong.

A trial goes wrong if the other standby starts, if nothing starts within
60 s, or if the holder's command still runs when the chosen standby's has
started. A holder that hears of the request only at its next renewal
stops its command up to a renew interval after it.
$( [ "$switch_wrong" -gt 0 ] && { echo; echo "What went wrong:"; echo; sed 's/^/- /' "$W/switchover-wrong"; } )

## 3. Crash failover

The leader's wrapper is SIGKILLed; how long until the standby's command
starts, with a 5 s TTL ($FAILOVER_TRIALS trials), and whether the dead leader's
command was still running then.

| tool | median (s) | worst (s) | after the lease expired, worst (ms) | dead leader's command still running |
|---|---|---|---|---|
| leasewrap (\`--ttl 5s\`) | $(echo "scale=2; $fo_lw_med/1000" | bc) | $(echo "scale=2; $fo_lw_p99/1000" | bc) | $fo_late_p99 | $orphans_lw of $FAILOVER_TRIALS |
| etcdctl lock \`--ttl 5\` | $(echo "scale=2; $fo_etcd_med/1000" | bc) | $(echo "scale=2; $fo_etcd_p99/1000" | bc) | n/a | $orphans_etcd of $FAILOVER_TRIALS |

The kill comes at a random point of the leader's 1 s renewal cycle, so the
lease has 4–5 s left; the "after the lease expired" column is the standby's
command start less the expiry the dead leader left in the row (one clock:
everything runs on this machine).

leasewrap's command dies with its wrapper (parent-death signal) and the
standby waits for the lease to expire on the database clock. etcdctl lock
leaves its command running: two copies run at once.

## 4. Database cost

Default timings (renew 15 s, retry 2 s), one leader and one listening
standby of one job, in a database of their own, over ${COST_SECONDS} s:
statements from pg_stat_statements, transactions committed from
pg_stat_database (a pool's ping counts as one), transaction ids from
txid_current_snapshot, WAL from pg_current_wal_lsn (the whole cluster, the
checkpointer included), with autovacuum off meanwhile.

| role | statements per minute | backends held (most seen) |
|---|---|---|
| leader | $leader_spm | $leader_conns |
| standby | $standby_spm | $standby_conns |

| both together, per minute | transactions committed | transaction ids | WAL bytes |
|---|---|---|---|
| leader + standby | $commits_pm | $xids_pm | $wal_pm |

The leader renews every renew interval: 4 committed writes a minute, each
with a transaction id, which the TTL needs (renew interval + grace + retry
interval must fit in it, and a renewal is what proves the lease to the
database). A listening standby looks (a plain SELECT: a commit, no
transaction id) only just after the expiry it last saw, every 30 to 45 s
while the leader renews; between looks it waits for the release's NOTIFY,
and every renew interval pings its connection with a bare Sync message,
which PostgreSQL answers without a transaction, so that a connection that
died silently is noticed then (\`TestStandbyPingIsNoTransaction\`,
\`TestListeningStandbyOnlyKeepsAlive\`). Before, the standby looked every
renew interval as well: 4 more commits a minute. A window shorter than
the TTL (the quick mode's) may hold no look of the standby's at all.

**Backends per process.** Each process connects under an
\`application_name\` of its own, and pg_stat_activity is read every half
second: above, over the cost window; below, for ${CENSUS_SECONDS} s after it, in
another database, a leader, the standby at the head of its queue and one
behind it, and two schedulers (\`--schedule '@every 24h' --catch-up none\`,
idle: no time of theirs falls in the window), all at the default timings.
The most backends seen at once for each process:

| leader | standby, head of the queue | standby behind it | scheduler 1 | scheduler 2 |
|---|---|---|---|---|
| $census_leader | $census_head | $census_behind | $census_sched1 | $census_sched2 |

## 5. Fleet scale

$FLEET wrappers over $JOBS jobs, started at about 50 a second, each job's
wrappers standing by with
\`--wait --ttl 9s --renew-interval 3s --grace 3s --retry-interval 1s\`; once
every job has a leader (or a minute has passed), they are watched
for ${FLEET_SECONDS} s. A violation is a sample in which some job had other than
exactly one command running (none, as during a handoff, or two at once). Through PgBouncer the pool's $BOUNCER_POOL server
connections and its single thread queue the statements, which shows in the
renewal latency; renewals still complete well inside the 9 s TTL.

| setup | wrappers / jobs | violations | DB CPU s per min | p99 renewal | RSS per wrapper (MiB) | DB connections |
|---|---|---|---|---|---|---|
$fleet_direct
$fleet_bounced

Before standbys looked instead of taking and stopped polling while they
listen, the same fleet cost the database 49.12 s (direct) and 41.46 s
(through PgBouncer) of CPU per minute (bench/run.sh at 0e3c5bd, on this
machine).

## 6. A simulated fleet at the default timings

\`bench/fleet\` runs the \`lease\` package in one process, each participant a
goroutine that is what one \`leasewrap --wait\` is: one connection of its
own, as \`lease.ConnectSession\` configures it (with a tracer that counts
its statements added), a Store with the default timings (TTL 45 s, renew 15 s,
grace 10 s, retry 2 s) and a holder id of its own. Nothing is shared between
participants but the process, so PostgreSQL (or PgBouncer) sees the
connections and statements that as many separate wrappers would send.
Every job has one leader and nine standbys, started at $SIM_START_RATE a
second through PgBouncer and $SIM_DIRECT_START_RATE directly. After every job has a leader
and 15 s more, the fleet is measured for ${SIM_SECONDS} s; meanwhile a tenth of
the jobs lose their leader to a crash (its connections close without a
release, the lease is left to expire) and a fifth have theirs released, at
random moments; either way the participant comes back as a standby 1–5 s
later with a new connection and holder id, as a restarted wrapper would.

- Database CPU: utime + stime of the postmaster and its children, and the
  cutime + cstime of the children it reaped, from /proc, before and after.
- Commits: \`xact_commit\` of the fleet's database; transaction ids: the
  next one to be assigned (\`pg_current_snapshot()\`), both read from
  another database so that reading them adds nothing.
- Statements: every statement a participant sends, leader or standby,
  counted as it is sent by a pgx tracer on its connections (those a
  listening standby takes out of its pool included; each statement of a
  pipeline). A listening connection's keepalive, a bare Sync message, is
  no statement.
- Standby writes per handoff: the takes (the INSERT … ON CONFLICT) and
  adopts (the UPDATE of a lease handed to it) that participants sent while
  standing by during the window, whether they got the lease or not, over
  the graceful handoffs and crash takeovers completed in it. A standby's
  writes to its queue entry (entering, refreshing, leaving) are not
  counted: they are not attempts on the lease.
- Handoff: from the leader calling Release to another participant holding
  the lease. Takeover: from the crash to another holding it, and from the
  expiry the dead leader left in the row to the take (the new fencing
  token is the database clock at the take).
- Two holders at once: checked at every acquisition against the process's
  record of whose work runs (a holder leaves it when it releases, crashes
  or sees its lease end); fencing tokens must rise; and once the fleet has
  stopped, no two runs of one job with different tokens may overlap in the
  history table ([started_at, finished_at), with runs still open in the
  lease row until their expiry).

Through PgBouncer the fleet has $SIM_JOBS jobs; directly, where each
participant holds a backend of its own, $SIM_DIRECT_JOBS jobs ($((SIM_DIRECT_JOBS * 10)) participants),
$SIM_DIRECT_WHY.
$( [ "$(pgrep -c -x 'kdamond.*' 2>/dev/null)" -gt 0 ] 2>/dev/null && echo "
This machine runs the kernel's memory monitor (kdamond, DAMON), which
scans the memory of every process: during the direct run it used
$KDAMOND_CPU CPU seconds per second of the machine's $CORES cores, beside the
database's. Its work grows with the number of processes: with thousands
of backends it competes with them for the cores (on an earlier run it
was seen starving connects until renewals failed and leases were lost),
so the direct run's latencies are this machine's, not PostgreSQL's." )

$sim_table

Standbys wait in their job's queue. A release hands the lease, in the same
statement, to the first live standby in it, and announces the handoff with
NOTIFY on its job's own channel (and a release on the table's, for standbys
of earlier versions): the head of the queue, the one standby of the job that
listens, adopts the lease with one UPDATE; the standbys behind it poll. A
crashed leader's lease is taken, after its expiry, by the head of the queue
alone. PostgreSQL 15 signals every backend listening in the database for
each notification, and each reads the notification queue in a transaction
of its own in \`xact_commit\`: directly, a graceful release wakes each
job's head, each holder (listening for a release of its own job) and each
idle scheduler.
Through PgBouncer nothing listens: the head of each job's queue looks every
retry interval, and the standbys behind it every four (a plain SELECT that
also reads the standby's place in the queue, no transaction id); a polling
standby writes its entry again when half of its life (four TTLs) has
gone, to say it still looks (refreshed every half TTL, the entries of
thousands of polling standbys took most of the fleet's transaction ids). A lease handed to the head is adopted at its next look.
PgBouncer holds the client connections while PostgreSQL serves them on a
few backends.

The simulation runs on the database's machine and shares its cores with
PostgreSQL and PgBouncer (and with whatever else runs there): its handoff
and renewal latencies are those of a saturated host, worse than a fleet
spread over many hosts would see; the CPU figures are each process's own.
Through PgBouncer most of the database's work is the standbys' looks: per
job, one per retry interval from the head of its queue and one per four
retry intervals from each standby behind it, so it scales with standbys ÷
\`--retry-interval\`: a longer \`--ttl\` (whose derived retry interval is
2/45 of it) cuts it in proportion, and a graceful handoff then takes up to
one retry interval.

The table's last row is the floor, measured after the PgBouncer fleet on
the same servers: as many connections as that fleet had standbys, sending
\`SELECT 1\` (the least a round trip can ask) together at the fleet's own
statement rate (its statements sent per s, the leaders' and the standbys'
alike: $SIM_RATE), each an even share of it, through the same PgBouncer.
The database spends at least that on any statements at that rate,
whatever they ask; what the fleet costs above it is its statements' own
work (reading the rows, as the \`server-µs/op\` of \`BenchmarkLook\` in
section 1 does, and the leaders' renewals, the handoffs and the queue
entries writing them, with their commits) and the database's background
processes. The goal allows the fleet 2× the floor, at no more statements
a second than it sent before its statements were made leaner (1,750.5 for
10,000 participants, on this machine): a fleet cannot come nearer the
floor by sending more of its cheapest statements.

To reproduce (the cluster and PgBouncer as this script starts them):

\`\`\`
go build -tags urfave_cli_no_docs -o fleet ./bench/fleet
$SIM_DIRECT_CMD
$SIM_BOUNCED_CMD
$SIM_FLOOR_CMD
\`\`\`
MD
log "wrote $OUT"
