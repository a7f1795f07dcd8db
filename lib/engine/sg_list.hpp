// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Scatter/gather lists of work requests as the engine holds them after the
// post-time check (doc/spec.md R-SGE-*): each entry resolved to its address,
// with the message offset of its first byte. A receive's list (or a READ's)
// is where payloads land by offset, in whatever order they arrive; a send's
// is cut into segments at its entry boundaries on transmit. Not a public header.
#pragma once

#include <cstdint>
#include <cstring>

#include "mr_table.hpp"

namespace mroce {

struct LocalSeg {
    uint8_t* ptr = nullptr;
    uint32_t len = 0;    // > 0: zero-length entries are dropped at post
    uint32_t off = 0;    // message offset of ptr[0]
};

// R-MEM-4 per entry (R-SGE-2): resolves sg[0, n) into out[0, nout) and the
// sum of their lengths into total. False if an entry of nonzero length fails
// the local check; zero-length entries are not checked and not kept.
inline bool resolve_sg(const MrTable& mrs, const Sge* sg, uint32_t n, bool need_write, LocalSeg* out,
                       uint32_t& nout, uint64_t& total) {
    nout = 0;
    total = 0;
    for (uint32_t i = 0; i < n; ++i) {
        if (sg[i].length == 0) continue;
        uint8_t* p = mrs.check_local(sg[i].lkey, sg[i].addr, sg[i].length, need_write);
        if (!p) return false;
        out[nout++] = LocalSeg{p, sg[i].length, uint32_t(total)};
        total += sg[i].length;
    }
    return true;
}

// The entry of list e[0, n) holding message byte off (off below the list's total).
inline uint32_t sg_find(const LocalSeg* e, uint32_t n, uint32_t off) {
    uint32_t lo = 0, hi = n;  // the last entry with e[i].off <= off
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (e[mid].off <= off) lo = mid;
        else hi = mid;
    }
    return lo;
}

// R-SGE-4: where message bytes [off, off + len) of list e[0, n) go: their
// address when they lie in one entry (len 0 included), else nullptr (the
// payload straddles entries and must be split, sg_copy_in).
inline uint8_t* sg_dest(const LocalSeg* e, uint32_t n, uint32_t off, uint32_t len) {
    if (n == 0) return nullptr;
    const LocalSeg& s = e[sg_find(e, n, off)];
    const uint32_t in = off - s.off;
    return uint64_t(in) + len <= s.len ? s.ptr + in : nullptr;
}

// Copies src[0, len) to message bytes [off, off + len) of list e[0, n), split
// at entry boundaries: one copy of every byte. The range lies inside the list.
inline void sg_copy_in(const LocalSeg* e, uint32_t n, uint32_t off, const uint8_t* src, size_t len) {
    for (uint32_t i = sg_find(e, n, off); len && i < n; ++i) {
        const uint32_t in = off - e[i].off;
        const size_t k = len < e[i].len - in ? len : e[i].len - in;
        std::memcpy(e[i].ptr + in, src, k);
        src += k;
        off += uint32_t(k);
        len -= k;
    }
}

}  // namespace mroce
