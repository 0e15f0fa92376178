# shellcheck shell=bash
# Shared by tests/run.sh and deploy/run-local.sh (sourced, not run): installs the Debian packages
# the project needs, builds it, and starts throw-away Postgres, PgBouncer and Redis servers on
# loopback.
# Everything started here is remembered by PID (or data directory) so the caller's trap can stop
# exactly what it started.

IDEM_REPO=${IDEM_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
IDEM_PG_BIN=${IDEM_PG_BIN:-/usr/lib/postgresql/15/bin}
IDEM_PACKAGES=(
  libboost1.81-dev libboost-json1.81-dev libhiredis-dev libyaml-cpp-dev libpq-dev libssl-dev
  googletest libgtest-dev libgmock-dev postgresql-15 redis-server cmake ninja-build g++ ccache
  pkg-config ca-certificates curl pgbouncer prometheus nginx-light gnuplot-nox jq nftables
  postgresql-15-auto-failover pg-auto-failover-cli libnats-dev nats-server libgoogle-perftools-dev
  python3-websockets
)

idem_log() { printf '[%s] %s\n' "${IDEM_SCRIPT:-idemproxy}" "$*" >&2; }
idem_die() { idem_log "error: $*"; exit 1; }

# Installs only the packages that are missing, so a rerun does not touch apt at all.
idem_install_dependencies() {
  local missing=() package
  for package in "${IDEM_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$package")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    idem_die "missing packages (${missing[*]}); run as root or install them with apt-get"
  fi
  idem_log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# idem_build BUILD_DIR [-DVAR=VALUE...] [cmake --build arguments...]
# Leading -D arguments configure the build (e.g. -DIDEM_SANITIZE=address); the rest go to the build.
idem_build() {
  local build_dir=$1
  shift
  local configure_args=()
  while [ "$#" -gt 0 ] && [[ $1 == -D* ]]; do
    configure_args+=("$1")
    shift
  done
  idem_log "building in $build_dir${configure_args[*]:+ (${configure_args[*]})}"
  # Cache hits across checkouts in different directories (CI clones afresh): paths are hashed
  # relative to the repository, and the working directory is left out of the hash.
  export CCACHE_BASEDIR="$IDEM_REPO" CCACHE_NOHASHDIR=1
  cmake -S "$IDEM_REPO" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${configure_args[@]}" >/dev/null
  cmake --build "$build_dir" -j 2 "$@"
}

idem_port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port nothing listens on, below Linux's ephemeral range so outgoing connections never hold it.
idem_free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 12000))
    if ! idem_port_in_use "$port"; then
      echo "$port"
      return 0
    fi
  done
  idem_die "no free port found"
}

# idem_wait_for_port PORT SECONDS
idem_wait_for_port() {
  local deadline=$((SECONDS + $2))
  until idem_port_in_use "$1"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      return 1
    fi
    sleep 0.1
  done
}

# Postgres refuses to run as root: as root, run its tools as the postgres user.
idem_as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# idem_start_postgres DIR: initdb a private cluster in DIR/pgdata (trust auth, loopback only),
# start it on a free port and export IDEMPROXY_PG_PORT, IDEMPROXY_PG_DSN, IDEMPROXY_PG_DATA,
# IDEMPROXY_PG_LOG and IDEMPROXY_PG_CTL (a pg_ctl that runs as the cluster's owner and always logs
# to IDEMPROXY_PG_LOG, so a server restarted by a test never holds the test's output open).
idem_start_postgres() {
  local dir=$1 attempt port
  local data=$dir/pgdata socket_dir=$dir/pgsocket log=$dir/postgres.log
  mkdir -p "$data" "$socket_dir" "$dir/bin"
  chmod 755 "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres:postgres "$data" "$socket_dir"
    touch "$log"
    chown postgres:postgres "$log"
  fi
  idem_as_postgres "$IDEM_PG_BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; idem_die "initdb failed"; }
  cat >"$dir/bin/pg_ctl" <<EOF
#!/usr/bin/env bash
# pg_ctl for the private cluster in $data (written by deploy/local-env.sh).
args=("\$@")
case " \$* " in
  *" start "* | *" restart "*)
    case " \$* " in *" -l "* | *" --log"*) ;; *) args+=(-l "$log") ;; esac ;;
esac
if [ "\$(id -u)" -eq 0 ]; then
  exec runuser -u postgres -- "$IDEM_PG_BIN/pg_ctl" "\${args[@]}"
fi
exec "$IDEM_PG_BIN/pg_ctl" "\${args[@]}"
EOF
  chmod 755 "$dir/bin/pg_ctl"
  echo "include 'idemproxy-local.conf'" | idem_as_postgres tee -a "$data/postgresql.conf" >/dev/null
  for attempt in 1 2 3; do
    port=$(idem_free_port)
    # Durability is irrelevant for a throw-away cluster; connections: parallel tests + 64-way races.
    idem_as_postgres tee "$data/idemproxy-local.conf" >/dev/null <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$socket_dir'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
