#!/bin/sh
# prerm of jetfleet-agent and jetfleet-controller: on removal, stop and disable the unit
# while its file is still there (an upgrade keeps it running until postinst restarts it).
set -e

PKG="${DPKG_MAINTSCRIPT_PACKAGE:?run by dpkg only}"
UNIT="$PKG.service"
ROOT_OPT="${DPKG_ROOT:+--root=$DPKG_ROOT}"

case "$1" in
remove)
    if [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ]; then
        systemctl stop "$UNIT" || true
    fi
    # shellcheck disable=SC2086
    systemctl $ROOT_OPT disable "$UNIT" >/dev/null 2>&1 || true
    ;;
esac
exit 0
