// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Congestion control, both sides (doc/spec.md section "Congestion control",
// rules R-CC-* and R-HINT-*). Pure state machines fed by the engine: no clock
// of their own, no I/O, no allocation after construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mroce {

using Time = uint64_t;

struct CcConfig {
    double init_cwnd = 32;      // packets
    double min_cwnd = 1;
    double max_cwnd = 256;      // a path never has more in flight than its SACK window (R-SACK-2)
    double dctcp_g = 1.0 / 16;  // EWMA gain of the marked fraction (R-CC-2)
    double ai_per_rtt = 1.0;    // additive increase, packets per round trip (R-CC-3)
    double loss_beta = 1.0;     // window multiplier on a SACK-detected loss; 1 = loss is not congestion (R-CC-5)
    bool ecn = true;            // react to CE echoes
};

// Sender-side window of one path: DCTCP-style ECN AIMD (R-CC-1..R-CC-6).
class PathWindow {
public:
    explicit PathWindow(const CcConfig& cfg = {}) noexcept;
    void reset() noexcept;
    // One ack: `acked` packets newly acknowledged, `marked` of the acked data
    // carried CE; `ack_psn` is the ack's cumulative PSN, `snd_nxt` the next PSN
    // the sender will use (ends the current observation round).
    // Inline: the engine's inline CC runs it once per ACK (issue 24).
    [[gnu::always_inline]] inline void on_ack(uint32_t acked, uint32_t marked, uint32_t ack_psn, uint32_t snd_nxt) noexcept;
    void on_loss() noexcept;
    // R-CC-6: restarts the path at min_cwnd. The first timeout of a sequence
    // remembers the window it replaced (R-CC-9) until an ACK acknowledges
    // data (on_ack with acked > 0) or the timeout is undone.
    void on_timeout() noexcept;
    // R-CC-9: the engine proved the pending timeout(s) spurious (a late ACK
    // acknowledged the original transmission): the window returns to what it
    // was before the first of them, unless ECN says the path queues (`marked`:
    // the proving ACK carried CE, or a mark in this or the last round): then
    // the delay was congestion and the timeout's window stands. Returns true
    // if the window was restored.
    bool on_spurious_timeout(bool marked = false) noexcept;
    bool undo_pending() const noexcept { return undo_cwnd_ > 0; }
    // Sets the window before the first transmission from what the handshake
    // told (R-HINT-8), within [min_cwnd, init_cwnd].
    void set_initial(double pkts) noexcept {
        cwnd_ = std::clamp(pkts, cfg_.min_cwnd, cfg_.init_cwnd);
        undo_cwnd_ = 0;
    }
    // RTT sample of this path; the smallest seen estimates the unqueued RTT.
    void on_rtt(Time rtt) noexcept {
        if (rtt && (!min_rtt_ || rtt < min_rtt_)) min_rtt_ = rtt;
    }
    Time min_rtt() const noexcept { return min_rtt_; }
    // Caps the usable window at `pkts` (0 = no cap) without touching the AIMD
    // state, so a raised cap is usable at once (R-HINT-7).
    void set_limit(double pkts) noexcept { limit_ = pkts; }
    double cwnd() const noexcept { return limit_ > 0 && limit_ < cwnd_ ? std::max(cfg_.min_cwnd, limit_) : cwnd_; }
    double alpha() const noexcept { return alpha_; }
    // Rounds since the last round that saw a mark (0 = marked in this or the last round).
    uint32_t rounds_since_mark() const noexcept { return rounds_since_mark_; }
    uint64_t cuts() const noexcept { return cuts_; }
    uint64_t rounds() const noexcept { return rounds_; }
    uint64_t undos() const noexcept { return undos_; }

private:
    CcConfig cfg_;
    double cwnd_;
    double alpha_ = 0;
    uint32_t round_end_ = 0;
    bool round_open_ = false;
    uint32_t round_acked_ = 0;
    uint32_t round_marked_ = 0;
    bool cut_this_round_ = false;
    uint32_t rounds_since_mark_ = 1000;
    uint64_t cuts_ = 0;
    uint64_t rounds_ = 0;
    Time min_rtt_ = 0;
    double limit_ = 0;
    double undo_cwnd_ = 0;  // window before the pending timeout(s); 0 = none pending (R-CC-9)
    uint64_t undos_ = 0;
};

