// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Per-path ECN AIMD window (doc/spec.md R-CC-1..R-CC-6).
#include <algorithm>

#include "mroce/cc.hpp"

namespace mroce {

PathWindow::PathWindow(const CcConfig& cfg) noexcept : cfg_(cfg), cwnd_(cfg.init_cwnd) {}

void PathWindow::reset() noexcept {
    cwnd_ = cfg_.init_cwnd;
    alpha_ = 0;
    round_open_ = false;
    round_acked_ = round_marked_ = 0;
    cut_this_round_ = false;
    min_rtt_ = 0;  // a revived path may have a new route
    limit_ = 0;
    undo_cwnd_ = 0;
}

void PathWindow::on_ack(uint32_t acked, uint32_t marked, uint32_t ack_psn, uint32_t snd_nxt) noexcept {
    if (!round_open_) {
        round_open_ = true;
        round_end_ = snd_nxt;
    }
    round_acked_ += acked;
    round_marked_ += marked;
    if (cfg_.ecn && marked > 0 && !cut_this_round_) {
        // R-CC-2: react to the first mark of a round at once (steering needs it
        // now), by the running alpha; alpha itself is updated per round.
        const double a = std::max(alpha_, cfg_.dctcp_g);
        // Cut what is in use: a window above the hint cap carried no data.
        cwnd_ = std::max(cfg_.min_cwnd, cwnd() * (1.0 - a / 2.0));
        cut_this_round_ = true;
        ++cuts_;
    } else if (marked == 0 && acked > 0 && !(limit_ > 0 && limit_ < cwnd_)) {
        // (No growth while the hint cap binds: that window was not tested.)
        // R-CC-3: additive increase of ai_per_rtt packets per window of acks.
        cwnd_ = std::min(cfg_.max_cwnd, cwnd_ + cfg_.ai_per_rtt * acked / cwnd_);
    }
    if (int32_t(ack_psn - round_end_) >= 0) {  // serial-number compare (R-PATH-1)
        // R-CC-2: one round (one window of data) observed: fold the marked fraction into alpha.
        const double f = round_acked_ ? double(round_marked_) / double(round_acked_) : 0.0;
        alpha_ = (1.0 - cfg_.dctcp_g) * alpha_ + cfg_.dctcp_g * std::min(1.0, f);
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

void PathWindow::on_loss() noexcept {
    // R-CC-5: random loss is not congestion by default (loss_beta = 1).
    cwnd_ = std::max(cfg_.min_cwnd, cwnd_ * cfg_.loss_beta);
}

void PathWindow::on_timeout() noexcept {
    // R-CC-9: a second timeout before the first is resolved keeps the window
    // from before the first (that is what an undo returns to).
    if (undo_cwnd_ == 0) undo_cwnd_ = cwnd_;
    // R-CC-6: a timeout restarts the path from the minimum window.
    cwnd_ = cfg_.min_cwnd;
    round_open_ = false;
    round_acked_ = round_marked_ = 0;
    cut_this_round_ = false;
}

bool PathWindow::on_spurious_timeout(bool marked) noexcept {
    const double before = undo_cwnd_;
    undo_cwnd_ = 0;
    if (before == 0) return false;
    // R-CC-9: a delay with CE marks is a queue: congestion, the cut stands.
    if (cfg_.ecn && (marked || rounds_since_mark_ == 0)) return false;
    // The packets were delayed, not lost (e.g. a peer descheduled longer
    // than the RTO) and nothing said the path is congested. Round accounting
    // stays restarted; alpha was never touched by the timeout.
    cwnd_ = std::max(cwnd_, before);
    ++undos_;
    return true;
}

}  // namespace mroce
