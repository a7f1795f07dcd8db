// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// choose_lcores() on synthetic machines: NUMA locality to the NIC, one busy
// lcore per physical core while there are cores, and what happens when there
// are not enough. Plus the hwloc adapter on this machine (shape only).
#include <catch2/catch.hpp>

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include <set>

#include "mroce/dpdk/eal.hpp"
#include "mroce/dpdk/lcores.hpp"

using namespace mroce::dpdk;

namespace {

// nodes x cores_per_node x threads: CPU numbering as Linux does on Intel
// servers: first thread of every core first, then the second threads.
Topology machine(unsigned nodes, unsigned cores_per_node, unsigned threads, int nic_numa) {
    Topology t;
    t.source = "synthetic";
    t.nic_numa = nic_numa;
    const unsigned ncores = nodes * cores_per_node;
    for (unsigned th = 0; th < threads; ++th)
        for (unsigned c = 0; c < ncores; ++c) t.cpus.push_back({th * ncores + c, c, int(c / cores_per_node)});
    return t;
}

int node_of(const Topology& t, unsigned cpu) {
    for (const auto& c : t.cpus)
        if (c.cpu == cpu) return c.numa;
    return -2;
}
unsigned core_of(const Topology& t, unsigned cpu) {
    for (const auto& c : t.cpus)
        if (c.cpu == cpu) return c.core;
    return ~0u;
}

}  // namespace

TEST_CASE("lcores: NIC on node 1 of 2: cores of node 1, one lcore per physical core", "[dpdk][lcores]") {
    // 2 nodes x 4 cores x 2 threads: cpus 0-7 first threads (0-3 node 0, 4-7 node 1), 8-15 siblings.
    const Topology t = machine(2, 4, 2, 1);
    const LcoreChoice c = choose_lcores(t, 3);
    REQUIRE(c.cpus.size() == 3);
    CHECK(c.cpus == std::vector<unsigned>{4, 5, 6});
    std::set<unsigned> cores;
    for (unsigned x : c.cpus) {
        CHECK(node_of(t, x) == 1);
        cores.insert(core_of(t, x));
    }
    CHECK(cores.size() == 3);
    CHECK_FALSE(c.shared_core);
    CHECK_FALSE(c.remote_numa);
    CHECK_FALSE(c.shared_cpu);
    CHECK(c.eal_args() == std::vector<std::string>{"-l", "4,5,6"});
    CHECK_THAT(c.describe(t), Catch::Contains("lcore 0 cpu 4 (core 4, node 1)") && Catch::Contains("NIC node 1"));
}

TEST_CASE("lcores: more lcores than the NIC node's cores: own cores elsewhere before SMT siblings",
          "[dpdk][lcores]") {
    const Topology t = machine(2, 2, 2, 1);   // cpus 0,1 node 0; 2,3 node 1; 4-7 their siblings
    const LcoreChoice c = choose_lcores(t, 3);
    CHECK(c.cpus == std::vector<unsigned>{2, 3, 0});
    CHECK(c.remote_numa);
    CHECK_FALSE(c.shared_core);
    // All four physical cores taken: the fifth and sixth lcores are siblings, the NIC node's first.
    const LcoreChoice d = choose_lcores(t, 6);
    CHECK(d.cpus == std::vector<unsigned>{2, 3, 0, 1, 6, 7});
    CHECK(d.shared_core);
    CHECK_FALSE(d.shared_cpu);
    CHECK_THAT(d.describe(t), Catch::Contains("share a physical core"));
}

TEST_CASE("lcores: SMT siblings are never paired while a free core exists", "[dpdk][lcores]") {
    // One node, 4 cores x 2 threads, siblings numbered adjacently (AMD style): cpu 2k, 2k+1 on core k.
    Topology t;
    t.source = "synthetic";
    for (unsigned cpu = 0; cpu < 8; ++cpu) t.cpus.push_back({cpu, cpu / 2, 0});
    const LcoreChoice c = choose_lcores(t, 4);
    CHECK(c.cpus == std::vector<unsigned>{0, 2, 4, 6});
    CHECK_FALSE(c.shared_core);
    const LcoreChoice d = choose_lcores(t, 5);
    CHECK(d.cpus == std::vector<unsigned>{0, 2, 4, 6, 1});
    CHECK(d.shared_core);
}