inline void PathWindow::on_ack(uint32_t acked, uint32_t marked, uint32_t ack_psn, uint32_t snd_nxt) noexcept {
    if (!round_open_) {
        round_open_ = true;
        round_end_ = snd_nxt;
    }
    round_acked_ += acked;
    round_marked_ += marked;
    // The mark tested first: an unmarked ACK (the rule) takes one test to
    // the increase, not the ECN flag's and the mark's (issue 24).
    if (marked > 0) [[unlikely]] {
        if (cfg_.ecn && !cut_this_round_) {
            // R-CC-2: react to the first mark of a round at once (steering needs it
            // now), by the running alpha; alpha itself is updated per round.
            const double a = std::max(alpha_, cfg_.dctcp_g);
            // Cut what is in use: a window above the hint cap carried no data.
            cwnd_ = std::max(cfg_.min_cwnd, cwnd() * (1.0 - a / 2.0));
            cut_this_round_ = true;
            ++cuts_;
        }
    } else if (acked > 0 && !(limit_ > 0 && limit_ < cwnd_)) {
        // (No growth while the hint cap binds: that window was not tested.)
        // R-CC-3: additive increase of ai_per_rtt packets per window of acks.
        cwnd_ = std::min(cfg_.max_cwnd, cwnd_ + cfg_.ai_per_rtt * acked / cwnd_);
    }
    if (int32_t(ack_psn - round_end_) >= 0) {  // serial-number compare (R-PATH-1)
        // R-CC-2: one round (one window of data) observed: fold the marked fraction into alpha.
        // Unmarked (the rule): 0.0 without the division, as 0 / round_acked_ is;
        // and with alpha 0 too (no mark yet, or its decay underflowed) the
        // fold is (1 - g) * 0 + g * 0 = +0.0 for any finite gain: alpha as it
        // is, so skipped (issue 24: a lone message's ACK closes a round each time).
        if (round_marked_ || alpha_ != 0.0) {
            const double f = round_marked_ && round_acked_ ? double(round_marked_) / double(round_acked_) : 0.0;
            alpha_ = (1.0 - cfg_.dctcp_g) * alpha_ + cfg_.dctcp_g * std::min(1.0, f);
        }
        rounds_since_mark_ = round_marked_ ? 0 : rounds_since_mark_ + 1;
        round_end_ = snd_nxt;
        round_acked_ = round_marked_ = 0;
        cut_this_round_ = false;
        ++rounds_;
    }
    // R-CC-9: an ACK of data ends the chance to undo a timeout: FIFO on one
    // path means originals still unacknowledged by now were lost.
    if (acked > 0) undo_cwnd_ = 0;
}

// ---- The congestion-control core (doc/architecture.md 4.2, R-CC-8) ----
//
// The windows of every path of every connection, behind two narrow records,
// so the core can run inline on the engine's thread (the engine calls
// CcCore::apply itself) or on its own lcore, fed over an SPSC ring by the
// driver (EngineConfig::offload_cc, Engine::take_cc_feedback / cc_update).
// The engine's scheduler only ever reads the published CcView of a path.

enum class CcEvent : uint8_t {
    ack,      // an ACK for the path: losses, RTT sample, acked / marked packets
    timeout,  // the path's retransmission timer fired (R-CC-6)
    initial,  // the handshake's first window (R-HINT-8), before any transmission
    reset,    // the path was revived (R-PATH-10): a new window, nothing else
};

// Engine -> CC core: what one ACK or timer told about one path's window.
struct CcFeedback {
    uint32_t slot = 0;          // the path's slot, assigned by the engine
    uint32_t gen = 0;           // path incarnation: a new value starts the slot's window afresh
    CcEvent kind = CcEvent::ack;
    bool undo = false;          // ack: it proved the pending timeout spurious (R-TIMER-7, R-CC-9)
    uint16_t losses = 0;        // SACK-detected losses in this ack (R-SACK-4, R-CC-5)
    uint32_t acked = 0;         // packets the ack newly acknowledged (at least `marked`)
    uint32_t marked = 0;        // of them, CE echoed (R-CC-2)
    uint32_t ack_psn = 0;       // the ack's cumulative PSN
    uint32_t snd_nxt = 0;       // next PSN the sender will use on the path (ends a round)
    uint32_t rtt = 0;           // ns, this ack's RTT sample (0: none)
    uint32_t hint_kbps = 0;     // the receiver's hint, for the window cap (R-HINT-7; 0: no cap)
    uint16_t active_paths = 0;  // the connection's active paths (R-HINT-7 shares the hint over them)
    uint16_t pkt_bytes = 0;     // a full data packet (segment + header)
    float initial = 0;          // CcEvent::initial: the first window, packets
};

