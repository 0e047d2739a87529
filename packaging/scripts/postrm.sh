#!/bin/sh
# postrm of jetfleet-agent and jetfleet-controller. `purge` deletes the agent's state
# (downloads and engines, all re-fetchable) but keeps the controller's database and
# artifact store, and keeps the jetfleet user (files elsewhere may still belong to it).
set -e

PKG="${DPKG_MAINTSCRIPT_PACKAGE:?run by dpkg only}"

case "$1" in
purge)
    if [ "$PKG" = jetfleet-agent ]; then
        rm -rf "${DPKG_ROOT}/var/lib/jetfleet/agent"
    else
        echo "$PKG: kept ${DPKG_ROOT}/var/lib/jetfleet/controller (database, artifacts); delete it by hand"
    fi
    rmdir "${DPKG_ROOT}/var/lib/jetfleet" 2>/dev/null || true
    ;;
esac
if [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
exit 0
