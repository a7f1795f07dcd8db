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

// Passes of a loop that also does other work: every packet of a pass carries the
// pass's time, and the pass sends while the bucket allows.
static uint64_t run_passes(TokenBucket& tb, Time& t, Time pass, int n, uint32_t pkt = 4168) {
    uint64_t bytes = 0;
    for (int i = 0; i < n; ++i) {
        t += pass;
        for (int k = 0; k < 100000 && tb.allow(t, pkt); ++k) {
            tb.consume(t, pkt);
            bytes += pkt;
        }
    }
    return bytes;
}

TEST_CASE("the pacer's depth covers the sender's loop pass, so long passes still get the hint (R-HINT-5)",
          "[cc][hint]") {
    // Found on loopback UDP: a pass of the sender's loop took ~40 us, the bucket
    // held 20 us of the hint, so each pass was capped at half of what it had earned
    // and 4 paths sent 60 packets per pass (15 per socket, one GSO train).
    TokenBucket tb;
    Time t = 1'000'000;
    tb.set_rate_kbps(100'000'000, t);  // 12.5 bytes/ns
    tb.consume(t, 4168);
    const Time pass = 60'000;
    run_passes(tb, t, pass, 50);  // the smoothed pass converges
    CHECK(tb.pass_ns() == Approx(double(pass)).epsilon(0.05));
    CHECK(tb.burst_bytes() >= uint32_t(2 * pass * 12.5 * 0.95));
    const uint64_t bytes = run_passes(tb, t, pass, 100);
    const double rate = double(bytes) / double(100 * pass);  // bytes/ns
    INFO("rate " << rate * 8 << " Gbit/s of 100, burst " << tb.burst_bytes() << " B");
    CHECK(rate >= 12.5 * 0.98);  // before: 20 us of tokens per 60 us pass, 33 Gbit/s
    CHECK(rate <= 12.5 * 1.02);  // and never above the hint

    // Idle time is not a pass: after short passes a millisecond's pause banks
    // no more than the depth those passes set.
    TokenBucket tb2;
    Time t2 = 1'000'000;
    tb2.set_rate_kbps(100'000'000, t2);
    tb2.consume(t2, 4168);
    run_passes(tb2, t2, 5'000, 100);
    const uint32_t depth = tb2.burst_bytes();
    CHECK(depth == 250'000);  // 20 us of the hint: 2 x 5 us is less
    const uint64_t after_idle = run_passes(tb2, t2, 1'000'000, 1);
    CHECK(after_idle <= depth + 4168);
    CHECK(tb2.burst_bytes() == depth);
}


TEST_CASE("a sender of unknown rate that went quiet stops sharing before the interval closes (R-HINT-2)",
          "[cc][hint]") {
    // A long flow measured over a whole interval, then a short flow of 64 KiB
    // that is over within a microsecond: before, the short sender stayed an
    // unlimited claimant until the close (and two silent intervals after) and
    // held the long flow at half the capacity.
    FairShare fs(kCapKbps, kInterval);
    const uint32_t lng = fs.add_sender(), sht = fs.add_sender(), late = fs.add_sender();
    Time t = 1;
    fs.on_rx(lng, bytes_for(90'000'000), t);
    t += kInterval;
    fs.update(t);
    CHECK(fs.hint_kbps(lng) == kCapKbps);  // alone: everything
    t += 1000;
    fs.on_rx(sht, 65536, t);
    fs.on_rx(late, 4096, t);
    CHECK(fs.hint_kbps(lng) == Approx(kCapKbps / 3).epsilon(0.01));  // newcomers count at once
    CHECK(fs.quiet_due() <= t);
    fs.check_quiet(t);  // the look at the first byte: both still sending
    CHECK(fs.active_senders() == 3);
    // `late` keeps sending; `sht` is done.
    const Time quiet = kInterval / 8;
    for (Time k = 1; k <= 8; ++k) {
        const Time now = t + k * quiet / 4;
        fs.on_rx(late, 4096, now);
        if (now >= fs.quiet_due()) fs.check_quiet(now);
    }
    CHECK_FALSE(fs.is_active(sht));
    CHECK(fs.is_active(late));
    CHECK(fs.hint_kbps(lng) == Approx(kCapKbps / 2).epsilon(0.01));
    CHECK(fs.hint_kbps(late) == Approx(kCapKbps / 2).epsilon(0.01));  // still sending: not cut on a short look
    // Its next byte makes the quiet sender a newcomer again.
    fs.on_rx(sht, 4096, t + 3 * quiet);
    CHECK(fs.is_active(sht));
    CHECK(fs.hint_kbps(lng) == Approx(kCapKbps / 3).epsilon(0.01));
}

TEST_CASE("the pacer's allow agrees with release_time at every step, in debt or not (R-HINT-5)", "[cc][hint]") {
    // allow() answers without arithmetic while the bucket is not in debt;
    // release_time() always computes the tokens: both must give the same
    // answer, through a first packet, debts, idle gaps and rate changes.
    TokenBucket tb;
    Time t = 1'000'000;
    uint64_t rng = 88172645463325252ull;
    const auto next = [&] { rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; return rng; };
    tb.start_kbps(10'000'000, t);
    int allowed = 0, refused = 0;
    for (int i = 0; i < 200000; ++i) {
        const uint64_t r = next();
        if (r % 1000 == 0) tb.set_rate_kbps(uint32_t(1'000'000 + next() % 100'000'000), t);
        if (r % 3 == 0) t += next() % 5000;  // a new pass, sometimes an idle gap
        const uint32_t pkt = uint32_t(64 + next() % 4104);
        const bool a = tb.allow(t, pkt);
        REQUIRE(a == (tb.release_time(t, pkt) == t));
        if (a) {
            tb.consume(t, pkt);
            ++allowed;
        } else {
            ++refused;
        }
    }
    CHECK(allowed > 1000);
    CHECK(refused > 1000);  // both answers were exercised
}