// CC core -> engine: the part of a path's window state the scheduler reads.
// Every view is the whole state, so a later one supersedes an earlier one.
struct CcView {
    uint32_t slot = 0;
    uint32_t gen = 0;
    double cwnd = 0;                // usable window in packets (the hint cap applied)
    uint32_t rounds_since_mark = 0; // 0: marked in this or the last round (R-SCHED-3)
    uint32_t rounds = 0;            // rounds observed (R-SCHED-5 counts marked ones)
    uint32_t cuts = 0;
    uint32_t timeouts = 0;          // timeout records applied to this incarnation (R-CC-8: the engine
                                    // keeps a timed-out path at min_cwnd until this catches up)
};
static_assert(sizeof(CcView) == 32, "a CcView is half a cache line on the views ring");

class CcCore {
public:
    explicit CcCore(const CcConfig& cfg = {}, size_t slots_hint = 0);
    // Applies the records in order; out[i] is the path's state after in[i].
    // Allocates only when a slot beyond all earlier ones appears (a new connection).
    void apply(const CcFeedback* in, size_t n, CcView* out);
    CcView apply_one(const CcFeedback& fb) {
        CcView v;
        apply_into(fb, v);
        return v;
    }
    // apply_one with the view written into `v`: the engine's inline CC
    // hands it its path's published view (issue 24: no view returned through
    // memory and copied again; every field is written, as apply_one's).
    // Inline, an ACK of a known path's incarnation with it; the rest out of line.
    [[gnu::always_inline]] void apply_into(const CcFeedback& f, CcView& v) {
        Slot& s = slot_for(f);
        if (f.kind == CcEvent::ack) [[likely]]
            apply_ack(s.w, f);
        else
            apply_other(s, f);
        ++records_;
        view_of(s.w, f.slot, f.gen, s.timeouts, v);
    }
    // The view of a path no record has reached yet: a fresh window, or the
    // first window of the handshake (initial > 0) as apply() would make it.
    static CcView fresh_view(const CcConfig& cfg, uint32_t slot, uint32_t gen, double initial = 0);
    const PathWindow* window(uint32_t slot) const noexcept {
        return slot < slots_.size() && slots_[slot].used ? &slots_[slot].w : nullptr;
    }
    uint64_t records() const noexcept { return records_; }
    // The view the slot's latest record published (apply_one's), worked out
    // afresh from its window; false if no record reached the slot.
    bool view(uint32_t slot, CcView& v) const noexcept {
        if (!window(slot)) return false;
        view_of(slots_[slot].w, slot, slots_[slot].gen, slots_[slot].timeouts, v);
        return true;
    }

private:
    struct Slot {
        PathWindow w;
        uint32_t gen = 0;
        uint32_t timeouts = 0;
        bool used = false;
    };
    static void view_of(const PathWindow& w, uint32_t slot, uint32_t gen, uint32_t timeouts, CcView& v) noexcept {
        v.slot = slot;
        v.gen = gen;
        v.timeouts = timeouts;
        v.cwnd = w.cwnd();
        v.rounds_since_mark = w.rounds_since_mark();
        v.rounds = uint32_t(w.rounds());
        v.cuts = uint32_t(w.cuts());
    }
    // The slot of the record's path, made fresh for a new one or a new incarnation (f.gen).
    Slot& slot_for(const CcFeedback& f) {
        if (f.slot < slots_.size()) [[likely]] {
            Slot& s = slots_[f.slot];
            if (s.used && s.gen == f.gen) [[likely]] return s;
        }
        return new_slot(f);
    }
    Slot& new_slot(const CcFeedback& f);
    [[gnu::always_inline]] void apply_ack(PathWindow& w, const CcFeedback& f) noexcept {
        if (f.undo) w.on_spurious_timeout(f.marked > 0);  // before this ack's own update (R-CC-9)
        for (uint32_t k = 0; k < f.losses; ++k) w.on_loss();
        if (f.rtt) w.on_rtt(f.rtt);
        w.on_ack(f.acked, cfg_.ecn ? f.marked : 0, f.ack_psn, f.snd_nxt);
        if (f.hint_kbps) {
            // R-HINT-7: pacing at the hint cannot drain a queue that windows
            // sized before the first hint already built (an incast's first
            // flights): it drains only at capacity minus the sum of hints. So
            // each path is also capped at twice its share of hint x unqueued
            // (minimum) RTT, never below 2 packets: a path a hostile or stale
            // ack misjudges must keep enough window to recover.
            double lim = 0;
            if (w.min_rtt() && f.active_paths && f.pkt_bytes) {
                const double bytes =
                    double(f.hint_kbps) * 125.0 / 1e9 * double(w.min_rtt()) / double(f.active_paths);
                lim = std::max(2.0, 2.0 * bytes / double(f.pkt_bytes));
            }
            w.set_limit(lim);
        } else {
            w.set_limit(0);
        }
    }
    void apply_other(Slot& s, const CcFeedback& f);  // the kinds but ack (apply_into's inline one)
    CcConfig cfg_;
    std::vector<Slot> slots_;
    uint64_t records_ = 0;
};

