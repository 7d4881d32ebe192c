#!/bin/sh
# prerm of kcm-manager and kcm-agent: on removal, stop the daemons whose program is about to
# go (an upgrade leaves them running: restarting each host in turn is the upgrade procedure's
# step, docs/upgrade.md). Stopping the agent leaves its database instances running
# (KillMode=process). Configuration and state under /etc/kcm and /var/lib/kcm are kept, also
# on purge: they hold the cluster's certificates, keys and Raft data.
set -e

if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  case "$DPKG_MAINTSCRIPT_PACKAGE" in
    kcm-manager) systemctl stop 'kcm-manager@*.service' >/dev/null 2>&1 || true ;;
    kcm-agent) systemctl stop kcm-agent.service >/dev/null 2>&1 || true ;;
  esac
fi
exit 0
