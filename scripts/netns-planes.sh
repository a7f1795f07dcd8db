#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026 The mroce authors
#
# A multi-plane test fabric in network namespaces: H hosts, P planes, one
# router namespace per plane, a veth from every host to every plane's router.
#
#   host i, plane p:  interface pl<p> with 10.<p+1>.<i>.2/24, router side 10.<p+1>.<i>.1,
#   MTU 9000
#   host i, "host address" 10.0.0.<i+1>/32 on lo (what a one-address device binds),
#   reached from every other host by an ECMP route over all planes, hashed on the
#   L4 header (net.ipv4.fib_multipath_hash_policy = 1): a UDP source port (a path's
#   entropy) chooses the plane;
#   every host reaches every other host's plane address 10.<p+1>.<j>.2 through plane p only.
#
# Namespaces are named <TAG>h<i> (hosts) and <TAG>r<p> (plane routers).
#
#   netns-planes.sh up TAG PLANES [HOSTS]   build it (HOSTS default 2)
#   netns-planes.sh down TAG                remove every namespace of TAG
#   netns-planes.sh fail TAG P[,P...]       plane P black-holes: its router's links go
#                                           down, the hosts' ends keep carrier, so hosts
#                                           keep hashing flows onto it (a silent failure)
#   netns-planes.sh heal TAG P[,P...]       plane P forwards again (routes re-added: an
#                                           ECMP route whose next hops all went down is gone)
#   netns-planes.sh loss TAG P PERMILLE     drop PERMILLE/1000 of the UDP packets plane P
#                                           forwards (0: none)
#   netns-planes.sh ce TAG P on|off         plane P marks every ECN-capable packet CE
#   netns-planes.sh count TAG P             packets plane P's loss and CE rules matched: "DROPPED MARKED"
#   netns-planes.sh exec TAG I CMD...       run CMD in host I's namespace
#
# The kernel here has no qdiscs: loss and marking are nftables rules in the
# router's forward chain (nftables 1.0.6 wants `meta l4proto udp` before numgen).
set -euo pipefail

cmd=${1:?usage: netns-planes.sh up|down|fail|heal|loss|ce|count|exec TAG ...}
tag=${2:?TAG}
meta() { cat "/run/mroce-planes-$tag" 2>/dev/null || echo "0 0"; }

host_routes() {  # host i: ECMP routes to the other hosts' host addresses, over live planes (ip -batch lines)
    local i=$1 planes=$2 hosts=$3 j p hops
    for ((j = 0; j < hosts; j++)); do
        ((j == i)) && continue
        hops=""
        for ((p = 0; p < planes; p++)); do
            hops+=" nexthop via 10.$((p + 1)).$i.1 dev pl$p weight 1"
        done
        echo "route replace 10.0.0.$((j + 1))/32 $hops"
        for ((p = 0; p < planes; p++)); do
            echo "route replace 10.$((p + 1)).$j.0/24 via 10.$((p + 1)).$i.1 dev pl$p"
        done
    done
}

router_routes() {  # plane p: every host's host address through its link (ip -batch lines)
    local p=$1 hosts=$2 i
    for ((i = 0; i < hosts; i++)); do
        echo "route replace 10.0.0.$((i + 1))/32 via 10.$((p + 1)).$i.2 dev h$i"
    done
}

# Fail and heal run one `ip -batch` per namespace touched: on a loaded host
# each `ip` process costs tens of ms, and a test's outage must last what it
# says, not what the commands took.
plane_list() {  # "0,2" -> "0 2"
    echo "${1//,/ }"
}

nft_router() {  # the plane's loss and CE rules, both off
    local p=$1
    ip netns exec "${tag}r$p" nft -f - <<EOF
table inet mrplane {
    chain planefwd {
        type filter hook forward priority 0; policy accept;
        meta l4proto udp numgen random mod 1000 < 0 counter drop comment "loss"
        ip ecn != not-ect counter comment "ce"
    }
}
EOF
}

set_rule() {  # set_rule P COMMENT RULE...: replaces the rule with that comment
    local p=$1 comment=$2
    shift 2
    local h
    h=$(ip netns exec "${tag}r$p" nft -a list chain inet mrplane planefwd | sed -n "s/.*comment \"$comment\" # handle \([0-9]*\)/\1/p")
    ip netns exec "${tag}r$p" nft replace rule inet mrplane planefwd handle "$h" "$@" comment "\"$comment\""
}