EOF
    if "$dir/bin/pg_ctl" -D "$data" -w -t 60 start >/dev/null; then
      export IDEMPROXY_PG_PORT=$port
      export IDEMPROXY_PG_DSN="host=127.0.0.1 port=$port user=postgres dbname=postgres"
      export IDEMPROXY_PG_DATA=$data
      export IDEMPROXY_PG_LOG=$log
      export IDEMPROXY_PG_CTL=$dir/bin/pg_ctl
      idem_log "postgres 15 listening on 127.0.0.1:$port (data $data)"
      return 0
    fi
    idem_log "postgres did not start on port $port (attempt $attempt)"
  done
  tail -n 30 "$log" >&2 || true
  idem_die "could not start postgres"
}

# idem_stop_postgres DATA_DIR: stops the cluster if it runs (fast shutdown, then immediate).
idem_stop_postgres() {
  local data=$1
  if [ -n "$data" ] && [ -f "$data/postmaster.pid" ]; then
    idem_as_postgres "$IDEM_PG_BIN/pg_ctl" -D "$data" -m fast -w -t 20 stop >/dev/null 2>&1 ||
      idem_as_postgres "$IDEM_PG_BIN/pg_ctl" -D "$data" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
  fi
}

# Runs a long-lived server as the postgres user when we are root (PgBouncer, like Postgres, refuses
# root). setpriv execs in place, so the "$!" of a backgrounded call is the server's own PID.
idem_exec_as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
  fi
  exec "$@"
}

# idem_start_pgbouncer DIR: PgBouncer in transaction pooling mode (auth trust, the one user in a
# userlist, who may also read the console's SHOW output) on a free loopback port, in front of the cluster idem_start_postgres started (call
# that first). Exports IDEMPROXY_PGBOUNCER_PORT and IDEMPROXY_PGBOUNCER_DSN and sets
# IDEM_PGBOUNCER_PID (the caller's trap stops it with idem_stop_pid).
idem_start_pgbouncer() {
  local dir=$1/pgbouncer attempt port
  [ -n "${IDEMPROXY_PG_PORT:-}" ] || idem_die "idem_start_pgbouncer: start postgres first"
  mkdir -p "$dir"
  echo '"postgres" ""' >"$dir/userlist.txt"
  for attempt in 1 2 3; do
    port=$(idem_free_port)
    # Transaction pooling lends a server connection for one transaction only: any session state
    # a client relied on (prepared statements, session advisory locks, SET) would break here.
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=127.0.0.1 port=$IDEMPROXY_PG_PORT connect_query='SET synchronous_commit = on'
; Two server sessions lent in turn (server_round_robin): a client's consecutive transactions land
; on alternate sessions, the pooler's worst case for session state, on demand
; (tests/integration/prepared_statements_test.cpp).
idem_alternating = host=127.0.0.1 port=$IDEMPROXY_PG_PORT dbname=postgres pool_size=2 min_pool_size=2 connect_query='SET synchronous_commit = on'

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
server_round_robin = 1
max_client_conn = 2000
default_pool_size = 60
ignore_startup_parameters = extra_float_digits,options
stats_users = postgres
log_connections = 0
log_disconnections = 0
EOF
    if [ "$(id -u)" -eq 0 ]; then
      chown -R postgres:postgres "$dir"
    fi
    (idem_exec_as_postgres pgbouncer "$dir/pgbouncer.ini") >"$dir/pgbouncer.log" 2>&1 &
    IDEM_PGBOUNCER_PID=$!
    if idem_wait_for_port "$port" 10; then
      export IDEMPROXY_PGBOUNCER_PORT=$port
      export IDEMPROXY_PGBOUNCER_DSN="host=127.0.0.1 port=$port user=postgres dbname=postgres"
      idem_log "pgbouncer (transaction pooling) listening on 127.0.0.1:$port (pid $IDEM_PGBOUNCER_PID)"
      return 0
    fi
    idem_stop_pid "$IDEM_PGBOUNCER_PID"
    IDEM_PGBOUNCER_PID=
    idem_log "pgbouncer did not start on port $port (attempt $attempt)"
  done
  tail -n 30 "$dir/pgbouncer.log" >&2 || true
  idem_die "could not start pgbouncer"
}

# idem_start_redis DIR: redis-server on a free loopback port, no persistence. Exports
# IDEMPROXY_REDIS_PORT and sets IDEM_REDIS_PID.
idem_start_redis() {
  local dir=$1 attempt port
  mkdir -p "$dir/redis"
  for attempt in 1 2 3; do
    port=$(idem_free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
      --dir "$dir/redis" >"$dir/redis.log" 2>&1 &
    IDEM_REDIS_PID=$!
    if idem_wait_for_port "$port" 10; then
      export IDEMPROXY_REDIS_PORT=$port
      idem_log "redis listening on 127.0.0.1:$port (pid $IDEM_REDIS_PID)"
      return 0
    fi
    idem_stop_pid "$IDEM_REDIS_PID"
    IDEM_REDIS_PID=
    idem_log "redis did not start on port $port (attempt $attempt)"
  done
  tail -n 30 "$dir/redis.log" >&2 || true
  idem_die "could not start redis"
}

# idem_stop_pid PID: SIGTERM, up to 10 s grace, then SIGKILL. Only ever our own children.
idem_stop_pid() {
  local pid=$1
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
