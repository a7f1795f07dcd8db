// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// lcore placement. The choice is a pure function over a topology description
// (tested on synthetic machines); machine_topology() builds the description
// of the real machine with hwloc, the only part that looks at the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mroce::dpdk {

// One hardware thread (hwloc PU) the process may run on.
struct CpuInfo {
    unsigned cpu = 0;    // OS index (what the EAL's -l takes)
    unsigned core = 0;   // physical core id, unique over the machine: SMT siblings share it
    int numa = -1;       // NUMA node, -1 unknown
};

struct Topology {
    std::vector<CpuInfo> cpus;   // allowed CPUs only
    int nic_numa = -1;           // NUMA node of the port's device; -1: unknown or virtual (memif, ring)
    std::string source;          // "hwloc", "sysfs", "synthetic": printed with the choice
};

struct LcoreChoice {
    std::vector<unsigned> cpus;  // cpus[i] runs lcore i (the first is the EAL main lcore)
    bool shared_core = false;    // two busy lcores on one physical core (SMT siblings)
    bool shared_cpu = false;     // fewer CPUs than lcores: lcores share a CPU
    bool remote_numa = false;    // some lcore off the NIC's NUMA node although it has one
    // The EAL option that places them: "-l 2,3", or "--lcores=0@2,1@2" when a CPU repeats.
    std::vector<std::string> eal_args() const;
    // One line: the CPUs, their cores and nodes, and why (printed at start).
    std::string describe(const Topology& t) const;
};

// Picks `want` CPUs for busy lcores. Order of preference: a physical core of
// its own on the NIC's node, a physical core of its own on another node, an
// SMT sibling on the NIC's node, any sibling; with fewer CPUs than lcores the
// list wraps around (flagged). Deterministic: ties go to the lowest core, then CPU.
LcoreChoice choose_lcores(const Topology& t, unsigned want);

// Parses a configured core list ("2", "2,3", "0-3"); throws DpdkError naming the reason.
std::vector<unsigned> parse_core_list(const std::string& s);

// The real machine through hwloc (allowed CPUs of this process; NIC node from
// the PCI address, empty or not PCI: unknown). Without hwloc at build time, or if
// it fails: every allowed CPU its own core on node -1 (source "affinity").
Topology machine_topology(const std::string& pci_address);

}  // namespace mroce::dpdk