TEST_CASE("lcores: fewer CPUs than lcores wrap around, flagged, with an EAL mapping", "[dpdk][lcores]") {
    const Topology t = machine(1, 2, 1, -1);   // two CPUs, no NUMA information
    const LcoreChoice c = choose_lcores(t, 3);
    CHECK(c.cpus == std::vector<unsigned>{0, 1, 0});
    CHECK(c.shared_cpu);
    CHECK_FALSE(c.remote_numa);   // NIC node unknown: nothing is remote
    CHECK(c.eal_args() == std::vector<std::string>{"--lcores=0@0,1@1,2@0"});
    CHECK_THAT(c.describe(t), Catch::Contains("fewer CPUs than lcores"));
}

TEST_CASE("lcores: NIC node without allowed CPUs counts as unknown", "[dpdk][lcores]") {
    Topology t = machine(2, 2, 1, 1);
    std::erase_if(t.cpus, [](const CpuInfo& c) { return c.numa == 1; });   // cpuset excludes node 1
    const LcoreChoice c = choose_lcores(t, 2);
    CHECK(c.cpus == std::vector<unsigned>{0, 1});
    CHECK_FALSE(c.remote_numa);
    CHECK(choose_lcores(Topology{}, 2).cpus.empty());
    CHECK(choose_lcores(t, 0).cpus.empty());
}

TEST_CASE("lcores: configured core lists", "[dpdk][lcores]") {
    CHECK(parse_core_list("3") == std::vector<unsigned>{3});
    CHECK(parse_core_list("0-2,5") == std::vector<unsigned>{0, 1, 2, 5});
    CHECK_THROWS_WITH(parse_core_list("3-1"), Catch::Contains("runs backwards"));
    CHECK_THROWS_WITH(parse_core_list("1,"), Catch::Contains("trailing comma"));
    CHECK_THROWS_WITH(parse_core_list("a"), Catch::Contains("expected a number"));
}

TEST_CASE("lcores: hwloc adapter describes this machine's allowed CPUs", "[dpdk][lcores]") {
    const Topology t = machine_topology("");
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    CHECK(t.cpus.size() == size_t(CPU_COUNT(&set)));
    for (const auto& c : t.cpus) CHECK(CPU_ISSET(c.cpu, &set));
    CHECK(t.nic_numa == -1);
    const LcoreChoice ch = choose_lcores(t, 1);
    REQUIRE(ch.cpus.size() == 1);
    INFO(ch.describe(t));
    CHECK(CPU_ISSET(ch.cpus[0], &set));
}