// Sender-side pacer toward the receiver's hint (R-HINT-5). Rate in kbit/s;
// 0 means unlimited. Burst allowance in bytes.
class TokenBucket {
public:
    // The burst is min_burst_bytes, or what the rate delivers in the longer of
    // kBurstTime and twice the sender's loop pass if that is more (R-HINT-5): a
    // bucket shallower than one pass's worth of tokens caps every pass, and so
    // the rate, below the hint (a software sender's pass takes tens of
    // microseconds, and a fixed 64 KiB at 100 Gbit/s is 5 us). The pass is the
    // smoothed gap between packets of successive tx passes; a gap longer than
    // kMaxPassTime is idle time, not a pass, and is not counted.
    static constexpr Time kBurstTime = 20'000;      // ns
    static constexpr Time kMaxPassTime = 200'000;   // ns
    explicit TokenBucket(uint32_t min_burst_bytes = 64 * 1024) noexcept
        : min_burst_(min_burst_bytes), burst_(min_burst_bytes) {}
    uint32_t burst_bytes() const noexcept { return burst_; }
    Time pass_ns() const noexcept { return pass_; }
    void set_rate_kbps(uint32_t kbps, Time now) noexcept;
    // Sets the rate and empties the bucket until the first packet: that one
    // may leave, the next only once its bytes have accrued, so nothing is
    // banked between the handshake and the first packet (R-HINT-8).
    void start_kbps(uint32_t kbps, Time now) noexcept {
        rate_kbps_ = kbps;
        tokens_ = 0;
        last_ = now;
        before_first_ = true;
        resize();
    }
    uint32_t rate_kbps() const noexcept { return rate_kbps_; }
    // allow and consume run for every paced packet: inline, and a bucket not
    // in debt allows without arithmetic (tokens only accrue with time).
    bool allow(Time now, uint32_t bytes) const noexcept {
        // A packet larger than what is left may go once the bucket is non-negative:
        // the debt is repaid before the next one (keeps the long-run rate exact).
        (void)bytes;
        if (rate_kbps_ == 0 || before_first_ || tokens_ >= 0.0) return true;
        return tokens_at(now) >= 0.0;
    }
    void consume(Time now, uint32_t bytes) noexcept {
        if (rate_kbps_ == 0) return;
        // A new pass (every packet of one tx pass carries the same time).
        if (now != last_send_) new_pass(now);
        tokens_ = tokens_at(now) - double(bytes);
        last_ = now;
        before_first_ = false;
    }
    // Earliest time allow(t, bytes) becomes true (now if already true).
    Time release_time(Time now, uint32_t bytes) const noexcept;

private:
    // kbit/s to bytes per nanosecond: kbps * 1000 / 8 bytes/s / 1e9.
    static double bytes_per_ns(uint32_t kbps) noexcept { return double(kbps) * 125.0 / 1e9; }
    double tokens_at(Time now) const noexcept {
        if (rate_kbps_ == 0) return double(burst_);
        if (before_first_) return 0.0;
        const double dt = now > last_ ? double(now - last_) : 0.0;
        return std::min(double(burst_), tokens_ + dt * bytes_per_ns(rate_kbps_));
    }
    void new_pass(Time now) noexcept;
    void resize() noexcept;
    uint32_t rate_kbps_ = 0;
    uint32_t min_burst_;
    uint32_t burst_;
    double tokens_ = 0;
    Time last_ = 0;
    Time last_send_ = 0;         // the previous packet's time (passes are measured between sends)
    Time pass_ = 0;              // smoothed loop pass, ns (0: none measured yet)
    bool before_first_ = false;  // start_kbps() and no packet yet: the bucket stays empty
};

