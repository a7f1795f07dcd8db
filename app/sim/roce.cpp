// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The RoCEv2 baseline endpoint (roce.hpp says what it is and is not). Written
// for clarity over speed: it is a reference to compare against, not a
// transport anyone should run.
#include "roce.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mroce::simapp {

namespace {

enum : uint8_t { kData = 1, kAck = 2, kNak = 3, kCnp = 4 };

// The baseline's own header (BTH-like: opcode, PSN; a flag for the last
// packet of a message). Not mroce's wire format.
struct Header {
    uint8_t type;
    uint8_t last;
    uint16_t pad;
    uint32_t psn;
    uint32_t len;
    uint32_t pad2;
};
static_assert(sizeof(Header) == 16);

// DCQCN parameters (Zhu et al. 2015, Table 1), rates scaled to the line rate.
constexpr double kG = 1.0 / 256;
constexpr Time kAlphaTimer = 55'000;
constexpr Time kRateTimer = 55'000;
constexpr uint64_t kByteCounter = 10ull << 20;
constexpr uint32_t kFastRecoverySteps = 5;
constexpr Time kCnpInterval = 50'000;

}  // namespace

RoceEndpoint::RoceEndpoint(const RoceSpec& spec, uint64_t line_rate_bps)
    : spec_(spec), line_bps_(double(line_rate_bps)), zeros_(spec.mtu, 0) {}

void RoceEndpoint::create_qp(uint32_t peer, uint16_t entropy) {
    if (by_peer_.count(peer)) return;
    Qp q;
    q.peer = peer;
    q.entropy = entropy;
    q.rc = q.rt = line_bps_;
    by_peer_[peer] = uint32_t(qps_.size());
    qps_.push_back(q);
}

uint64_t RoceEndpoint::rx_bytes_from(uint32_t peer) const {
    const auto it = by_peer_.find(peer);
    return it == by_peer_.end() ? 0 : qps_[it->second].rx_payload_bytes;
}

RoceEndpoint::Qp* RoceEndpoint::find(uint32_t peer) {
    const auto it = by_peer_.find(peer);
    return it == by_peer_.end() ? nullptr : &qps_[it->second];
}

void RoceEndpoint::post_write(uint32_t peer, uint64_t bytes, uint64_t tag) {
    Qp* q = find(peer);
    if (!q) throw std::logic_error("roce: no QP to that peer");
    const uint32_t packets = uint32_t(std::max<uint64_t>(1, (bytes + spec_.mtu - 1) / spec_.mtu));
    q->msgs.push_back(Message{tag, q->end_psn, q->end_psn + packets - 1, bytes});
    q->end_psn += packets;
}

size_t RoceEndpoint::take_completions(std::vector<Completion>& out) {
    const size_t n = done_.size();
    out.insert(out.end(), done_.begin(), done_.end());
    done_.clear();
    return n;
}

uint32_t RoceEndpoint::payload_of(const Qp& q, uint32_t psn, bool& last) const {
    const auto it = std::lower_bound(q.msgs.begin(), q.msgs.end(), psn,
                                     [](const Message& m, uint32_t p) { return m.last_psn < p; });
    last = psn == it->last_psn;
    if (!last) return spec_.mtu;
    return uint32_t(it->bytes - uint64_t(it->last_psn - it->first_psn) * spec_.mtu);
}

// --- responder and requester, on arrival --------------------------------------

