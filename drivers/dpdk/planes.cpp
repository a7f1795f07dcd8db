// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "mroce/dpdk/planes.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "mroce/wire.hpp"

namespace mroce::dpdk {
namespace {

constexpr size_t kChunk = 64;

// The fields the port reads, and the header bytes in use (not the whole 114 B array).
inline void copy_tx(TxPacket& d, const TxPacket& s, uint32_t peer) noexcept {
    d.peer = peer;
    d.path = s.path;
    d.entropy = s.entropy;
    d.hdr_len = s.hdr_len;
    d.ect = s.ect;
    d.plane = s.plane;
    d.payload_len = s.payload_len;
    d.payload = s.payload;
    std::memcpy(d.hdr, s.hdr, std::min<size_t>(s.hdr_len, sizeof d.hdr));
}

}  // namespace

PlanePorts::PlanePorts(std::vector<DpdkPort*> ports) : ports_(std::move(ports)) {
    const size_t np = ports_.size();
    if (np == 0 || np > wire::kMaxPlanes)
        throw DpdkError(fmt::format("PlanePorts: {} ports, 1..{} (one per plane)", np, wire::kMaxPlanes));
    uint32_t total = 0;
    for (size_t p = 0; p < np; ++p) {
        base_.push_back(total);
        total += uint32_t(ports_[p]->config().neighbours.size());
    }
    rx_map_.resize(total);
    joined_.assign(total, 0);
    nbr_.assign(size_t(total) * np, kNoPeer);
    home_.resize(total);
    for (size_t p = 0; p < np; ++p)
        for (uint32_t j = 0; j < ports_[p]->config().neighbours.size(); ++j) {
            const uint32_t h = base_[p] + j;
            rx_map_[h] = h;
            home_[h] = uint8_t(p);
            nbr_[size_t(h) * np + p] = j;
        }
    if (np == 1) one_ = ports_[0];
    if (np > 1) {
        gather_.resize(np * kChunk);
        gather_idx_.resize(np * kChunk);
        refused_.resize(kChunk);
    }
}

uint32_t PlanePorts::peer_of(size_t plane, uint32_t ip) const noexcept {
    if (plane >= ports_.size()) return kNoPeer;
    const uint32_t j = ports_[plane]->peer_of(ip);
    return j == UINT32_MAX ? kNoPeer : rx_map_[base_[plane] + j];
}

uint32_t PlanePorts::peer_of_any(uint32_t ip) const noexcept {
    for (size_t p = 0; p < ports_.size(); ++p)
        if (const uint32_t h = peer_of(p, ip); h != kNoPeer) return h;
    return kNoPeer;
}

bool PlanePorts::peer_address(uint32_t h, uint32_t& ip, size_t& plane) const noexcept {
    if (h >= home_.size()) return false;
    plane = home_[h];
    ip = ports_[plane]->config().neighbours[nbr_[size_t(h) * ports_.size() + plane]].ip;
    return true;
}

size_t PlanePorts::peer_planes(uint32_t h) const noexcept {
    if (h >= home_.size()) return 0;
    size_t n = 0;
    for (size_t p = 0; p < ports_.size(); ++p) n += nbr_[size_t(h) * ports_.size() + p] != kNoPeer;
    return n;
}

// Address (plane, nbr) belongs to handle h: h sends there, and what comes
// from there is h's unless the address is already another peer's.
void PlanePorts::join(uint32_t h, size_t plane, uint32_t nbr) noexcept {
    nbr_[size_t(h) * ports_.size() + plane] = nbr;
    const uint32_t a = base_[plane] + nbr;
    if (!joined_[a]) {
        joined_[a] = 1;
        rx_map_[a] = h;
    }
}

uint32_t PlanePorts::add_peer(const uint32_t* ips, size_t n, uint8_t& known) {
    if (n == 0 || n > wire::kMaxPlanes)
        throw DpdkError(fmt::format("{} peer addresses, 1..{} (one per plane)", n, wire::kMaxPlanes));
    const size_t np = ports_.size();
    if (np == 1 || n == 1) {
        const uint32_t h = np == 1 ? peer_of(0, ips[0]) : peer_of_any(ips[0]);
        if (h == kNoPeer)
            throw DpdkError(fmt::format("peer {} is not in the static neighbour table{} (key 'neighbours': "
                                        "'IP MAC, ...'{})", format_ipv4(ips[0]), np > 1 ? " of any plane" : "",
                                        np > 1 ? ", one table per plane separated by '|'" : ""));
        known = 1;
        return h;
    }
    const size_t m = std::min(n, np);
    uint32_t nbr[wire::kMaxPlanes] = {};
    for (size_t p = 0; p < m; ++p) {
        nbr[p] = ports_[p]->peer_of(ips[p]);
        if (nbr[p] == UINT32_MAX)
            throw DpdkError(fmt::format("peer address {} (plane {}) is not in plane {}'s neighbour table (key "
                                        "'neighbours': one table per plane separated by '|', plane 0 first)",
                                        format_ipv4(ips[p]), p, p));
    }
    const uint32_t h = rx_map_[base_[0] + nbr[0]];
    for (size_t p = 0; p < m; ++p) join(h, p, nbr[p]);
    known = uint8_t(m);
    return h;
}

// R-PLANE-1: the plane block of a CONNECT_* tells where the peer is on each
// plane; taken only from a valid block that lists the address it came from.
void PlanePorts::learn(size_t plane, uint32_t from_nbr, uint32_t h, const RxPacket& r) noexcept {
    wire::PlaneAddr pa[wire::kMaxPlanes];
    const size_t k = wire::parse_plane_block({r.data + wire::kConnectLen, r.len - wire::kConnectLen}, pa);
    if (k == 0) return;
    const uint32_t from_ip = ports_[plane]->config().neighbours[from_nbr].ip;
    bool from_ok = false;
    for (size_t i = 0; i < k; ++i) from_ok |= pa[i].ipv4 == from_ip;
    if (!from_ok) return;
    const size_t m = std::min(k, ports_.size());
    for (size_t p = 0; p < m; ++p) {
        const uint32_t j = ports_[p]->peer_of(pa[p].ipv4);
        if (j != UINT32_MAX) join(h, p, j);
    }
    ++learned_;
}

size_t PlanePorts::tx_burst_planes(const TxPacket* pkts, size_t n, uint32_t* unsent) noexcept {
    const size_t np = ports_.size();
    const uint32_t nh = uint32_t(home_.size());
    size_t done = 0, nunsent = 0;
    size_t cnt[wire::kMaxPlanes];
    for (size_t base = 0; base < n; base += kChunk) {
        const size_t m = std::min(n - base, kChunk);
        std::fill(cnt, cnt + np, size_t(0));
        for (size_t i = 0; i < m; ++i) {
            const TxPacket& p = pkts[base + i];
            size_t q = p.plane < np ? p.plane : 0;
            uint32_t j = UINT32_MAX;   // a bad handle: the port counts it (tx_bad_peer)
            if (p.peer < nh) {
                j = nbr_[size_t(p.peer) * np + q];
                if (j == kNoPeer) {   // the peer's address on that plane is not known: its own plane
                    q = home_[p.peer];
                    j = nbr_[size_t(p.peer) * np + q];
                }
            }
            const size_t g = q * kChunk + cnt[q]++;
            copy_tx(gather_[g], p, j);
            gather_idx_[g] = uint32_t(base + i);
        }
        for (size_t q = 0; q < np; ++q) {
            if (cnt[q] == 0) continue;
            const size_t s = ports_[q]->tx_burst_paths(&gather_[q * kChunk], cnt[q], refused_.data());
            done += s;
            for (size_t r = 0; r < cnt[q] - s; ++r) unsent[nunsent++] = gather_idx_[q * kChunk + refused_[r]];
        }
    }
    // Planes were visited in turn: the refused indices back into order (few, usually none).
    for (size_t i = 1; i < nunsent; ++i)
        for (size_t j = i; j > 0 && unsent[j - 1] > unsent[j]; --j) std::swap(unsent[j - 1], unsent[j]);
    return done;
}

size_t PlanePorts::rx_burst_planes(RxPacket* out, size_t max) noexcept {
    const size_t np = ports_.size();
    size_t k = 0;
    const size_t first = rx_next_;
    rx_next_ = (rx_next_ + 1) % np;
    for (size_t i = 0; i < np; ++i) {
        // A port polled with no room left would release what the caller still holds.
        if (k == max) break;
        const size_t q = (first + i) % np;
        const size_t got = ports_[q]->rx_burst_queues(out + k, max - k);
        for (size_t x = k; x < k + got; ++x) {
            RxPacket& r = out[x];
            const uint32_t j = r.peer;
            const uint32_t h = rx_map_[base_[q] + j];
            r.peer = h;
            r.plane = uint8_t(q);
            // A handshake with a plane block (R-PLANE-1): rare, never a data packet.
            if (r.len > wire::kConnectLen && r.len2 == 0 && r.data[0] == wire::kVersion &&
                (r.data[1] == uint8_t(wire::PacketType::connect_req) ||
                 r.data[1] == uint8_t(wire::PacketType::connect_ack))) [[unlikely]]
                learn(q, j, h, r);
        }
        k += got;
    }
    return k;
}

void PlanePorts::rx_release_all() noexcept {
    for (DpdkPort* p : ports_) p->rx_release_all();
}

}  // namespace mroce::dpdk
