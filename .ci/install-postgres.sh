#!/usr/bin/env bash
# Install PostgreSQL server binaries (Debian package) for the state-store contract tests.
#
# Only the binaries are needed: tests/state/conftest.py creates a throwaway cluster with
# initdb/pg_ctl in a temporary directory and removes it afterwards. So this script does not
# create the package's default cluster and never starts a system service.
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null; then
    echo "install-postgres: PostgreSQL server binaries already present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

# No default 'main' cluster: nothing to start, nothing listening on 5432. A drop-in, because
# createcluster.conf itself is managed by ucf and a pre-existing copy would make it prompt.
$SUDO mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.d/sharesync-ci.conf >/dev/null

# Keep package scripts from starting services (containers without an init system, CI hosts).
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod +x "$POLICY"
    ADDED_POLICY=1
fi
cleanup() {
    if [ "$ADDED_POLICY" -eq 1 ]; then
        $SUDO rm -f "$POLICY"
    fi
}
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql >/dev/null

ls -d /usr/lib/postgresql/*/bin/initdb
echo "install-postgres: installed; tests start their own cluster"
