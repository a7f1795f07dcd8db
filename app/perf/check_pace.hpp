// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// When mroce-perf's waits (Ctrl::wait) look at the clock: the peer's silence,
// the connection's state, the wait's own timeout. Not every pass: the --lat
// server waits for each ping in passes of a fraction of a microsecond, and
// the checks (a clock read, the engine's counters under the device lock)
// would lengthen them.
#pragma once

#include <cstdint>

namespace mroce::perf {

// In a short quiet spell every 16th pass, and every pass once the spell is
// 64 passes long, so a failed connection is seen at most 15 spinning passes
// later than if every quiet pass checked; in traffic every 1024th pass; and
// always in the pass after one whose idle() blocked. Counted in passes alone,
// the silence limit (the dead peer of a connection that owes it nothing:
// R-CONN-6 never fires there, R-CONN-15's keepalives are the only traffic)
// fired only while the loop spun: a keepalive every conn_timeout / 4 is a
// pass that moved, which ends the quiet spell, and a loop that blocks
// between them (until the next keepalive, at most 100 ms at a time) makes
// two or three passes per keepalive, so the spell never reached 16 passes
// and a pass that moved was the 1024th once in some 1,000 keepalives (the
// server noticed its killed client after 16 s or never, round 42).
class CheckPace {
public:
    // moved: this pass's progress() moved anything. True: check now.
    bool due(bool moved) noexcept {
        const bool after_block = blocked_;
        blocked_ = false;
        const uint32_t pass = pass_++;
        if (moved) {
            quiet_ = 0;
            return after_block || (pass & 1023) == 0;
        }
        ++quiet_;
        return after_block || quiet_ >= 64 || (quiet_ & 15) == 0;
    }
    // What this pass's idle() returned.
    void idled(bool blocked) noexcept { blocked_ = blocked; }

private:
    uint32_t pass_ = 0, quiet_ = 0;
    bool blocked_ = false;
};

}  // namespace mroce::perf
