// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Which messages a bandwidth run times (mroce-perf). Timing every message
// costs a store at post and a vector append at completion, per message, for
// percentiles that a sample gives as well; the percentiles are sorted after
// the run, from the sample only.
#pragma once

#include <cstdint>

namespace mroce::perf {

// One message in kLatSampleEvery of a stream, by its number j (0, 1, ...) in
// the stream: Fibonacci hashing spreads the chosen numbers with gaps of
// unequal lengths (no fixed stride to alias with the depth, the slots or the
// batches of a pass), and j = 0, the stream's first message, is always chosen,
// so a run of any length has a sample.
inline constexpr uint32_t kLatSampleEvery = 16;
constexpr bool lat_sampled(uint64_t j) noexcept {
    return (j * 0x9E3779B97F4A7C15ull) >> 60 == 0;  // top 4 bits: 1 in 16
}
static_assert(uint64_t(1) << 60 == ~uint64_t(0) / kLatSampleEvery + 1, "the top bits select 1 in kLatSampleEvery");

}  // namespace mroce::perf
