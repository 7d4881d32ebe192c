#!/usr/bin/env bash
# Builds kcm-manager, kcm-agent and kcm-cli Debian packages into <outdir>:
#   scripts/release/build-packages.sh <outdir>
# Needs the repository's npm dependencies (esbuild, tsx: build time only), dpkg-deb, and for
# kcm_ddl gcc, make, postgresql-server-dev-15 and libmariadb-dev (scripts/setup.sh installs them).
# The file layout of each package is in build-packages.ts's header and docs/install-packages.md.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: scripts/release/build-packages.sh <outdir>" >&2
  exit 2
fi
outdir="$(mkdir -p "$1" && cd "$1" && pwd)"
cd "$(dirname "$0")/../.."
exec node --import tsx scripts/release/build-packages.ts "$outdir"