# ARP retries 1 s apart (the kernel's default retrans_time) would make a healed
# plane's recovery a measure of the neighbour table: a request sent while the
# link was down, or before the far end came up, is repeated only a second
# later. The fabric's part of a heal is a few ms with 20 ms retries; what the
# tests measure is the transport's. Per device: a namespace other than the
# first has no neigh/default of its own.
neigh_fast() {  # namespace
    ip netns exec "$1" sh -c 'for f in /proc/sys/net/ipv4/neigh/*/retrans_time_ms; do echo 20 >"$f"; done'
}

case "$cmd" in
up)
    planes=${3:?PLANES}
    hosts=${4:-2}
    for ((i = 0; i < hosts; i++)); do
        ip netns add "${tag}h$i"
        ip -n "${tag}h$i" link set lo up
        ip -n "${tag}h$i" addr add "10.0.0.$((i + 1))/32" dev lo
        ip netns exec "${tag}h$i" sysctl -qw net.ipv4.fib_multipath_hash_policy=1
    done
    for ((p = 0; p < planes; p++)); do
        r="${tag}r$p"
        ip netns add "$r"
        ip -n "$r" link set lo up
        ip netns exec "$r" sysctl -qw net.ipv4.ip_forward=1
        for ((i = 0; i < hosts; i++)); do
            ip link add "${tag}x" netns "${tag}h$i" type veth peer name "${tag}y" netns "$r"
            ip -n "${tag}h$i" link set "${tag}x" name "pl$p"
            ip -n "$r" link set "${tag}y" name "h$i"
            ip -n "${tag}h$i" addr add "10.$((p + 1)).$i.2/24" dev "pl$p"
            ip -n "$r" addr add "10.$((p + 1)).$i.1/24" dev "h$i"
            # Jumbo frames: a device bound to the host address (on lo, MTU 65536)
            # sizes its segments to 8192 (R-SEG-4), which must fit every plane.
            ip -n "${tag}h$i" link set "pl$p" mtu 9000 up
            ip -n "$r" link set "h$i" mtu 9000 up
        done
        router_routes "$p" "$hosts" | ip -n "$r" -batch -
        nft_router "$p"
    done
    for ((i = 0; i < hosts; i++)); do host_routes "$i" "$planes" "$hosts" | ip -n "${tag}h$i" -batch -; done
    for ((i = 0; i < hosts; i++)); do neigh_fast "${tag}h$i"; done
    for ((p = 0; p < planes; p++)); do neigh_fast "${tag}r$p"; done
    echo "$planes $hosts" >"/run/mroce-planes-$tag"
    ;;
down)
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${tag}[hr][0-9]+$" || true); do ip netns del "$ns"; done
    rm -f "/run/mroce-planes-$tag"
    ;;
fail)
    read -r planes hosts <<<"$(meta)"
    for p in $(plane_list "${3:?P}"); do
        for ((i = 0; i < hosts; i++)); do echo "link set h$i down"; done | ip -n "${tag}r$p" -batch -
    done
    ;;
heal)
    read -r planes hosts <<<"$(meta)"
    for p in $(plane_list "${3:?P}"); do
        { for ((i = 0; i < hosts; i++)); do echo "link set h$i up"; done; router_routes "$p" "$hosts"; } |
            ip -n "${tag}r$p" -batch -
    done
    for ((i = 0; i < hosts; i++)); do host_routes "$i" "$planes" "$hosts" | ip -n "${tag}h$i" -batch -; done
    ;;
loss)
    p=${3:?P}
    set_rule "$p" loss meta l4proto udp numgen random mod 1000 "<" "${4:?PERMILLE}" counter drop
    ;;
ce)
    p=${3:?P}
    if [[ ${4:?on|off} == on ]]; then set_rule "$p" ce ip ecn != not-ect counter ip ecn set ce
    else set_rule "$p" ce ip ecn != not-ect counter; fi
    ;;
count)
    p=${3:?P}
    ip netns exec "${tag}r$p" nft list chain inet mrplane planefwd |
        awk '/comment "loss"/ {for (k = 1; k <= NF; k++) if ($k == "packets") d = $(k + 1)}
             /comment "ce"/ && /set ce/ {for (k = 1; k <= NF; k++) if ($k == "packets") m = $(k + 1)}
             END {print d + 0, m + 0}'
    ;;
exec)
    i=${3:?I}
    shift 3
    exec ip netns exec "${tag}h$i" "$@"
    ;;
*)
    echo "netns-planes.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
