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
