// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The provider builds with hidden visibility; what it exports is marked here
// and versioned by exports.map (rdma-core's version nodes, so a binary linked
// against libibverbs binds to the provider's definition).
#pragma once

#define MROCE_EXPORT extern "C" __attribute__((visibility("default")))