// Receiver-side fair share (R-HINT-1..R-HINT-4): the receiver's inbound
// capacity divided among the senders active in the last interval, max-min
// fair with weights: a sender that used less than its share over the last
// interval (it is limited elsewhere) keeps what it used plus headroom, and the
// rest is divided among the others.
class FairShare {
public:
    FairShare(uint64_t capacity_kbps, Time interval) noexcept;
    uint32_t add_sender(double weight = 1.0);
    void remove_sender(uint32_t idx) noexcept;
    void set_weight(uint32_t idx, double w) noexcept;
    // Every received data packet: inline, since it runs once per packet and
    // an active sender's packet only adds its bytes.
    void on_rx(uint32_t idx, uint32_t bytes, Time now) noexcept {
        if (idx >= nsenders_) [[unlikely]] return;
        Sender& s = senders_[idx];
        // R-HINT-2: a sender that was silent (or only shook hands) is measured
        // from its first byte, not from an interval start it was idle through:
        // that would make it look demand-limited (R-HINT-4).
        if (s.bytes == 0 && s.rate_kbps == 0) {
            s.measure_from = now;
            unknown_ = true;
        }
        s.bytes += bytes;
        s.last_rx = now;
        if (!s.active || !started_) [[unlikely]] activate(s, now);
    }
    // The sender's handshake was accepted: it is active from now on, before
    // its first byte, so the share its CONNECT_ACK carries counts it (R-HINT-2).
    void on_connect(uint32_t idx, Time now) noexcept;
    // Closes the measurement interval if it has elapsed; recomputes the shares.
    void update(Time now) noexcept;
    // From quiet_due() on: senders of unknown rate that have gone quiet get
    // their first estimate (R-HINT-2), the shares recomputed if any did.
    void check_quiet(Time now) noexcept;
    Time quiet_due() const noexcept { return unknown_ ? quiet_check_ : ~Time(0); }
    uint32_t hint_kbps(uint32_t idx) const noexcept;
    uint32_t active_senders() const noexcept { return active_; }
    bool is_active(uint32_t idx) const noexcept { return idx < senders_.size() && senders_[idx].active; }
    uint64_t capacity_kbps() const noexcept { return capacity_kbps_; }

private:
    struct Sender {
        double weight = 1.0;
        uint64_t bytes = 0;        // this interval
        Time measure_from = 0;     // start of this measurement: interval start, or first byte after silence
        double rate_kbps = 0;      // measured over the last closed interval
        uint32_t share_kbps = 0;
        uint32_t grant_kbps = 0;   // limited: rate-based grant of the last water-filling
        uint32_t idle_intervals = 0;
        Time last_rx = 0;          // its latest accepted DATA
        bool used = false;
        bool active = false;
        bool limited = false;      // demand-limited at the last water-filling (R-HINT-4)
    };
    void recompute() noexcept;
    void activate(Sender& s, Time now) noexcept;
    uint64_t capacity_kbps_;
    Time interval_;
    Time quiet_;                 // R-HINT-2: interval / 8
    Time quiet_check_ = 0;       // the next look for quiet senders of unknown rate
    bool unknown_ = false;       // a sender may have bytes but no rate yet
    Time interval_start_ = 0;
    bool started_ = false;
    uint32_t active_ = 0;
    // The unlimited senders' pool (issue 22: O(1) per joining sender): the
    // capacity the demand-limited grants leave and the active unlimited
    // senders' weight sum.
    double free_cap_ = 0;
    double free_w_ = 0;
    std::vector<Sender> senders_;
    // senders_.size(), kept beside it (add_sender is what grows it): on_rx,
    // once per data packet, bounds its index without a vector size's subtract and shift.
    uint32_t nsenders_ = 0;
    std::vector<uint8_t> limited_;  // scratch of recompute(), kept to avoid reallocating
};

}  // namespace mroce
