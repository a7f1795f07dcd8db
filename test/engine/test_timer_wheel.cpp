// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The engine's timing wheel (lib/engine/timer_wheel.hpp) against a plain
// model: random schedules, reschedules, cancels and clock jumps from 1 ns to
// hours; every node fires exactly when the clock reaches its due time (never
// early, never late), and next_due() is never later than the earliest due.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "../../lib/engine/timer_wheel.hpp"

using namespace mroce;

TEST_CASE("timer wheel fires each node once, at its due time", "[timer_wheel]") {
    std::mt19937_64 rng(42);
    constexpr int kNodes = 300;
    std::vector<TimerWheel::Node> nodes(kNodes);
    std::vector<Time> model(kNodes, TimerWheel::kNever);  // kNever: not scheduled
    Time now = 5'000'000;
    TimerWheel w(now);
    uint64_t fired = 0;
    auto draw_delay = [&]() -> Time {
        switch (rng() % 6) {
        case 0: return rng() % 2'000;                    // within a tick or two
        case 1: return rng() % 300'000;                  // level 0
        case 2: return rng() % 70'000'000;               // level 1
        case 3: return rng() % 20'000'000'000ull;        // level 2
        case 4: return rng() % 10'000'000'000'000ull;    // level 3 and beyond
        default: return 0;                               // due now
        }
    };
    for (int step = 0; step < 20000; ++step) {
        const int i = int(rng() % kNodes);
        const int op = int(rng() % 4);
        if (op <= 1) {
            const Time due = now + draw_delay();
            w.schedule(nodes[i], due);
            model[i] = due;
        } else if (op == 2) {
            w.cancel(nodes[i]);
            model[i] = TimerWheel::kNever;
        }
        REQUIRE(w.size() == size_t(std::count_if(model.begin(), model.end(), [](Time t) { return t != TimerWheel::kNever; })));
        // next_due is a lower bound of the earliest due
        const Time earliest = *std::min_element(model.begin(), model.end());
        REQUIRE(w.next_due() <= earliest);
        // advance: to the next due (exactly), or a random jump
        Time to = now;
        if (rng() % 3 == 0 && earliest != TimerWheel::kNever) to = std::max(now, earliest);
        else to = now + draw_delay() / ((rng() % 4) + 1);
        now = to;
        w.advance(now, [&](TimerWheel::Node& n) {
            const int k = int(&n - nodes.data());
            REQUIRE(model[k] != TimerWheel::kNever);
            REQUIRE(model[k] <= now);  // never early
            model[k] = TimerWheel::kNever;
            ++fired;
        });
        for (int k = 0; k < kNodes; ++k) REQUIRE(model[k] > now);  // never late: all due ones fired
        REQUIRE(w.next_due() > now);
    }
    REQUIRE(fired > 1000);
}

TEST_CASE("timer wheel: a node fired may be scheduled again from its callback", "[timer_wheel]") {
    TimerWheel w(0);
    TimerWheel::Node n;
    int count = 0;
    w.schedule(n, 1000);
    Time now = 0;
    while (count < 50 && now < 1'000'000'000) {
        now = w.next_due();
        w.advance(now, [&](TimerWheel::Node& x) {
            ++count;
            w.schedule(x, now + 777 * Time(count));
        });
    }
    REQUIRE(count == 50);
    REQUIRE(n.linked());
    w.cancel(n);
    REQUIRE(w.empty());
    REQUIRE(w.next_due() >= now);
}
