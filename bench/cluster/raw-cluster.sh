#!/usr/bin/env bash
# The raw work of a create_cluster, as a plain script with no kcm in it: the floor that
# bench/cluster compares create_cluster against. For SHARDS shards of NODES MariaDB nodes
# (round-robin over HOSTS, masters on different hosts) and COMPS PostgreSQL compute nodes:
#   every storage node in parallel: mariadb-install-db, start mariadbd (small-memory my.cnf,
#     GTID row binlog, own tmpdir), create the admin, replication and storage accounts;
#   each shard: semi-sync master on the master, standbys attached with GTID, in parallel;
#   every compute node in parallel: initdb, start postgres, create the compute account,
#     mysql_fdw, and one foreign server + user mapping per shard master.
# It ends when every standby's IO and SQL threads run. `raw-cluster.sh up DIR` / `down DIR`.
# Environment: HOSTS (space-separated), SHARDS, NODES, COMPS, PORT_BASE.
set -euo pipefail
action=$1 dir=$2
read -r -a hosts <<< "${HOSTS:-127.0.2.1 127.0.2.2 127.0.2.3}"
shards=${SHARDS:-1} nodes=${NODES:-3} comps=${COMPS:-1} base=${PORT_BASE:-55400}
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pw=rawbench_pw_1234

node_host() { echo "${hosts[$(( ($1 + $2) % ${#hosts[@]} ))]}"; }   # shard s, node n: masters rotate over hosts
node_port() { echo $(( base + $1 * 10 + $2 )); }
comp_host() { echo "${hosts[$(( $1 % ${#hosts[@]} ))]}"; }
comp_port() { echo $(( base + 200 + $1 )); }

install_node() { # shard node
  local h p d; h=$(node_host "$1" "$2"); p=$(node_port "$1" "$2"); d=$dir/my-$p
  mkdir -p "$d/data" "$d/tmp" "$d/log"
  cat > "$d/my.cnf" <<CNF
[mysqld]
port=$p
bind_address=$h
socket=$d/sock
pid_file=$d/pid
datadir=$d/data
tmpdir=$d/tmp
log_error=$d/log/error.log
skip_name_resolve
server_id=$(( p ))
log_bin=$d/log/bin
relay_log=$d/log/relay
binlog_format=ROW
log_slave_updates=ON
gtid_strict_mode=ON
sync_binlog=1
innodb_buffer_pool_size=128M
innodb_log_file_size=48M
performance_schema=OFF
rpl_semi_sync_master_timeout=5000
CNF
  mariadb-install-db --defaults-file="$d/my.cnf" --user=root --auth-root-authentication-method=socket > "$d/log/install.log" 2>&1
  (mariadbd --defaults-file="$d/my.cnf" --user=root > /dev/null 2>&1 &)
  for _ in $(seq 1 300); do mariadb --socket="$d/sock" -e 'select 1' > /dev/null 2>&1 && break; sleep 0.1; done
  # Not binlogged: every node creates its own accounts, and a standby replaying the master's would fail.
  mariadb --socket="$d/sock" <<SQL
SET sql_log_bin=0;
DELETE FROM mysql.global_priv WHERE User='';
CREATE USER 'admin'@'%' IDENTIFIED BY '$pw'; GRANT ALL ON *.* TO 'admin'@'%' WITH GRANT OPTION;
CREATE USER 'repl'@'%' IDENTIFIED BY '$pw'; GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'repl'@'%';
CREATE USER 'storage'@'%' IDENTIFIED BY '$pw'; GRANT ALL ON \`%\_\$\$\_%\`.* TO 'storage'@'%';
SQL
}

attach_shard() { # shard
  local mh mp; mh=$(node_host "$1" 0); mp=$(node_port "$1" 0)
  mariadb --socket="$dir/my-$mp/sock" -e "SET GLOBAL rpl_semi_sync_master_enabled=ON"
  for n in $(seq 1 $((nodes - 1))); do
    local p; p=$(node_port "$1" "$n")
    mariadb --socket="$dir/my-$p/sock" -e "SET GLOBAL rpl_semi_sync_slave_enabled=ON; CHANGE MASTER TO master_host='$mh', master_port=$mp, master_user='repl', master_password='$pw', master_use_gtid=slave_pos; START SLAVE;" &
  done
  wait
  for n in $(seq 1 $((nodes - 1))); do
    local p; p=$(node_port "$1" "$n")
    for _ in $(seq 1 300); do
      [ "$(mariadb --socket="$dir/my-$p/sock" -e 'SHOW SLAVE STATUS\G' | grep -cE 'Slave_(IO|SQL)_Running: Yes')" = 2 ] && continue 2; sleep 0.1
    done
    echo "standby $p did not start replicating" >&2; return 1
  done
}

install_comp() { # comp
  local h p d; h=$(comp_host "$1"); p=$(comp_port "$1"); d=$dir/pg-$p
  mkdir -p "$d"; echo "$pw" > "$d/pw"; chown -R postgres "$d"; chmod 700 "$d"
  runuser -u postgres -- "$pgbin/initdb" -D "$d/data" -A scram-sha-256 --pwfile="$d/pw" -U postgres > "$d/initdb.log" 2>&1
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$d/data" -l "$d/log" -o "-p $p -c listen_addresses=$h -c unix_socket_directories=$d" -w start > /dev/null
  local sql="CREATE ROLE computer LOGIN SUPERUSER PASSWORD '$pw'; CREATE EXTENSION mysql_fdw;"
  for s in $(seq 0 $((shards - 1))); do
    sql+=" CREATE SERVER shard_$s FOREIGN DATA WRAPPER mysql_fdw OPTIONS (host '$(node_host "$s" 0)', port '$(node_port "$s" 0)');"
    sql+=" CREATE USER MAPPING FOR computer SERVER shard_$s OPTIONS (username 'storage', password '$pw');"
  done
  PGPASSWORD=$pw psql -q -h "$d" -p "$p" -U postgres -d postgres -c "$sql" > /dev/null
}

# Waits for every background job; fails if any failed (a bare `wait` forgets their status).
wait_all() { local pid failed=0; for pid in $(jobs -p); do wait "$pid" || failed=1; done; return $failed; }
phase() { echo "$(date +%s.%N) $1" >&2; }

case $action in
  up)
    mkdir -p "$dir"
    phase 'install storage nodes'
    for s in $(seq 0 $((shards - 1))); do for n in $(seq 0 $((nodes - 1))); do install_node "$s" "$n" & done; done; wait_all
    phase 'set up replication'
    for s in $(seq 0 $((shards - 1))); do attach_shard "$s" & done; wait_all
    phase 'install compute nodes'
    for c in $(seq 0 $((comps - 1))); do install_comp "$c" & done; wait_all
    phase done
    ;;
  down)
    for d in "$dir"/pg-*; do [ -d "$d" ] && runuser -u postgres -- "$pgbin/pg_ctl" -D "$d/data" -m immediate stop > /dev/null 2>&1 || true; done
    for d in "$dir"/my-*; do [ -f "$d/pid" ] && kill -9 "$(cat "$d/pid")" 2> /dev/null || true; done
    rm -rf "$dir"
    ;;
esac
