#!/bin/sh
# postinst of jetfleet-agent and jetfleet-controller (the package name comes from dpkg).
# Creates the jetfleet user and the state directories, enables the unit on first install
# (never starts it: the operator configures first), restarts it on upgrade when it runs; an
# agent upgrade makes the packaged release the one that runs unless the fleet's is newer.
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
    if [ "$PKG" = jetfleet-agent ] && [ -n "$2" ] && [ -z "$DPKG_ROOT" ]; then
        # An upgrade by apt is the operator's choice: the packaged release runs from now on,
        # unless the fleet already switched this gateway to a newer one. As the agent's user:
        # root acts on nothing in the agent's state directory (docs/agent-updates.md).
        version=$(dpkg-query -W -f='${Version}' jetfleet-agent | sed 's/-[^-]*$//')
        runuser -u jetfleet -- /usr/lib/jetfleet/agent-launch --factory-installed "$version" || true
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
