// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "mroce/dpdk/lcores.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "mroce/dpdk/eal.hpp"

namespace mroce::dpdk {

LcoreChoice choose_lcores(const Topology& t, unsigned want) {
    LcoreChoice c;
    if (want == 0 || t.cpus.empty()) return c;
    std::vector<CpuInfo> cpus = t.cpus;
    std::sort(cpus.begin(), cpus.end(), [](const CpuInfo& a, const CpuInfo& b) {
        return a.core != b.core ? a.core < b.core : a.cpu < b.cpu;
    });
    const bool nic_known = t.nic_numa >= 0 &&
                           std::any_of(cpus.begin(), cpus.end(), [&](const CpuInfo& x) { return x.numa == t.nic_numa; });
    const auto local = [&](const CpuInfo& x) { return !nic_known || x.numa == t.nic_numa; };
    std::set<unsigned> used_cores, used_cpus;
    // Four passes in preference order; each takes CPUs in (core, cpu) order.
    for (int pass = 0; pass < 4 && c.cpus.size() < want; ++pass) {
        const bool want_local = pass == 0 || pass == 2;
        const bool sibling_ok = pass >= 2;
        for (const CpuInfo& x : cpus) {
            if (c.cpus.size() == want) break;
            if (used_cpus.count(x.cpu)) continue;
            if (want_local != local(x) && !(pass == 1 && !nic_known)) continue;
            if (!sibling_ok && used_cores.count(x.core)) continue;
            if (used_cores.count(x.core)) c.shared_core = true;
            if (!local(x)) c.remote_numa = true;
            used_cores.insert(x.core);
            used_cpus.insert(x.cpu);
            c.cpus.push_back(x.cpu);
        }
    }
    // Fewer CPUs than lcores: wrap around over the picks so far.
    for (size_t i = 0; c.cpus.size() < want; ++i) {
        c.shared_cpu = true;
        c.cpus.push_back(c.cpus[i]);
    }
    return c;
}

std::vector<std::string> LcoreChoice::eal_args() const {
    if (cpus.empty()) return {};
    const std::set<unsigned> distinct(cpus.begin(), cpus.end());
    std::string s;
    if (distinct.size() == cpus.size()) {
        for (unsigned x : cpus) s += (s.empty() ? "" : ",") + std::to_string(x);
        return {"-l", s};
    }
    for (size_t i = 0; i < cpus.size(); ++i) s += fmt::format("{}{}@{}", i ? "," : "", i, cpus[i]);
    return {"--lcores=" + s};
}

std::string LcoreChoice::describe(const Topology& t) const {
    std::string s;
    for (size_t i = 0; i < cpus.size(); ++i) {
        const auto it = std::find_if(t.cpus.begin(), t.cpus.end(), [&](const CpuInfo& x) { return x.cpu == cpus[i]; });
        if (it == t.cpus.end()) s += fmt::format("{}lcore {} cpu {}", i ? ", " : "", i, cpus[i]);
        else s += fmt::format("{}lcore {} cpu {} (core {}, node {})", i ? ", " : "", i, cpus[i], it->core, it->numa);
    }
    s += fmt::format("; NIC node {}; topology from {}", t.nic_numa, t.source);
    if (shared_core) s += "; WARNING: two busy lcores share a physical core (not enough cores)";
    if (shared_cpu) s += "; WARNING: lcores share a CPU (fewer CPUs than lcores)";
    if (remote_numa) s += "; WARNING: lcores off the NIC's NUMA node (not enough cores there)";
    return s;
}

std::vector<unsigned> parse_core_list(const std::string& s) {
    std::vector<unsigned> out;
    size_t i = 0;
    const auto number = [&]() -> unsigned {
        if (i >= s.size() || s[i] < '0' || s[i] > '9')
            throw DpdkError(fmt::format("core list '{}': expected a number at offset {}", s, i));
        unsigned long v = 0;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
            v = v * 10 + unsigned(s[i++] - '0');
            if (v > 4095) throw DpdkError(fmt::format("core list '{}': CPU number above 4095", s));
        }
        return unsigned(v);
    };
    while (i < s.size()) {
        const unsigned a = number();
        unsigned b = a;
        if (i < s.size() && s[i] == '-') {
            ++i;
            b = number();
            if (b < a) throw DpdkError(fmt::format("core list '{}': range {}-{} runs backwards", s, a, b));
        }
        for (unsigned x = a; x <= b; ++x) out.push_back(x);
        if (i < s.size()) {
            if (s[i] != ',') throw DpdkError(fmt::format("core list '{}': unexpected '{}'", s, s[i]));
            ++i;
            if (i == s.size()) throw DpdkError(fmt::format("core list '{}': trailing comma", s));
        }
    }
    if (out.empty()) throw DpdkError("empty core list");
    return out;
}

}  // namespace mroce::dpdk
