#!/bin/sh
# Issues kcm's mutual-TLS material with openssl: a cluster CA (once), then one certificate
# per process. The same commands `kcm local up` runs (libs/agent-api/src/tls/issue.ts).
#
#   deploy/tls/issue-certs.sh <dir> ca                       create <dir>/ca.pem, ca.key (kept if present)
#   deploy/tls/issue-certs.sh <dir> manager <name> <ip|dns>... a manager certificate <dir>/<name>.pem, .key
#   deploy/tls/issue-certs.sh <dir> agent <name> <ip|dns>...   an agent certificate
#
# A certificate's role is its SAN URI urn:kcm:role:manager or urn:kcm:role:agent; its other
# SANs are the addresses peers dial (a manager's member host, an agent's hostaddr). Keys are
# EC P-256, mode 0600. Keep ca.key offline: only issuing needs it.
set -eu
umask 077
dir=$1; what=$2; shift 2
mkdir -p "$dir"
case "$what" in
  ca)
    if [ -f "$dir/ca.pem" ]; then echo "kept $dir/ca.pem"; exit 0; fi
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" \
      -days "${DAYS:-3650}" -subj "${SUBJECT:-/CN=kcm cluster CA}" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
    echo "created $dir/ca.pem"
    ;;
  manager|agent)
    name=$1; shift
    [ $# -gt 0 ] || { echo "name at least one IP address or DNS name for $name" >&2; exit 2; }
    sans="URI:urn:kcm:role:$what"
    for h in "$@"; do
      case "$h" in *[!0-9.:a-fA-F]*) sans="$sans,DNS:$h" ;; *) sans="$sans,IP:$h" ;; esac
    done
    ext=$(mktemp)
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$sans" > "$ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name/OU=$what"
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
      -days "${DAYS:-825}" -extfile "$ext" -out "$dir/$name.pem"
    rm -f "$ext" "$dir/$name.csr"
    chmod 600 "$dir/$name.key"
    echo "issued $dir/$name.pem ($what: $*)"
    ;;
  *) echo "usage: $0 <dir> ca | manager <name> <host>... | agent <name> <host>..." >&2; exit 2 ;;
esac
