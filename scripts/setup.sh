#!/usr/bin/env bash
# Installs what kcm needs on a fresh Debian 12 machine, skipping what is present.
# Idempotent: safe to run before every `make run` / `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

# postgresql-plpython3-15 + python3-pymysql run kcm_ddl's triggers (DDL through compute nodes);
# postgresql-server-dev-15, libmariadb-dev (MariaDB's client headers), gcc and make build its small C part below.
# chromium: the web console's test drives it headless through playwright-core (test/console).
# iproute2: its `ss -K` closes a compute host's connections to a fenced old master (agent CutConnectionsTo).
debian_packages=(mariadb-server mariadb-backup zstd mariadb-client postgresql-15 postgresql-15-mysql-fdw postgresql-plpython3-15 python3-pymysql postgresql-server-dev-15 libmariadb-dev gcc make iptables iproute2 prometheus chromium)
# Optional: the etcd comparison of bench/raft-kv; installed when the package is available.
optional_packages=(etcd-server)

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=(); missing_optional=()
for pkg in "${debian_packages[@]}"; do is_installed "$pkg" || missing+=("$pkg"); done
for pkg in "${optional_packages[@]}"; do is_installed "$pkg" || missing_optional+=("$pkg"); done

if [ ${#missing[@]} -gt 0 ] || [ ${#missing_optional[@]} -gt 0 ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  echo "setup: installing Debian packages: ${missing[*]} ${missing_optional[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  if [ ${#missing[@]} -gt 0 ]; then
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # An optional package that cannot be had only disables the benchmark or check that uses it.
  for pkg in "${missing_optional[@]}"; do
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null || echo "setup: optional package $pkg unavailable; skipping"
  done
  # Packaged engines must not keep system-wide instances running: kcm's agent starts its own.
  for svc in mariadb postgresql etcd prometheus; do
    "${sudo_cmd[@]}" systemctl disable --now "$svc" >/dev/null 2>&1 || "${sudo_cmd[@]}" service "$svc" stop >/dev/null 2>&1 || true
  done
fi

# Every instance runs from a versioned engine directory that its agent fetches with `apt-get
# download` (docs/engine-versions.md); an install naming no version gets the installed build.
# So the apt lists must name the installed builds: an image may come without lists, or stale.
for pkg in mariadb-server-core postgresql-15; do
  installed="$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)"
  listed="$(apt-cache madison "$pkg" 2>/dev/null || true)"
  if [ -n "$installed" ] && ! grep -qF "| $installed |" <<<"$listed"; then
    echo "setup: refreshing the apt lists: they do not name the installed $pkg $installed, which kcm's agents fetch"
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    break
  fi
done

# kcm_ddl, the compute nodes' DDL extension: built with PGXS and installed next to
# PostgreSQL whenever its sources are newer than the installed library.
kcm_ddl_dir=services/agent/pg-ext/kcm_ddl
kcm_ddl_lib="$(/usr/lib/postgresql/15/bin/pg_config --pkglibdir)/kcm_ddl.so"
if [ ! -f "$kcm_ddl_lib" ] || [ -n "$(find "$kcm_ddl_dir" -newer "$kcm_ddl_lib" -type f \( -name '*.c' -o -name '*.h' -o -name '*.sql' -o -name '*.py' -o -name '*.control' -o -name Makefile \))" ]; then
  echo "setup: building and installing the kcm_ddl PostgreSQL extension"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  make -s -C "$kcm_ddl_dir" >/dev/null
  "${sudo_cmd[@]}" make -s -C "$kcm_ddl_dir" install >/dev/null
fi

# npm dependencies: install when node_modules is missing or older than the lock file.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm dependencies"
  npm ci --no-audit --no-fund --loglevel=error
fi
