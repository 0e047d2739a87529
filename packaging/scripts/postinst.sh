#!/bin/sh
# postinst of jetfleet-agent and jetfleet-controller (the package name comes from dpkg).
# Creates the jetfleet user and the state directories, enables the unit on first install
# (never starts it: the operator configures first), restarts it on upgrade when it runs.
# Honours $DPKG_ROOT so that `dpkg --root DIR --force-script-chrootless` installs offline.
set -e

PKG="${DPKG_MAINTSCRIPT_PACKAGE:?run by dpkg only}"
UNIT="$PKG.service"
ROOT_OPT="${DPKG_ROOT:+--root=$DPKG_ROOT}"

case "$1" in
configure)
    # shellcheck disable=SC2086
    systemd-sysusers $ROOT_OPT "$PKG.conf"
    # shellcheck disable=SC2086
    systemd-tmpfiles $ROOT_OPT --create "$PKG.conf"
    if [ -z "$2" ]; then
        # shellcheck disable=SC2086
        systemctl $ROOT_OPT enable "$UNIT"
    fi
    if [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ]; then
        systemctl daemon-reload
        if [ -n "$2" ]; then
            systemctl try-restart "$UNIT"
        else
            echo "$PKG: edit /etc/jetfleet, then: systemctl start $UNIT"
        fi
    fi
    ;;
esac
exit 0
