// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// A BASELINE, NOT mroce: a plainly written RoCEv2-like reliable-connection
// endpoint for comparison on the simulated fabric, modelled on what RoCEv2
// NICs do, deliberately without any of mroce's mechanisms (and sharing none
// of its code):
// - one path per QP: every packet of a QP carries the same UDP source port
//   (entropy), so ECMP pins the QP to one route;
// - one packet sequence number (PSN) space per QP; the responder accepts
//   only the expected PSN, drops anything after a gap and NAKs the gap once
//   (PSN sequence error); the requester goes back to the NAKed PSN and
//   resends everything from there (go-back-N); a lost tail waits for the
//   retransmission timeout;
// - DCQCN rate control (Zhu et al., SIGCOMM 2015): the responder answers CE
//   marks with at most one CNP per QP per 50 us; the requester cuts its rate
//   by alpha/2 on a CNP and recovers by fast recovery, additive and hyper
//   increase on a timer and a byte counter;
// - no receiver rate hints, no SACK, no multipath.
// Lossless operation is the fabric's job (PFC: FabricSpec::pfc).
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "fabric.hpp"
#include "scenario.hpp"

namespace mroce::simapp {

struct RoceCounters {
    uint64_t data_sent = 0, data_resent = 0, acks = 0, naks_sent = 0, cnps_sent = 0, cnps_received = 0;
    uint64_t timeouts = 0, out_of_order_drops = 0, rx_payload_bytes = 0;
};

class RoceEndpoint final : public sim::Endpoint {
public:
    struct Completion {
        uint64_t tag;
        uint32_t peer;
    };

    RoceEndpoint(const RoceSpec& spec, uint64_t line_rate_bps);
    // Creates this side's QP towards peer (both sides call it: the RC QP
    // pair exchanged out of band, as RDMA-CM would). entropy: its UDP source
    // port. One QP per peer: a second call for the same peer is a no-op.
    void create_qp(uint32_t peer, uint16_t entropy);
    // A WRITE of bytes to peer's QP; completes when the peer acknowledged all.
    void post_write(uint32_t peer, uint64_t bytes, uint64_t tag);
    size_t take_completions(std::vector<Completion>& out);
    const RoceCounters& counters() const noexcept { return ctr_; }
    // Payload placed from peer (in order, each byte once).
    uint64_t rx_bytes_from(uint32_t peer) const;

    void rx_burst(const RxPacket* pkts, size_t n, Time now) override;
    size_t tx_burst(TxPacket* out, size_t max, Time now) override;
    Time next_deadline(Time now) override;

private:
    struct Message {
        uint64_t tag;
        uint32_t first_psn, last_psn;  // inclusive
        uint64_t bytes;
    };
    struct Qp {
        uint32_t peer = 0;
        uint16_t entropy = 0;
        // requester
        std::deque<Message> msgs;     // not yet acknowledged, in PSN order
        uint32_t next_psn = 0;        // next to (re)send
        uint32_t end_psn = 0;         // one past the last posted
        uint32_t una = 0;             // oldest unacknowledged
        Time last_progress = 0;       // for the retransmission timer
        Time next_send = 0;           // pacing at rate rc
        // DCQCN reaction point
        double rc = 0, rt = 0, alpha = 1;
        Time last_cnp_rx = 0, alpha_timer = 0, rate_timer = 0;
        uint64_t bytes_since_increase = 0;
        uint32_t timer_stage = 0, byte_stage = 0;
        // responder
        uint32_t expected = 0;        // next in-order PSN
        uint64_t rx_payload_bytes = 0;
        bool nak_outstanding = false; // a NAK for `expected` was sent
        bool ack_due = false;
        Time last_cnp_tx = 0;
        bool cnp_due = false;
        bool cnp_sent_once = false;
    };
    struct Ctrl {
        uint32_t peer;
        uint16_t entropy;
        uint8_t type;
        uint32_t psn;
    };

    Qp* find(uint32_t peer);
    void on_ack(Qp& q, uint32_t psn, bool nak, Time now);
    void on_cnp(Qp& q, Time now);
    void dcqcn_timers(Qp& q, Time now);
    void rate_increase(Qp& q);
    uint32_t payload_of(const Qp& q, uint32_t psn, bool& last) const;
    bool can_send(const Qp& q, Time now) const;

    RoceSpec spec_;
    double line_bps_;
    std::vector<Qp> qps_;
    std::unordered_map<uint32_t, uint32_t> by_peer_;
    std::deque<Ctrl> ctrl_;
    std::vector<Completion> done_;
    std::vector<uint8_t> zeros_;
    size_t rr_ = 0;  // round-robin start among QPs
    RoceCounters ctr_;
};

}  // namespace mroce::simapp
