// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The CSN duplicate filter against a reference set (R-CSN-3, R-CSN-4): its
// in-order fast path and its fold of out-of-order marks must agree with
// "each CSN is fresh exactly once" across wrap-around of the bit ring.
#include <catch2/catch.hpp>

#include <set>

#include "../../lib/engine/sack_window.hpp"
#include "pair_link.hpp"

using mroce::CsnWindow;

TEST_CASE("CSN window: fresh exactly once, in and out of order, across wrap", "[engine][csn]") {
    constexpr uint32_t kWindow = 256;
    for (const uint32_t first : {0u, 0xffffff00u, 12345u}) {
        CsnWindow w;
        w.init(first, kWindow);
        std::set<uint32_t> seen;  // offsets from first
        uint32_t cum = 0;          // reference cumulative point (offset)
        mroce::test::SplitMix rng(first + 7);
        for (int i = 0; i < 200000; ++i) {
            // Mostly in order (the fast path), sometimes ahead, sometimes a repeat.
            const uint64_t r = rng.next();
            uint32_t off = cum + uint32_t(r % 8 == 0 ? (r >> 8) % (kWindow + 8) : (r >> 8) % 3);
            if (r % 16 == 1 && cum) off = cum - 1 - uint32_t((r >> 20) % std::min<uint32_t>(cum, 64));
            const uint32_t csn = first + off;
            const CsnWindow::Result got = w.classify(csn);
            if (off < cum || seen.count(off)) {
                REQUIRE(got == CsnWindow::Result::duplicate);
            } else if (off - cum >= kWindow) {
                REQUIRE(got == CsnWindow::Result::beyond_window);
            } else {
                REQUIRE(got == CsnWindow::Result::fresh);
                w.mark(csn);
                seen.insert(off);
                while (seen.count(cum)) seen.erase(cum++);
                REQUIRE(w.cum() == first + cum);
            }
        }
        REQUIRE(cum > 10000);  // the run wrapped the 256-bit ring many times
    }
}

// The in-order mark skips the fold when nothing is recorded above cum: the
// count of recorded CSNs must follow every mark and every fold, or a CSN
// marked out of order would never be folded (and count as fresh again).
TEST_CASE("CSN window: out-of-order marks fold once the hole fills, then in order again", "[engine][csn]") {
    CsnWindow w;
    w.init(100, 64);
    for (const uint32_t csn : {102u, 104u, 103u}) {
        REQUIRE(w.classify(csn) == CsnWindow::Result::fresh);
        w.mark(csn);
    }
    REQUIRE(w.cum() == 100);
    w.mark(100);
    REQUIRE(w.cum() == 101);  // 101 still missing
    REQUIRE(w.classify(102) == CsnWindow::Result::duplicate);
    w.mark(101);
    REQUIRE(w.cum() == 105);  // 101 fills the hole: 102-104 fold
    for (uint32_t csn = 105; csn < 105 + 3 * 64; ++csn) {  // in order across the ring, nothing left to fold
        REQUIRE(w.classify(csn) == CsnWindow::Result::fresh);
        w.mark(csn);
        REQUIRE(w.cum() == csn + 1);
    }
    w.mark(w.cum() + 1);  // one above again, after the ring wrapped
    w.mark(w.cum());
    REQUIRE(w.cum() == 105 + 3 * 64 + 2);
}

// SackBitmap's in-order mark skips the fold while nothing is recorded above
// cum (`above`): a PSN marked out of order must still fold once the hole
// below it fills, and leave the bits clear for the in-order marks after it.
TEST_CASE("SACK bitmap: out-of-order PSNs fold once the hole fills", "[engine][csn]") {
    mroce::SackBitmap b;
    b.apply_floor(7);
    REQUIRE(b.cum == 7);
    for (const uint32_t psn : {7u, 8u}) {  // in order, nothing above
        REQUIRE(b.classify(psn) == mroce::SackBitmap::Result::fresh);
        b.mark(psn);
    }
    REQUIRE(b.cum == 9);
    for (const uint32_t psn : {11u, 10u, 13u}) b.mark(psn);  // 9 and 12 missing
    REQUIRE(b.cum == 9);
    REQUIRE(b.has_gap());
    REQUIRE(b.classify(10) == mroce::SackBitmap::Result::duplicate);
    b.mark(9);
    REQUIRE(b.cum == 12);  // 10, 11 fold; 13 still above the hole at 12
    REQUIRE(b.classify(13) == mroce::SackBitmap::Result::duplicate);
    b.mark(12);
    REQUIRE(b.cum == 14);
    REQUIRE(!b.has_gap());
    for (uint32_t psn = 14; psn < 14 + 600; ++psn) {  // in order again, past the 256-bit window
        REQUIRE(b.classify(psn) == mroce::SackBitmap::Result::fresh);
        b.mark(psn);
        REQUIRE(b.cum == psn + 1);
    }
    b.mark(b.cum + 2);  // above again
    b.mark(b.cum + 1);
    b.mark(b.cum);
    REQUIRE(b.cum == 14 + 600 + 3);
    REQUIRE(!b.has_gap());
}
