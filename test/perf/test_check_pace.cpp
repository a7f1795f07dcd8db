// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-perf's check pacing in its waits (app/perf/check_pace.hpp).
#include <cstdint>

#include <catch2/catch.hpp>

#include "check_pace.hpp"

using mroce::perf::CheckPace;

TEST_CASE("CheckPace: a quiet spell checks every 16th pass, then every pass; traffic every 1024th", "[perf]") {
    CheckPace p;
    CHECK(p.due(true));  // the first pass
    for (uint32_t i = 1; i < 1024; ++i) CHECK_FALSE(p.due(true));
    CHECK(p.due(true));
    for (uint32_t q = 1; q < 64; ++q) CHECK(p.due(false) == (q % 16 == 0));
    for (int i = 0; i < 10; ++i) CHECK(p.due(false));
}

// The server of a client that died owes it nothing, so R-CONN-6 never fires
// there: its wait notices the dead peer by its silence. Its only traffic is
// its own R-CONN-15 keepalive, a pass that moved every conn_timeout / 4, with
// passes that block (until the next keepalive, 100 ms at most) between them.
TEST_CASE("CheckPace: passes that block between keepalives (R-CONN-15) still check, each one after a block "
          "(a dead peer's silence, R-CONN-6)", "[perf]") {
    CheckPace p;
    (void)p.due(true);
    p.idled(false);
    for (int keepalive = 0; keepalive < 100; ++keepalive) {
        const bool ka = p.due(true);  // the keepalive's pass
        CHECK(ka == (keepalive > 0));  // after the previous one's block
        p.idled(false);                // after work: never blocks
        CHECK_FALSE(p.due(false));     // its ICMP error, or nothing
        p.idled(true);
        CHECK(p.due(false));           // after a block
        p.idled(true);
    }
    // Spinning quiet passes after a block check no more often than before:
    // the spell (3 passes now, the last after the block) checks at its 16th.
    CHECK(p.due(false));
    p.idled(false);
    for (uint32_t q = 4; q < 16; ++q) {
        CHECK_FALSE(p.due(false));
        p.idled(false);
    }
    CHECK(p.due(false));
}
