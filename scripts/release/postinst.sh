#!/bin/sh
# postinst of kcm-manager and kcm-agent: the `kcm` system user and group, and the modes of
# kcm's configuration and state folders. The manager runs as kcm (kcm-manager@.service) and
# reads /etc/kcm through the group; the agent runs as root. Safe to run again (upgrades).
set -e

if [ "$1" = configure ]; then
  getent group kcm >/dev/null || groupadd --system kcm
  getent passwd kcm >/dev/null || useradd --system --gid kcm --home-dir /var/lib/kcm --no-create-home --shell /usr/sbin/nologin --comment 'kcm manager' kcm

  # Configuration: readable by the kcm group (the manager's config, certificates). Secret
  # files inside are the installer's to set: a manager's key and secrets.key kcm:kcm 0600.
  install -d -o root -g kcm -m 0750 /etc/kcm /etc/kcm/tls
  # State: each daemon's own folder, owner-only (both daemons run with umask 077 too).
  install -d -o root -g root -m 0755 /var/lib/kcm
  case "$DPKG_MAINTSCRIPT_PACKAGE" in
    kcm-manager) install -d -o kcm -g kcm -m 0700 /var/lib/kcm/manager ;;
    kcm-agent) install -d -o root -g root -m 0700 /var/lib/kcm/agent ;;
  esac

  if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || true; fi
fi
exit 0
