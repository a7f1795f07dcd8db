// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// machine_topology(): the thin adapter from the real machine to the Topology
// that choose_lcores() works on. hwloc gives PUs, their cores and NUMA nodes,
// and the NUMA node of a PCI device; without hwloc the CPU affinity mask alone.
#include <sched.h>

#include <algorithm>
#include <cstdio>

#include "mroce/dpdk/lcores.hpp"

#ifdef MROCE_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace mroce::dpdk {
namespace {

Topology affinity_topology() {
    Topology t;
    t.source = "affinity (no hwloc)";
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return t;
    for (unsigned c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) t.cpus.push_back({c, c, -1});
    return t;
}

#ifdef MROCE_HAVE_HWLOC
Topology hwloc_topology(const std::string& pci) {
    Topology t;
    t.source = "hwloc";
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return affinity_topology();
    if (!pci.empty()) hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return affinity_topology();
    }
    // What this process may run on: the allowed set narrowed by the affinity mask.
    hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(topo, allowed, HWLOC_CPUBIND_PROCESS) != 0)
        hwloc_bitmap_copy(allowed, hwloc_topology_get_allowed_cpuset(topo));
    const int npu = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    for (int i = 0; i < npu; ++i) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, unsigned(i));
        if (!hwloc_bitmap_isset(allowed, pu->os_index)) continue;
        CpuInfo c;
        c.cpu = pu->os_index;
        hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
        // No core object (some VMs): each PU its own core, numbered apart from real cores.
        c.core = core ? core->logical_index : 100000 + pu->logical_index;
        const int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
        for (int n = 0; n < nn; ++n) {
            hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, unsigned(n));
            if (hwloc_bitmap_isset(node->cpuset, pu->os_index)) {
                c.numa = int(node->os_index);
                break;
            }
        }
        t.cpus.push_back(c);
    }
    hwloc_bitmap_free(allowed);
    if (!pci.empty()) {
        hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(topo, pci.c_str());
        hwloc_obj_t anc = dev ? hwloc_get_non_io_ancestor_obj(topo, dev) : nullptr;
        // Attached below one NUMA node: that node. Below the machine (one node, or unknown): -1.
        if (anc && anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1)
            t.nic_numa = hwloc_bitmap_first(anc->nodeset);
    }
    hwloc_topology_destroy(topo);
    if (t.cpus.empty()) return affinity_topology();
    return t;
}
#endif

}  // namespace

Topology machine_topology(const std::string& pci_address) {
#ifdef MROCE_HAVE_HWLOC
    return hwloc_topology(pci_address);
#else
    (void)pci_address;
    return affinity_topology();
#endif
}

}  // namespace mroce::dpdk