// The adapter on a described machine: hwloc reads a topology from the XML
// file named by HWLOC_XMLFILE as if it were this host's. Two packages, one
// NUMA node each, 2 cores x 2 threads each (siblings numbered n and n+4), and
// a NIC at 0000:03:00.0 under node 1.
TEST_CASE("lcores: hwloc adapter finds cores, SMT siblings, NUMA nodes and the NIC's node", "[dpdk][lcores]") {
    static const char* kXml = R"XML(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x000000ff" complete_cpuset="0x000000ff" allowed_cpuset="0x000000ff" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000033" complete_cpuset="0x00000033" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000033" complete_cpuset="0x00000033" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000011" complete_cpuset="0x00000011" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
        <object type="PU" os_index="4" cpuset="0x00000010" complete_cpuset="0x00000010" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000022" complete_cpuset="0x00000022" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="8"/>
        <object type="PU" os_index="5" cpuset="0x00000020" complete_cpuset="0x00000020" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="9"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x000000cc" complete_cpuset="0x000000cc" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="10">
      <object type="NUMANode" os_index="1" cpuset="0x000000cc" complete_cpuset="0x000000cc" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="11" local_memory="1073741824"/>
      <object type="Core" os_index="2" cpuset="0x00000044" complete_cpuset="0x00000044" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="12">
        <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="13"/>
        <object type="PU" os_index="6" cpuset="0x00000040" complete_cpuset="0x00000040" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="14"/>
      </object>
      <object type="Core" os_index="3" cpuset="0x00000088" complete_cpuset="0x00000088" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="15">
        <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="16"/>
        <object type="PU" os_index="7" cpuset="0x00000080" complete_cpuset="0x00000080" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="17"/>
      </object>
      <object type="Bridge" gp_index="18" bridge_type="0-1" depth="0" bridge_pci="0000:[03-03]">
        <object type="PCIDev" gp_index="19" pci_busid="0000:03:00.0" pci_type="0200 [8086:1572] [8086:0000] 01" pci_link_speed="0.000000"/>
      </object>
    </object>
  </object>
</topology>
)XML";
    const std::string path = "/tmp/mroce-test-topo-" + std::to_string(::getpid()) + ".xml";
    {
        std::ofstream f(path);
        f << kXml;
    }
    ::setenv("HWLOC_XMLFILE", path.c_str(), 1);
    const Topology t = machine_topology("0000:03:00.0");
    const Topology no_nic = machine_topology("");
    ::unsetenv("HWLOC_XMLFILE");
    std::remove(path.c_str());
    if (t.source != "hwloc") {
        WARN("built without hwloc: adapter test skipped (" << t.source << ")");
        return;
    }
    REQUIRE(t.cpus.size() == 8);
    CHECK(t.nic_numa == 1);
    CHECK(no_nic.nic_numa == -1);
    for (const auto& c : t.cpus) {
        INFO("cpu " << c.cpu);
        CHECK(c.numa == (c.cpu % 4 < 2 ? 0 : 1));
        CHECK(core_of(t, c.cpu) == core_of(t, c.cpu % 4));   // n and n+4 are siblings
        CHECK(core_of(t, c.cpu) != core_of(t, (c.cpu + 1) % 4));
    }
    const LcoreChoice ch = choose_lcores(t, 2);
    CHECK(ch.cpus == std::vector<unsigned>{2, 3});
    CHECK_FALSE(ch.shared_core);
    CHECK_FALSE(ch.remote_numa);
}

// Configuration check, no EAL: frames must fit one net_memif buffer (DPDK
// 22.11 corrupts frames that span buffers; test_dpdk_memif.cpp shows it).
TEST_CASE("eal args: net_memif buffers smaller than a frame are refused, naming bsize", "[dpdk][eal]") {
    const uint32_t frame = 14 + 20 + 8 + 72 + 4096;
    using V = std::vector<std::string>;
    const std::string dflt = memif_buffer_problem({"--no-huge", "--vdev=net_memif0,role=server,id=0"}, frame);
    CHECK(dflt.find("net_memif0") != std::string::npos);
    CHECK(dflt.find("2048 B (bsize)") != std::string::npos);
    CHECK(dflt.find("bsize=8192") != std::string::npos);
    CHECK_FALSE(memif_buffer_problem(V{"--vdev", "net_memif1,role=client,bsize=4096"}, frame).empty());
    CHECK(memif_buffer_problem(V{"--vdev=net_memif0,role=server,bsize=8192"}, frame).empty());
    CHECK(memif_buffer_problem(V{"--vdev", "net_memif0,bsize=8192,role=client"}, frame).empty());
    // Small frames fit the default; other vdevs and look-alike keys are not memif's bsize.
    CHECK(memif_buffer_problem(V{"--vdev=net_memif0,role=server"}, 14 + 20 + 8 + 72 + 1024).empty());
    CHECK(memif_buffer_problem(V{"--vdev=net_ring0", "--vdev=net_af_packet0,iface=veth0"}, frame).empty());
    CHECK_FALSE(memif_buffer_problem(V{"--vdev=net_memif0,xbsize=9000"}, frame).empty());
    CHECK(memif_buffer_problem(V{}, frame).empty());
}
