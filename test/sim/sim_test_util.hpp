// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Scripted endpoints for the fabric's own unit tests. They exercise the sim
// only; engine tests must drive real engines through the fabric.
#pragma once

#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <vector>

#include "fabric.hpp"

namespace simtest {

using namespace mroce;
using namespace mroce::sim;

inline const uint8_t* zero_payload() {
    static uint8_t bytes[16384] = {};
    return bytes;
}

// A datagram of total_len bytes (16-byte header + payload) whose first four
// header bytes carry `tag`, so receivers can tell packets apart.
inline TxPacket make_packet(HostId peer, uint32_t total_len, uint32_t tag, uint8_t ect = 1, uint16_t path = 0,
                            uint16_t entropy = 0) {
    TxPacket p;
    p.peer = peer;
    p.path = path;
    p.entropy = entropy;
    p.ect = ect;
    p.hdr_len = 16;
    std::memset(p.hdr, 0, sizeof p.hdr);
    std::memcpy(p.hdr, &tag, sizeof tag);
    p.payload_len = total_len > 16 ? total_len - 16 : 0;
    p.payload = zero_payload();
    return p;
}

struct Received {
    Time t;
    uint32_t len;
    uint32_t peer;
    uint16_t path;
    uint8_t ce;
    uint32_t tag;
};

class ScriptedEndpoint : public Endpoint {
public:
    std::vector<Received> rx;
    std::vector<size_t> rx_burst_sizes;
    std::vector<size_t> tx_burst_sizes;
    std::vector<Time> tx_burst_times;
    std::deque<TxPacket> outq;     // sent as fast as tx_burst is called
    Time deadline = kNever;        // returned by next_deadline while in the future
    Time release_at = 0;           // outq is held until this time

    void rx_burst(const RxPacket* pkts, size_t n, Time now) override {
        rx_burst_sizes.push_back(n);
        for (size_t i = 0; i < n; ++i) {
            uint32_t tag;
            std::memcpy(&tag, pkts[i].data, sizeof tag);
            rx.push_back(Received{now, pkts[i].len, pkts[i].peer, pkts[i].local_path, pkts[i].ce, tag});
        }
    }
    size_t tx_burst(TxPacket* out, size_t max, Time now) override {
        tx_burst_sizes.push_back(0);
        tx_burst_times.push_back(now);
        if (now < release_at) return 0;
        size_t n = 0;
        while (n < max && !outq.empty()) {
            out[n++] = outq.front();
            outq.pop_front();
        }
        tx_burst_sizes.back() = n;
        return n;
    }
    Time next_deadline(Time now) override {
        if (!outq.empty() && release_at > now) return release_at;
        return deadline > now ? deadline : kNever;
    }
};

// Endpoints that keep `window` packets outstanding toward one peer and echo
// a 64-byte ack for every packet received: a closed loop that exercises
// every part of the fabric.
class WindowEndpoint : public Endpoint {
public:
    WindowEndpoint(HostId peer, uint32_t window, uint32_t total, uint16_t paths)
        : peer_(peer), window_(window), total_(total), paths_(paths) {}
    uint32_t acked = 0, sent = 0, received = 0;

    void rx_burst(const RxPacket* pkts, size_t n, Time) override {
        for (size_t i = 0; i < n; ++i) {
            if (pkts[i].len == 64) {
                if (acked < sent) ++acked;
            } else {
                ++received;
                ++acks_owed_[pkts[i].peer];
            }
        }
    }
    size_t tx_burst(TxPacket* out, size_t max, Time now) override {
        if (sent - acked < window_) stalled_since_ = kNever;
        if (sent - acked >= window_ && stalled_since_ != kNever && now >= stalled_since_ + kForgiveAfter) {
            acked = sent;  // stands in for a loss timeout, so losses never stall the loop
            stalled_since_ = kNever;
        }
        size_t k = 0;
        for (auto it = acks_owed_.begin(); it != acks_owed_.end() && k < max;) {
            while (it->second && k < max) {
                out[k] = make_packet(it->first, 64, 0, 0, uint16_t(k % paths_), uint16_t(k));
                ++k;
                --it->second;
            }
            it = it->second ? std::next(it) : acks_owed_.erase(it);
        }
        while (k < max && sent < total_ && sent - acked < window_) {
            const uint16_t path = uint16_t(sent % paths_);
            out[k++] = make_packet(peer_, 1000 + 16 * path, sent, 1, path, uint16_t(sent * 7));
            ++sent;
        }
        if (sent < total_ && sent - acked >= window_ && stalled_since_ == kNever) stalled_since_ = now;
        return k;
    }
    Time next_deadline(Time) override {
        return stalled_since_ != kNever ? stalled_since_ + kForgiveAfter : kNever;
    }

private:
    HostId peer_;
    uint32_t window_, total_;
    uint16_t paths_;
    static constexpr Time kForgiveAfter = 50'000;
    Time stalled_since_ = kNever;
    std::map<HostId, uint32_t> acks_owed_;
};

}  // namespace simtest
