#!/usr/bin/env bash
# Build OpenLava (an open-source, LSF-compatible batch system: bsub, bjobs, bkill, bhosts,
# lshosts; LSF 4.x lineage, GPLv2) into OL_PREFIX, for the tx-scheduler-lsf tests. About 75 s
# on 2 cores, once: idempotent (nothing is done when $OL_PREFIX/sbin/mbatchd exists). Needs root
# (apt-get for the build tools, when missing). The source: OL_TARBALL, else
# vendor/openlava/openlava-69891d86.tar.gz in this repository (zjma/openlava at 69891d86,
# "OpenLava 4.0dev4"; a test backend, never part of tx's packages: vendor/openlava/README.md).
#
#   scripts/install-openlava.sh && eval "$(scripts/start-openlava.sh)"
#
# Env: OL_PREFIX (default /tmp/tx-openlava), OL_TARBALL, OL_CLUSTER (tx), OL_APT_UPDATE=1 runs
#      `apt-get update` first (by default only when the install fails).
set -euo pipefail
log() { echo "[install-openlava] $*" >&2; }
HERE=$(cd "$(dirname "$0")" && pwd)
OL_PREFIX=${OL_PREFIX:-/tmp/tx-openlava}
CLUSTER=${OL_CLUSTER:-tx}
# tx's fixes of OpenLava bugs that its tests meet (each patch's header says which); a build
# made without the current set is made again
PATCHES=("$HERE"/openlava-patches/*.patch)
PATCH_SUM=$(cat "${PATCHES[@]}" | sha256sum | cut -c1-16)
if [ -x "$OL_PREFIX/sbin/mbatchd" ] && [ "$(cat "$OL_PREFIX/.tx-patches" 2>/dev/null)" = "$PATCH_SUM" ]; then
  log "already built in $OL_PREFIX"
  exit 0
fi
TARBALL=${OL_TARBALL:-}
if [ -z "$TARBALL" ]; then
  for cand in "$HERE/../vendor/openlava" "$HERE/../../shared/vendor/openlava"; do
    if [ -f "$cand/openlava-69891d86.tar.gz" ]; then TARBALL="$cand/openlava-69891d86.tar.gz"; break; fi
  done
fi
if [ -z "$TARBALL" ] || [ ! -f "$TARBALL" ]; then
  log "OpenLava's source tarball not found: set OL_TARBALL to openlava-69891d86.tar.gz (vendor/openlava/ in the repository)"
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  log "building OpenLava needs its build tools (apt-get, as root) and its daemons run as root"
  exit 1
fi
packages=(autoconf automake libtool make gcc patch tcl-dev libncurses-dev bison flex libtirpc-dev)
export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# (no apt-get at all when every tool is there: .ci/run installs them first and then builds
# this in the background while other apt-get runs hold dpkg's lock)
install() { timeout 600 apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
if [ "${#missing[@]}" -eq 0 ]; then :
elif [ "${OL_APT_UPDATE:-0}" = 1 ]; then timeout 300 apt-get update -q >&2; install
elif ! install; then log "install failed; running apt-get update and trying again"; timeout 300 apt-get update -q >&2; install
fi
SRC=$(mktemp -d); trap 'rm -rf "$SRC"' EXIT
tar -xzf "$TARBALL" -C "$SRC"; cd "$SRC/openlava"
for p in "${PATCHES[@]}"; do patch -s -p1 < "$p"; done
sh bootstrap.sh >/dev/null 2>&1
# Debian 12: SunRPC lives in libtirpc; GCC >= 10 defaults to -fno-common (lim.h defines globals in a header)
./configure --prefix="$OL_PREFIX" openlavaadmin=root openlavacluster="$CLUSTER" \
    CPPFLAGS=-I/usr/include/tirpc LIBS=-ltirpc CFLAGS=-fcommon >/dev/null
make -j"$(nproc)" >/dev/null 2>&1
make install >/dev/null
for f in lsf.conf lsf.cluster.$CLUSTER lsf.shared lsf.task lsb.hosts lsb.params lsb.queues lsb.users lsb.resources openlava.sh; do
  cp "config/$f" "$OL_PREFIX/etc/"
done
echo "$PATCH_SUM" > "$OL_PREFIX/.tx-patches"
log "built OpenLava in $OL_PREFIX"
