// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Registered memory regions and the access check of every remote operation
// (doc/spec.md R-MEM-*). Keys come from a KeyTable, so a deregistered key
// names no region again for at least 2^31 registrations (R-MEM-2, R-KEY-1).
#pragma once

#include <cstdint>

#include "key_table.hpp"
#include "mroce/engine.hpp"

namespace mroce {

class MrTable {
public:
    Status add(uint32_t pd, void* addr, uint64_t length, uint32_t access, MrInfo& out);
    Status remove(uint32_t key);
    // R-MEM-3: the remote access check. Returns true and sets *dst on success,
    // otherwise sets syn to the NAK syndrome.
    // Inline, always: it runs for every WRITE packet (doc/performance.md section 1),
    // and from several places of the receive path (the compiler left it out of line).
    [[gnu::always_inline]] bool check_remote(uint32_t rkey, uint32_t pd, uint32_t need, uint64_t addr, uint64_t len,
                                             uint8_t** dst, wire::Syndrome& syn) const noexcept {
        const Region* r = find(rkey);
        if (!r) { syn = wire::Syndrome::rkey_invalid; return false; }
        if (r->pd != pd) { syn = wire::Syndrome::pd_mismatch; return false; }
        if ((r->access & need) != need) { syn = wire::Syndrome::access_denied; return false; }
        const uint64_t base = reinterpret_cast<uintptr_t>(r->addr);
        if (!in_range(*r, base, addr, len)) {
            syn = wire::Syndrome::out_of_range;
            return false;
        }
        *dst = r->addr + (addr - base);
        return true;
    }
    // Local check for a posted work request (lkey, range; write access if the
    // NIC writes into it). Returns nullptr if it fails.
    // Inline: it runs for every posted work request (doc/performance.md section 7).
    uint8_t* check_local(uint32_t lkey, uint64_t addr, uint64_t len, bool need_write) const noexcept {
        const Region* r = find(lkey);
        if (!r) return nullptr;
        if (need_write && !(r->access & kAccessLocalWrite)) return nullptr;
        const uint64_t base = reinterpret_cast<uintptr_t>(r->addr);
        if (!in_range(*r, base, addr, len)) return nullptr;
        return r->addr + (addr - base);
    }

    bool registered(uint32_t key) const noexcept { return find(key) != nullptr; }

private:
    struct Region {
        uint8_t* addr = nullptr;
        uint64_t length = 0;
        uint32_t pd = 0;
        uint32_t access = 0;
    };
    const Region* find(uint32_t key) const noexcept { return regions_.find(key); }
    // [addr, addr + len) within the region. No `addr < base` test: add()
    // refuses a region that wraps (base + length < 2^64), so below base,
    // addr - base wraps to at least 2^64 - base > length >= length - len.
    static bool in_range(const Region& r, uint64_t base, uint64_t addr, uint64_t len) noexcept {
        return len <= r.length && addr - base <= r.length - len;
    }
    static constexpr uint32_t kMaxRegions = 1u << 24;
    KeyTable<Region> regions_{kMaxRegions};
};

}  // namespace mroce
