# Free loopback ports for e2e/cluster.sh, e2e/up and e2e/tracing/run (sourced; the caller defines `die`).
# shellcheck shell=bash

# All local TCP ports in use (any state, IPv4 and IPv6), one per line, decimal.
used_ports() {
  local f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [[ -r "$f" ]] || continue
    awk 'NR > 1 { split($2, a, ":"); print a[2] }' "$f"
  done | while read -r hex; do echo $((16#$hex)); done | sort -un
}

# free_port VAR: set VAR to a port that nothing uses and that this run has
# not handed out yet, below the kernel's ephemeral range (so that outgoing
# connections never take it in the meantime).
PICKED=" "
free_port() {
  local used p i lo=20000 hi=32768 eph_lo=32768
  if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
    read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range
  fi
  ((eph_lo < hi)) && hi=$eph_lo
  ((hi - lo < 2000)) && lo=$((hi > 12000 ? hi - 10000 : 1024))
  used=" $(used_ports | tr '\n' ' ') "
  for ((i = 0; i < 200; i++)); do
    p=$((lo + RANDOM % (hi - lo)))
    if [[ "$used" != *" $p "* && "$PICKED" != *" $p "* ]]; then
      PICKED+="$p "
      printf -v "$1" '%s' "$p"
      return 0
    fi
  done
  die "found no free port"
}
