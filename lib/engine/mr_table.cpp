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
    size_t idx = 0;
    while (idx < regions_.size() && regions_[idx].valid) ++idx;
    if (idx == regions_.size()) {
        if (regions_.size() >= (1u << 24) - 1) return Status::no_memory;
        regions_.emplace_back();
        gen_.push_back(0);
    }
    uint8_t g = uint8_t(++gen_[idx]);
    if (g == 0) g = uint8_t(++gen_[idx]);
    Region& r = regions_[idx];
    r.addr = static_cast<uint8_t*>(addr);
    r.length = length;
    r.pd = pd;
    r.access = access;
    r.key = (uint32_t(idx + 1) << 8) | g;
    r.valid = true;
    out = MrInfo{r.key, r.key, pd, access, r.addr, length};
    return Status::ok;
}

Status MrTable::remove(uint32_t key) {
    const Region* r = find(key);
    if (!r) return Status::no_such_object;
    regions_[(key >> 8) - 1].valid = false;
    return Status::ok;
}

uint8_t* MrTable::check_local(uint32_t lkey, uint64_t addr, uint64_t len, bool need_write) const noexcept {
    const Region* r = find(lkey);
    if (!r) return nullptr;
    if (need_write && !(r->access & kAccessLocalWrite)) return nullptr;
    const uint64_t base = reinterpret_cast<uintptr_t>(r->addr);
    if (addr < base || len > r->length || addr - base > r->length - len) return nullptr;
    return r->addr + (addr - base);
}

}  // namespace mroce