void RoceEndpoint::rx_burst(const RxPacket* pkts, size_t n, Time now) {
    for (size_t i = 0; i < n; ++i) {
        const RxPacket& p = pkts[i];
        if (p.len < sizeof(Header)) continue;
        Header h;
        std::memcpy(&h, p.data, sizeof h);
        Qp* q = find(p.peer);
        if (!q) continue;
        switch (h.type) {
            case kData:
                if (p.ce && spec_.dcqcn) q->cnp_due = true;
                if (h.psn == q->expected) {
                    ++q->expected;
                    ctr_.rx_payload_bytes += h.len;
                    q->rx_payload_bytes += h.len;
                    q->nak_outstanding = false;
                    q->ack_due = true;
                } else if (int32_t(h.psn - q->expected) < 0) {
                    q->ack_due = true;  // a duplicate: say again where we are
                } else {
                    ++ctr_.out_of_order_drops;
                    if (!q->nak_outstanding) {
                        q->nak_outstanding = true;
                        ctrl_.push_back(Ctrl{q->peer, q->entropy, kNak, q->expected});
                        ++ctr_.naks_sent;
                    }
                }
                break;
            case kAck:
            case kNak:
                on_ack(*q, h.psn, h.type == kNak, now);
                break;
            case kCnp:
                on_cnp(*q, now);
                break;
            default:
                break;
        }
    }
    // One coalesced ACK per QP per burst, and CNPs at most every 50 us.
    for (Qp& q : qps_) {
        if (q.ack_due) {
            ctrl_.push_back(Ctrl{q.peer, q.entropy, kAck, q.expected});
            ++ctr_.acks;
            q.ack_due = false;
        }
        if (q.cnp_due && (!q.cnp_sent_once || now - q.last_cnp_tx >= kCnpInterval)) {
            ctrl_.push_back(Ctrl{q.peer, q.entropy, kCnp, 0});
            ++ctr_.cnps_sent;
            q.last_cnp_tx = now;
            q.cnp_sent_once = true;
        }
        q.cnp_due = false;
    }
}

void RoceEndpoint::on_ack(Qp& q, uint32_t psn, bool nak, Time now) {
    if (int32_t(psn - q.una) > 0 && int32_t(psn - q.end_psn) <= 0) {
        q.una = psn;
        q.last_progress = now;
        while (!q.msgs.empty() && int32_t(q.msgs.front().last_psn - psn) < 0) {
            done_.push_back(Completion{q.msgs.front().tag, q.peer});
            q.msgs.pop_front();
        }
        if (int32_t(q.next_psn - q.una) < 0) q.next_psn = q.una;
    }
    if (nak && psn == q.una) {
        // Go back N: everything from the NAKed PSN is sent again.
        ctr_.data_resent += q.next_psn - psn;
        q.next_psn = psn;
        q.last_progress = now;
    }
}

// --- DCQCN reaction point -------------------------------------------------------

void RoceEndpoint::on_cnp(Qp& q, Time now) {
    ++ctr_.cnps_received;
    if (!spec_.dcqcn) return;
    q.rt = q.rc;
    q.rc = std::max(q.rc * (1 - q.alpha / 2), line_bps_ / 1000);
    q.alpha = (1 - kG) * q.alpha + kG;
    q.last_cnp_rx = now;
    q.alpha_timer = now + kAlphaTimer;
    q.rate_timer = now + kRateTimer;
    q.bytes_since_increase = 0;
    q.timer_stage = q.byte_stage = 0;
}

void RoceEndpoint::rate_increase(Qp& q) {
    const double r_ai = line_bps_ / 1000, r_hai = line_bps_ / 100;
    const uint32_t lo = std::min(q.timer_stage, q.byte_stage), hi = std::max(q.timer_stage, q.byte_stage);
    if (hi < kFastRecoverySteps) {
        // fast recovery: halfway back to the rate before the cut
    } else if (lo > kFastRecoverySteps) {
        q.rt = std::min(line_bps_, q.rt + (lo - kFastRecoverySteps) * r_hai);
    } else {
        q.rt = std::min(line_bps_, q.rt + r_ai);
    }
    q.rc = std::min(line_bps_, (q.rt + q.rc) / 2);
}

