// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-perf's latency sample in bandwidth mode: about 1 message in 16 of
// every stretch of a stream, the first message always, and no fixed stride.
#include <catch2/catch.hpp>

#include <set>

#include "lat_sample.hpp"

using mroce::perf::kLatSampleEvery;
using mroce::perf::lat_sampled;

TEST_CASE("lat_sampled: the first message, and 1 in 16 of any long stretch", "[perf]") {
    CHECK(lat_sampled(0));
    for (uint64_t start : {uint64_t(0), uint64_t(12345), uint64_t(1) << 40}) {
        for (uint64_t len : {uint64_t(1000), uint64_t(100000)}) {
            uint64_t n = 0;
            for (uint64_t j = start; j < start + len; ++j) n += lat_sampled(j);
            const double want = double(len) / kLatSampleEvery;
            CHECK(double(n) > want * 0.97);
            CHECK(double(n) < want * 1.03);
        }
    }
}

TEST_CASE("lat_sampled: no fixed stride (slots and depths are powers of two)", "[perf]") {
    // Gaps between sampled numbers take more than one value, and every
    // residue modulo a power-of-two depth is sampled about equally.
    std::set<uint64_t> gaps;
    uint64_t last = 0;
    for (uint64_t j = 1; j < 10000; ++j)
        if (lat_sampled(j)) gaps.insert(j - last), last = j;
    CHECK(gaps.size() > 1);
    for (uint64_t depth : {uint64_t(16), uint64_t(128)}) {
        std::vector<uint64_t> per(depth, 0);
        const uint64_t n = depth * 16 * 400;
        for (uint64_t j = 0; j < n; ++j) per[j % depth] += lat_sampled(j);
        for (uint64_t r = 0; r < depth; ++r) {
            INFO("depth " << depth << " residue " << r);
            CHECK(per[r] > 400 * 0.7);
            CHECK(per[r] < 400 * 1.3);
        }
    }
}
