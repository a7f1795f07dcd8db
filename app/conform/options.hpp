// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Run options the tests may read.
#pragma once

namespace mroce::conform {
struct Options {
    int unused = 0;
};
}  // namespace mroce::conform
