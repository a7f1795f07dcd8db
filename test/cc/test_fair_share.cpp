// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// FairShare (R-HINT-4) and TokenBucket (R-HINT-5) on their own, without a fabric.
#include <catch2/catch.hpp>

#include "mroce/cc.hpp"

using namespace mroce;

namespace {
constexpr Time kInterval = 400'000;                   // ns
constexpr uint64_t kCapKbps = 100'000'000;            // 100 Gbit/s
// Bytes that make `kbps` over one interval.
uint32_t bytes_for(uint64_t kbps) { return uint32_t(kbps * 1000 / 8 * kInterval / 1'000'000'000); }
}  // namespace

TEST_CASE("a lone demand-limited sender is granted the whole capacity, not twice its rate (R-HINT-4)", "[cc][hint]") {
    // Before: the grant was 2 x the measured rate; with R-HINT-7 sizing the window
    // from it, a sender whose RTT rose above its minimum ratcheted down to 2 packets.
    FairShare fs(kCapKbps, kInterval);
    const uint32_t a = fs.add_sender();
    Time t = 1;
    fs.on_rx(a, 1000, t);
    for (int i = 0; i < 4; ++i) {
        fs.on_rx(a, bytes_for(1'000'000), t);  // 1 Gbit/s: far below half the capacity
        t += kInterval;
        fs.update(t);
    }
    CHECK(fs.hint_kbps(a) == kCapKbps);
}

TEST_CASE("demand-limited senders share the leftover when no sender is unlimited (R-HINT-4)", "[cc][hint]") {
    FairShare fs(kCapKbps, kInterval);
    const uint32_t a = fs.add_sender(), b = fs.add_sender();
    Time t = 1;
    for (int i = 0; i < 4; ++i) {
        fs.on_rx(a, bytes_for(1'000'000), t);   // 1 Gbit/s
        fs.on_rx(b, bytes_for(3'000'000), t);   // 3 Gbit/s
        t += kInterval;
        fs.update(t);
    }
    // Grants 2 and 6 Gbit/s, leftover 92 split evenly: 48 and 52.
    CHECK(fs.hint_kbps(a) == Approx(48'000'000).epsilon(0.01));
    CHECK(fs.hint_kbps(b) == Approx(52'000'000).epsilon(0.01));
}

TEST_CASE("a demand-limited sender beside an unlimited one keeps its grant of twice its rate (R-HINT-4)",
          "[cc][hint]") {
    FairShare fs(kCapKbps, kInterval);
    const uint32_t a = fs.add_sender(), b = fs.add_sender();
    Time t = 1;
    for (int i = 0; i < 4; ++i) {
        fs.on_rx(a, bytes_for(1'000'000), t);    // 1 Gbit/s: limited
        fs.on_rx(b, bytes_for(60'000'000), t);   // 60 Gbit/s: wants more than its share
        t += kInterval;
        fs.update(t);
    }
    CHECK(fs.hint_kbps(a) == Approx(2'000'000).epsilon(0.01));
    CHECK(fs.hint_kbps(b) == Approx(98'000'000).epsilon(0.01));
}

TEST_CASE("the pacer's burst is 64 KiB or 20 us of the hint, whichever is more (R-HINT-5)", "[cc][hint]") {
    TokenBucket tb;
    Time t = 1'000'000;
    tb.set_rate_kbps(1'000'000, t);  // 1 Gbit/s: 20 us is 2.5 KB, the floor holds
    CHECK(tb.burst_bytes() == 64 * 1024);
    tb.set_rate_kbps(100'000'000, t);  // 100 Gbit/s: 20 us is 250 KB
    CHECK(tb.burst_bytes() == 250'000);
    // After a long idle pass the whole burst may leave back to back, 60 packets of
    // 4168 B (fifteen per path on four paths: full UDP GSO trains), not 16.
    t += 1'000'000;
    int sent = 0;
    while (tb.allow(t, 4168) && sent < 1000) {
        tb.consume(t, 4168);
        ++sent;
    }
    CHECK(sent >= 60);
}