void RoceEndpoint::dcqcn_timers(Qp& q, Time now) {
    if (q.rc >= line_bps_ && q.alpha_timer == 0) return;
    while (q.alpha_timer && now >= q.alpha_timer) {
        q.alpha = (1 - kG) * q.alpha;  // no CNP for a whole period
        q.alpha_timer += kAlphaTimer;
        if (q.alpha < 1e-6) q.alpha_timer = 0;
    }
    while (q.rate_timer && now >= q.rate_timer) {
        ++q.timer_stage;
        rate_increase(q);
        q.rate_timer = q.rc >= line_bps_ ? 0 : q.rate_timer + kRateTimer;
    }
}

// --- requester, sending -------------------------------------------------------------

bool RoceEndpoint::can_send(const Qp& q, Time now) const {
    return q.next_psn != q.end_psn && q.next_psn - q.una < spec_.max_inflight && q.next_send <= now;
}

size_t RoceEndpoint::tx_burst(TxPacket* out, size_t max, Time now) {
    size_t n = 0;
    auto put = [&](uint32_t peer, uint16_t entropy, const Header& h, uint32_t payload, bool ect) {
        TxPacket& t = out[n++];
        t.peer = peer;
        // The QP's NIC port: on a multi-plane fabric (one port per plane,
        // plane = path mod planes) each QP is bound to one port, the QPs
        // spread over them by their entropy, as RDMA-CM binds a QP to a port.
        t.path = uint16_t(entropy >> 8);
        t.entropy = entropy;
        t.hdr_len = sizeof h;
        t.ect = ect ? 1 : 0;
        std::memcpy(t.hdr, &h, sizeof h);
        t.payload_len = payload;
        t.payload = payload ? zeros_.data() : nullptr;
    };
    while (n < max && !ctrl_.empty()) {
        const Ctrl c = ctrl_.front();
        ctrl_.pop_front();
        put(c.peer, c.entropy, Header{c.type, 0, 0, c.psn, 0, 0}, 0, false);
    }
    for (Qp& q : qps_) {
        dcqcn_timers(q, now);
        // Retransmission timeout: nothing acknowledged for rto with data out.
        if (q.una != q.next_psn && now - q.last_progress >= spec_.rto) {
            ++ctr_.timeouts;
            ctr_.data_resent += q.next_psn - q.una;
            q.next_psn = q.una;
            q.last_progress = now;
        }
    }
    // Round robin over QPs, one packet each per turn, each paced at its rate.
    for (bool progress = true; n < max && progress && !qps_.empty();) {
        progress = false;
        for (size_t k = 0; k < qps_.size() && n < max; ++k) {
            Qp& q = qps_[(rr_ + k) % qps_.size()];
            if (!can_send(q, now)) continue;
            bool last = false;
            const uint32_t len = payload_of(q, q.next_psn, last);
            put(q.peer, q.entropy, Header{kData, uint8_t(last), 0, q.next_psn, len, 0}, len, true);
            ++q.next_psn;
            ++ctr_.data_sent;
            if (q.una + 1 == q.next_psn) q.last_progress = now;  // the timer starts with the first packet out
            const double bits = double(len + sizeof(Header)) * 8;
            q.next_send = std::max(q.next_send, now) + Time(bits * 1e9 / q.rc);
            q.bytes_since_increase += len;
            if (q.rc < line_bps_ && q.bytes_since_increase >= kByteCounter) {
                q.bytes_since_increase = 0;
                ++q.byte_stage;
                rate_increase(q);
            }
            progress = true;
        }
        rr_ = (rr_ + 1) % qps_.size();
    }
    return n;
}

Time RoceEndpoint::next_deadline(Time now) {
    if (!ctrl_.empty()) return now + 1;
    Time d = sim::kNever;
    for (const Qp& q : qps_) {
        if (q.next_psn != q.end_psn && q.next_psn - q.una < spec_.max_inflight) d = std::min(d, std::max(q.next_send, now + 1));
        if (q.una != q.next_psn) d = std::min(d, q.last_progress + spec_.rto);
        if (q.rate_timer) d = std::min(d, q.rate_timer);
        if (q.alpha_timer) d = std::min(d, q.alpha_timer);
    }
    return d;
}

}  // namespace mroce::simapp
