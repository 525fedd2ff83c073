#!/usr/bin/env bash
# Delete the host-port DNAT rules netavark made for the given containers (full IDs), and
# their NETAVARK-DN-* chains, from the nat table. netavark removes them when a container's
# network is torn down; a container whose engine was killed under it (a simulated reboot, a
# killed test session) keeps them, and a later program that gets the same port on 127.0.0.1
# (a gloo or TCPStore listener) then has its connections sent to the dead container's
# address and time out. A real reboot empties the kernel's rules; this does it for one engine.
#
#   scripts/drop-podman-dnat.sh CONTAINER_ID...
# Needs iptables (the backend netavark uses here) and root; without them it does nothing.
command -v iptables >/dev/null || exit 0
[ $# -gt 0 ] || exit 0
rules=$(iptables -t nat -S NETAVARK-HOSTPORT-DNAT 2>/dev/null) || exit 0
for id in "$@"; do
  printf '%s\n' "$rules" | grep -F -- "id: $id\"" | while IFS= read -r rule; do
    chain=${rule##* -j }
    eval "iptables -t nat ${rule/#-A /-D }" 2>/dev/null  # the rule as iptables -S quotes it
    case $chain in NETAVARK-DN-*) iptables -t nat -F "$chain" 2>/dev/null; iptables -t nat -X "$chain" 2>/dev/null;; esac
  done
done
exit 0
