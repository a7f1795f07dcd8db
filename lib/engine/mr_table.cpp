// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "mr_table.hpp"

namespace mroce {

Status MrTable::add(uint32_t pd, void* addr, uint64_t length, uint32_t access, MrInfo& out) {
    if (!addr && length) return Status::invalid_argument;
    if (uint64_t(reinterpret_cast<uintptr_t>(addr)) + length < uint64_t(reinterpret_cast<uintptr_t>(addr)))
        return Status::invalid_argument;
    // R-MEM-1: remote write or atomic access requires local write (as in verbs).
    if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(access & kAccessLocalWrite))
        return Status::invalid_argument;
    Region r;
    r.addr = static_cast<uint8_t*>(addr);
    r.length = length;
    r.pd = pd;
    r.access = access;
    const uint32_t key = regions_.add(r);
    if (!key) return Status::no_memory;
    out = MrInfo{key, key, pd, access, r.addr, length};
    return Status::ok;
}

Status MrTable::remove(uint32_t key) { return regions_.remove(key) ? Status::ok : Status::no_such_object; }

}  // namespace mroce
