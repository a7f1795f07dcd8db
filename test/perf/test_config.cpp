// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Configuration loading: the shipped file must equal the built-in defaults (so
// the documentation cannot drift from the code), and every bad input must be
// rejected with a message naming the key and the reason.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "mroce/api.hpp"

using namespace mroce;

namespace {

std::string error_of(const std::string& text) {
    try {
        parse_config(text, "t.conf");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(accepted)";
}

bool same(const DeviceConfig& a, const DeviceConfig& b) {
    const EngineConfig &x = a.engine, &y = b.engine;
    return a.name == b.name && a.driver == b.driver && a.address == b.address && a.planes == b.planes &&
           a.port == b.port &&
           a.path_port_base == b.path_port_base && a.path_port_span == b.path_port_span &&
           a.progress == b.progress && a.spin_us == b.spin_us && a.spin_yield == b.spin_yield &&
           a.rx_batch == b.rx_batch && a.gso == b.gso && a.drive_handoff_us == b.drive_handoff_us &&
           a.verbs_part_id == b.verbs_part_id && a.inject_loss == b.inject_loss && a.inject_ce == b.inject_ce &&
           a.dpdk.pipeline == b.dpdk.pipeline && a.dpdk.placement_lcore == b.dpdk.placement_lcore &&
           a.dpdk.cc_lcore == b.dpdk.cc_lcore && a.dpdk.lcores == b.dpdk.lcores &&
           a.inject_seed == b.inject_seed &&
           a.gro == b.gro && x.max_payload == y.max_payload && x.num_paths == y.num_paths &&
           x.stream_depth == y.stream_depth && x.recv_depth == y.recv_depth && x.csn_window == y.csn_window &&
           x.max_send_sge == y.max_send_sge && x.max_recv_sge == y.max_recv_sge && x.max_inline == y.max_inline &&
           x.rx_capacity_mbps == y.rx_capacity_mbps && x.rate_hints == y.rate_hints &&
           x.accept_incoming == y.accept_incoming && x.initial_rto == y.initial_rto && x.min_rto == y.min_rto &&
           x.max_rto == y.max_rto && x.fail_after_timeouts == y.fail_after_timeouts &&
           x.probe_interval == y.probe_interval && x.probe_max_interval == y.probe_max_interval &&
           x.probe_rate == y.probe_rate && x.keepalive_interval == y.keepalive_interval &&
           x.conn_timeout == y.conn_timeout &&
           x.connect_retry == y.connect_retry && x.hint_interval == y.hint_interval && x.ack_delay == y.ack_delay &&
           x.reroute_after_marks == y.reroute_after_marks && x.tail_redundancy == y.tail_redundancy &&
           x.pack_writes == y.pack_writes;
}

}  // namespace

TEST_CASE("config: shipped config/mroce.conf equals the built-in defaults", "[config]") {
    const Config file = load_config_file(MROCE_SOURCE_ROOT "/config/mroce.conf");
    const Config builtin = parse_config("", "built-in");
    REQUIRE(file.devices.size() == 1);
    CHECK(same(file.device(), builtin.device()));
    CHECK(same(builtin.device(), DeviceConfig{}));
}

TEST_CASE("config: tail_redundancy (R-TIMER-10) is off unless set, and takes a boolean", "[config]") {
    CHECK(!parse_config("", "t.conf").device().engine.tail_redundancy);
    CHECK(parse_config("[engine]\ntail_redundancy = true\n", "t.conf").device().engine.tail_redundancy);
    CHECK(error_of("[engine]\ntail_redundancy = newest\n").find("key 'tail_redundancy'") != std::string::npos);
}

TEST_CASE("config: pack_writes (R-PACK-2) is on unless set, and takes a boolean", "[config]") {
    CHECK(parse_config("", "t.conf").device().engine.pack_writes);
    CHECK(!parse_config("[engine]\npack_writes = false\n", "t.conf").device().engine.pack_writes);
    CHECK(error_of("[engine]\npack_writes = sometimes\n").find("key 'pack_writes'") != std::string::npos);
}

TEST_CASE("config: the verbs provider's keys and the test fault injector's", "[config][verbs]") {
    const Config c = parse_config("[device v]\nverbs_part_id = 4119\ndrive_handoff_us = 5\ninject_loss = 0.01\n"
                                  "inject_ce = 0.5\ninject_seed = 7\n",
                                  "t.conf");
    const DeviceConfig& d = c.device();
    CHECK(d.verbs_part_id == 4119);
    CHECK(d.drive_handoff_us == 5);
    CHECK(d.inject_loss == 0.01);
    CHECK(d.inject_ce == 0.5);
    CHECK(d.inject_seed == 7);
    CHECK(error_of("[device v]\ninject_loss = 1.5\n") ==
          "t.conf:2: key 'inject_loss': expected a probability in 0..1 (got '1.5')");
    CHECK(error_of("[device v]\ninject_ce = lots\n") ==
          "t.conf:2: key 'inject_ce': expected a probability in 0..1 (got 'lots')");
    CHECK(error_of("[device v]\ndrive_handoff_us = -1\n").find("key 'drive_handoff_us'") != std::string::npos);
}

TEST_CASE("config: path flag, then MROCE_CONFIG, then built-in defaults", "[config]") {
    const std::string p = "/tmp/mroce-test-config-" + std::to_string(::getpid()) + ".conf";
    {
        std::ofstream f(p);
        f << "[engine]\nconn_timeout_ms = 250\n[device a]\nport = 5000\n[device b]\nport = 6000\npaths = 2\n";
    }
    ::setenv("MROCE_CONFIG", p.c_str(), 1);
    Config c = load_config();
    CHECK(c.origin == p);
    REQUIRE(c.devices.size() == 2);
    CHECK(c.device().name == "a");
    CHECK(c.device("b").port == 6000);
    CHECK(c.device("b").engine.num_paths == 2);
    CHECK(c.device("a").engine.num_paths == 4);
    CHECK(c.device("a").engine.conn_timeout == 250'000'000);  // [engine] reaches every device
    CHECK(c.device("b").engine.conn_timeout == 250'000'000);
    CHECK_THROWS_AS(c.device("zz"), ConfigError);
    ::unsetenv("MROCE_CONFIG");
    CHECK(load_config().origin == "built-in defaults");
    CHECK(load_config(p).device("b").port == 6000);
    std::remove(p.c_str());
    CHECK_THROWS_WITH(load_config(p), Catch::Contains("cannot read"));
}

TEST_CASE("config: values are parsed with their units", "[config]") {
    const Config c = parse_config("[device d]\nprogress = auto\nmin_rto_us = 250\nconn_timeout_ms = 3\n"
                                  "max_payload = 8192   # jumbo\ngso = off\naddress = 10.0.0.1\n"
                                  "spin_yield = true\n");
    const DeviceConfig& d = c.device();
    CHECK(d.progress == ProgressMode::automatic);
    CHECK(d.engine.min_rto == 250'000);
    CHECK(d.engine.conn_timeout == 3'000'000);
    CHECK(d.engine.max_payload == 8192);
    CHECK_FALSE(d.gso);
    CHECK(d.spin_yield);
    CHECK(d.address == "10.0.0.1");
}

TEST_CASE("config: driver = dpdk keys", "[config][dpdk]") {
    const Config c = parse_config("[device d]\ndriver = dpdk\naddress = 10.0.1.1\n"
                                  "eal_args = --no-huge --no-pci --vdev=net_memif0,role=server\n"
                                  "dpdk_port = net_memif0\nlcores = 1\nneighbours = 10.0.1.2 02:00:00:00:01:02, "
                                  "10.0.1.3 02:00:00:00:01:03\nrx_mbufs = 8192\ntx_max_l3 = 4196\n");
    const DpdkDeviceConfig& p = c.device().dpdk;
    CHECK(p.eal_args == "--no-huge --no-pci --vdev=net_memif0,role=server");
    CHECK(p.port == "net_memif0");
    CHECK(p.lcores == "1");
    CHECK(p.rx_mbufs == 8192);
    CHECK(p.hdr_mbufs == 0);
    CHECK(p.tx_max_l3 == 4196);
    CHECK(p.neighbours == "10.0.1.2 02:00:00:00:01:02, 10.0.1.3 02:00:00:00:01:03");
}

// The pipeline arrangement of a dpdk device (architecture 4.2; the memif runs
// are the perf-dpdk-memif-pipeline-* tests).
TEST_CASE("config: pipeline and its stage lcores", "[config][dpdk]") {
    const auto dev = [](const std::string& keys) {
        return parse_config("[device d]\ndriver = dpdk\naddress = 10.0.1.1\n" + keys, "t.conf").device();
    };
    CHECK(DpdkDeviceConfig{}.pipeline == PipelineMode::none);
    CHECK(dev("").dpdk.pipeline == PipelineMode::none);
    CHECK(dev("pipeline = none\n").dpdk.pipeline == PipelineMode::none);
    const DeviceConfig p = dev("pipeline = placement\nplacement_lcore = 2\n");
    CHECK(p.dpdk.pipeline == PipelineMode::placement);
    CHECK(p.dpdk.placement_lcore == 2);
    CHECK(p.dpdk.cc_lcore == -1);
    const DeviceConfig pc = dev("pipeline = placement+cc\nplacement_lcore = 1\ncc_lcore = 2\nlcores = (0,1,2)@(0,1)\n");
    CHECK(pc.dpdk.pipeline == PipelineMode::placement_cc);
    CHECK(pc.dpdk.placement_lcore == 1);
    CHECK(pc.dpdk.cc_lcore == 2);
    CHECK(pc.dpdk.lcores == "(0,1,2)@(0,1)");
    CHECK(dev("lcores = 0@0,1@1,2@0\n").dpdk.lcores == "0@0,1@1,2@0");
    CHECK(std::string(to_string(PipelineMode::placement_cc)) == "placement+cc");
    // The engine is built for the arrangement by the Device, not by the loader.
    CHECK_FALSE(pc.engine.deferred_placement);
    CHECK_FALSE(pc.engine.offload_cc);

    const std::string d = "[device d]\ndriver = dpdk\n";
    const struct {
        std::string text, want;
    } cases[] = {
        {d + "pipeline = cc\n", "t.conf:3: key 'pipeline': expected none, placement or placement+cc (got 'cc')"},
        {d + "pipeline = placement + cc\n", "t.conf:3: key 'pipeline': expected none, placement or placement+cc"},
        {d + "pipeline = placement\nplacement_lcore = -1\n", "t.conf:4: key 'placement_lcore': expected an integer"},
        {d + "pipeline = placement\nplacement_lcore = 5000\n", "t.conf:4: key 'placement_lcore': out of range 0..1023"},
        {d + "placement_lcore = 1\n", "t.conf:3: key 'placement_lcore': no placement stage with pipeline = none"},
        {d + "pipeline = placement\ncc_lcore = 2\n",
         "t.conf:4: key 'cc_lcore': no CC stage with pipeline = placement (give pipeline = placement+cc)"},
        {d + "pipeline = placement+cc\nplacement_lcore = 2\ncc_lcore = 2\n",
         "t.conf:5: key 'cc_lcore': lcore 2 is the placement stage's too"},
        {d + "lcores = (0,1@(0)\n", "t.conf:3: key 'lcores': expected auto, a core list"},
        {d + "lcores = 0@\n", "t.conf:3: key 'lcores': expected auto, a core list"},
        // Not for udp devices: refused where it is written.
        {"[device u]\ndriver = udp\npipeline = placement\n",
         "t.conf:3: key 'pipeline': only for driver = dpdk (device 'u' uses udp)"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        CHECK_THAT(error_of(c.text), Catch::Contains(c.want));
    }
}

TEST_CASE("api: a udp device built with a pipeline is refused naming the key", "[api][dpdk]") {
    DeviceConfig d;
    d.driver = "udp";
    d.address = "127.0.0.1";
    d.port = 31977;
    d.dpdk.pipeline = PipelineMode::placement;
    CHECK_THROWS_WITH(open_device(d), Catch::Contains("device 'default': key 'pipeline': placement: udp 127.0.0.1:31977") &&
                                          Catch::Contains("has no stage cores"));
    d.dpdk.pipeline = PipelineMode::none;
    CHECK_NOTHROW(open_device(d));
}

TEST_CASE("config: the commented dpdk example in config/mroce.conf parses", "[config][dpdk]") {
    std::ifstream f(MROCE_SOURCE_ROOT "/config/mroce.conf");
    std::string line, text;
    bool in = false;
    while (std::getline(f, line)) {
        if (line == "# [device memif]") in = true;
        if (in && line.rfind("# ", 0) == 0) text += line.substr(2) + "\n";
    }
    REQUIRE_FALSE(text.empty());
    const Config c = parse_config(text, "mroce.conf example");
    const DeviceConfig& d = c.device();
    CHECK(d.driver == "dpdk");
    CHECK(d.dpdk.lcores == "auto");
    CHECK(d.dpdk.tx_max_l3 == 4196);
    CHECK(d.dpdk.mbuf_cache == DpdkDeviceConfig{}.mbuf_cache);   // the example shows the default
    CHECK(d.dpdk.neighbours == "10.0.1.2 02:00:00:00:01:02");
    // The two-plane example: one port and one neighbour table per plane.
    const DeviceConfig& d2 = c.device("memif2");
    CHECK(d2.planes == std::vector<std::string>{"10.0.1.1", "10.0.2.1"});
    CHECK(d2.dpdk.port == "net_memif0, net_memif1");
    CHECK(d2.dpdk.neighbours == "10.0.1.2 02:00:00:00:01:02 | 10.0.2.2 02:00:00:00:02:02");
}

TEST_CASE("config: bad configuration names the key and the reason", "[config]") {
    struct Case {
        const char* text;
        const char* want;
    } cases[] = {
        {"[device d]\nport = 70000\n", "t.conf:2: key 'port': out of range 1..65535 (got '70000')"},
        {"[device d]\nport = abc\n", "key 'port': expected an integer"},
        {"[device d]\nport = -1\n", "key 'port': expected an integer"},
        {"[device d]\ndriver = rdma\n", "key 'driver': expected udp or dpdk (got 'rdma')"},
        {"[device d]\naddress = 300.1.1.1\n", "key 'address': expected an IPv4 address"},
        {"[device d]\nprogress = sometimes\n", "key 'progress': expected manual or auto"},
        {"[engine]\ncsn_window = 1000\n", "key 'csn_window': must be a power of two"},
        {"[engine]\npaths = 0\n", "key 'paths': out of range 1..256"},
        {"[engine]\nmax_payload = 9001\n", "key 'max_payload': out of range 64..9000"},
        {"[engine]\nmax_payload = big\n", "key 'max_payload': expected auto or an integer in 64..9000"},
        {"[engine]\nmax_payload = -1\n", "key 'max_payload': expected auto or an integer in 64..9000"},
        {"[engine]\nrate_hints = maybe\n", "key 'rate_hints': expected true or false"},
        {"[device d]\nspin_yield = 2\n", "key 'spin_yield': expected true or false"},
        {"[engine]\nport = 1\n", "key 'port': unknown in [engine]"},
        {"[device d]\ncolour = blue\n", "t.conf:2: key 'colour': unknown in [device d]"},
        {"port = 1\n", "key 'port' outside a section"},
        {"[devices]\n", "unknown section [devices]"},
        {"[device d\n", "section header without ']'"},
        {"[device d]\njust words\n", "expected 'key = value'"},
        {"[device d]\n[device d]\n", "t.conf:2: device 'd' defined twice (first at line 1)"},
        {"[engine]\npaths = 2\n[device d]\n[engine]\n", "t.conf:4: section [engine] repeated (first at line 1)"},
        {"[engine]\npaths = 2\n\npaths = 3\n", "t.conf:4: key 'paths': repeated in [engine] (first at line 2)"},
        {"[device d]\nport = 5000\ngso = off\nport = 5001\n",
         "t.conf:4: key 'port': repeated in [device d] (first at line 2)"},
        {"[device d]\ncolour = blue\ncolour = red\n", "t.conf:3: key 'colour': repeated in [device d]"},
        {"[device d]\nport = 5000\npath_port_base = 4990\npath_port_span = 16\n",
         "key 'path_port_base': path ports overlap the listen port"},
        {"[device d]\nport = 65530\n", "key 'path_port_span': path ports run past 65535"},
        {"[engine]\nmin_rto_us = 5000\nmax_rto_us = 1000\n", "key 'min_rto_us': larger than max_rto_us"},
        // driver = dpdk keys
        {"[device d]\neal_args = --no-huge\n", "t.conf:2: key 'eal_args': only for driver = dpdk (device 'd' uses udp)"},
        {"[device d]\ndriver = dpdk\neal_args = -l 3 --no-pci\n", "key 'eal_args': choose cores with key 'lcores'"},
        {"[device d]\ndriver = dpdk\neal_args = --file-prefix x\n", "key 'eal_args': the file prefix is per process"},
        {"[device d]\ndriver = dpdk\neal_args = --no-pci -l0-1\n", "choose cores with key 'lcores', not -l0-1"},
        {"[device d]\ndriver = dpdk\neal_args = --lcores=0@1\n", "choose cores with key 'lcores'"},
        {"[device d]\ndriver = dpdk\nlcores = two\n", "key 'lcores': expected auto, a core list"},
        {"[device d]\ndriver = dpdk\nlcores = 1,,2\n", "key 'lcores': expected auto, a core list"},
        {"[device d]\ndriver = dpdk\nneighbours = 10.0.0.2\n", "key 'neighbours': '' is not a MAC address"},
        {"[device d]\ndriver = dpdk\nneighbours = 10.0.0.2 02:00:00:00:00:01, 10.0.0.300 02:00:00:00:00:02\n",
         "key 'neighbours': '10.0.0.300' is not an IPv4 address"},
        {"[device d]\ndriver = dpdk\nneighbours = 10.0.0.2 02:00:00:00:00:1\n", "is not a MAC address"},
        {"[device d]\ndriver = dpdk\nneighbours = 10.0.0.2 02:00:00:00:00:01, 10.0.0.2 02:00:00:00:00:02\n",
         "neighbour 10.0.0.2 listed twice"},
        {"[device d]\ndriver = dpdk\nmac = 02:00\n", "key 'mac': expected a MAC address"},
        {"[device d]\ndriver = dpdk\nrx_desc = 10\n", "key 'rx_desc': out of range 64..32768"},
        {"[device d]\ndriver = dpdk\nmbuf_cache = 600\n", "key 'mbuf_cache': out of range 0..512"},
        {"[device d]\ndriver = dpdk\neal_memory_mb = 1\n", "key 'eal_memory_mb': out of range"},
        {"[device d]\ndriver = dpdk\nrx_data_room = 100\n", "key 'rx_data_room': must exceed the 128 B"},
        {"[device d]\ndriver = dpdk\ntx_max_l3 = 1500\n", "key 'tx_max_l3': 1500 B cannot carry max_payload 4096"},
        {"[device d]\ndriver = dpdk\nmax_payload = 8192\ntx_max_l3 = 4196\n",
         "key 'tx_max_l3': 4196 B cannot carry max_payload 8192 (needs 8292)"},
    };
    for (const auto& c : cases) {
        INFO(c.text);
        CHECK_THAT(error_of(c.text), Catch::Contains(c.want));
    }
}

TEST_CASE("config: planes, one address per plane (R-PLANE-1)", "[config][planes]") {
    const Config c = parse_config("[device d]\nplanes = 10.1.0.2, 10.2.0.2,10.3.0.2\n", "t.conf");
    const DeviceConfig& d = c.device();
    REQUIRE(d.planes == std::vector<std::string>{"10.1.0.2", "10.2.0.2", "10.3.0.2"});
    CHECK(d.address == "10.1.0.2");  // plane 0 is the device's address
    CHECK(parse_config("[device d]\nplanes = 127.0.0.1\n", "t.conf").device().planes.size() == 1);
    CHECK(parse_config("", "t.conf").device().planes.empty());
    struct Case {
        const char* text;
        const char* want;
    } cases[] = {
        {"[device d]\nplanes =\n", "t.conf:2: key 'planes': expected one or more IPv4 addresses"},
        {"[device d]\nplanes = 10.1.0.2, 10.2.0.300\n", "t.conf:2: key 'planes': '10.2.0.300' is not an IPv4 address"},
        {"[device d]\nplanes = 10.1.0.2 10.2.0.2\n", "t.conf:2: key 'planes': '10.1.0.2 10.2.0.2' is not an IPv4 address"},
        {"[device d]\nplanes = 10.1.0.2,,10.2.0.2\n", "t.conf:2: key 'planes': empty entry"},
        {"[device d]\nplanes = 10.1.0.2, 10.2.0.2,\n", "t.conf:2: key 'planes': empty entry"},
        {"[device d]\nplanes = 10.1.0.2, 10.2.0.2, 10.1.0.2\n",
         "t.conf:2: key 'planes': plane address 10.1.0.2 listed twice"},
        {"[device d]\nplanes = 10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5,10.0.0.6,10.0.0.7,10.0.0.8,10.0.0.9\n",
         "t.conf:2: key 'planes': more than 8 planes"},
        {"[device d]\naddress = 10.1.0.2\nplanes = 10.1.0.2, 10.2.0.2\n",
         "t.conf:3: key 'planes': give either address (one plane) or planes (one address per plane), not both"},
        {"[device d]\nplanes = 10.1.0.2, 10.2.0.2\naddress = 10.1.0.2\n", "t.conf:3: key 'address': give either"},
        {"[device d]\nplanes = 10.1.0.2\nplanes = 10.2.0.2\n", "t.conf:3: key 'planes': repeated in [device d]"},
        {"[engine]\nplanes = 10.1.0.2\n", "t.conf:2: key 'planes': unknown in [engine]"},
        {"[device d]\nport = 1000\npath_port_span = 4096\nplanes = 10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5,10.0.0.6,"
         "10.0.0.7,10.0.0.8\n",
         "key 'path_port_span': planes x (path_port_span + 1) sockets exceed 32767"},
    };
    for (const auto& k : cases) {
        INFO(k.text);
        CHECK_THAT(error_of(k.text), Catch::Contains(k.want));
    }
}

// driver = dpdk with planes: one ethdev, neighbour table (and MAC) per plane.
TEST_CASE("config: dpdk planes, one port and neighbour table per plane (R-PLANE-1)", "[config][planes][dpdk]") {
    const Config c = parse_config("[device d]\ndriver = dpdk\nplanes = 10.1.0.1, 10.2.0.1\n"
                                  "dpdk_port = net_memif0, net_memif1\n"
                                  "neighbours = 10.1.0.2 02:00:00:00:01:02, 10.1.0.3 02:00:00:00:01:03 | "
                                  "10.2.0.2 02:00:00:00:02:02\n"
                                  "mac = 02:00:00:00:01:01, 02:00:00:00:02:01\n",
                                  "t.conf");
    const DeviceConfig& d = c.device();
    CHECK(d.planes == std::vector<std::string>{"10.1.0.1", "10.2.0.1"});
    CHECK(d.dpdk.port == "net_memif0, net_memif1");
    CHECK(d.dpdk.neighbours == "10.1.0.2 02:00:00:00:01:02, 10.1.0.3 02:00:00:00:01:03 | 10.2.0.2 02:00:00:00:02:02");
    CHECK(d.dpdk.mac == "02:00:00:00:01:01, 02:00:00:00:02:01");
    // No mac: each port's own.
    CHECK_NOTHROW(parse_config("[device d]\ndriver = dpdk\nplanes = 10.1.0.1, 10.2.0.1\ndpdk_port = 0, 1\n"
                               "neighbours = 10.1.0.2 02:00:00:00:01:02 | 10.2.0.2 02:00:00:00:02:02\n", "t.conf"));
    const std::string two = "[device d]\ndriver = dpdk\nplanes = 10.1.0.1, 10.2.0.1\n";
    const std::string ports = "dpdk_port = net_memif0, net_memif1\n";
    const std::string nbrs = "neighbours = 10.1.0.2 02:00:00:00:01:02 | 10.2.0.2 02:00:00:00:02:02\n";
    struct Case {
        std::string text;
        const char* want;
    } cases[] = {
        {two + "dpdk_port = net_memif0\n" + nbrs,
         "t.conf:4: key 'dpdk_port': 1 entry for 2 planes (key 'planes' at line 3) in device 'd': give one per plane"},
        {two + "dpdk_port = net_memif0, net_memif1, net_memif2\n" + nbrs, "t.conf:4: key 'dpdk_port': 3 entries for 2 planes"},
        {two + ports + "neighbours = 10.1.0.2 02:00:00:00:01:02\n",
         "t.conf:5: key 'neighbours': 1 entry for 2 planes (key 'planes' at line 3) in device 'd': give one per plane, "
         "plane 0 first (neighbour tables, separated by '|')"},
        {two + ports + nbrs + "mac = 02:00:00:00:01:01\n", "t.conf:6: key 'mac': 1 entry for 2 planes"},
        {two + nbrs, "t.conf:3: key 'dpdk_port': needed with 2 planes in device 'd'"},
        {two + "dpdk_port = net_memif0, net_memif0\n" + nbrs,
         "t.conf:4: key 'dpdk_port': port net_memif0 listed for planes 0 and 1 (each plane is its own port)"},
        {two + "dpdk_port = net_memif0,\n" + nbrs, "t.conf:4: key 'dpdk_port': empty entry"},
        {two + ports + "neighbours = 10.1.0.2 02:00:00:00:01:02 | 10.2.0.300 02:00:00:00:02:02\n",
         "t.conf:5: key 'neighbours': '10.2.0.300' is not an IPv4 address"},
        {two + ports + "neighbours = 10.1.0.2 02:00:00:00:01:02 |\n", "t.conf:5: key 'neighbours': empty entry"},
        {two + ports + nbrs + "mac = 02:00:00:00:01:01, 02:00\n", "t.conf:6: key 'mac': expected a MAC address"},
        // One plane: one port, one table.
        {"[device d]\ndriver = dpdk\naddress = 10.1.0.1\ndpdk_port = net_memif0, net_memif1\n",
         "t.conf:4: key 'dpdk_port': 2 entries for 1 plane in device 'd'"},
        {"[device d]\ndriver = dpdk\nneighbours = 10.1.0.2 02:00:00:00:01:02 | 10.2.0.2 02:00:00:00:02:02\n",
         "t.conf:3: key 'neighbours': 2 entries for 1 plane"},
    };
    for (const auto& k : cases) {
        INFO(k.text);
        CHECK_THAT(error_of(k.text), Catch::Contains(k.want));
    }
}

TEST_CASE("api: planes of a device and their counters (R-PLANE-5)", "[api][planes]") {
    DeviceConfig d;
    d.port = 47311;
    d.planes = {"127.0.0.1", "127.0.0.2"};
    d.address = "127.0.0.1";
    auto dev = open_device(d);
    REQUIRE(dev->num_planes() == 2);
    PlaneInfo p;
    REQUIRE(dev->query_plane(1, p));
    CHECK(p.address == "127.0.0.2");
    CHECK(p.tx_packets == 0);
    CHECK_FALSE(dev->query_plane(2, p));
    DeviceConfig one;
    one.port = 47331;
    auto dev1 = open_device(one);
    CHECK(dev1->num_planes() == 1);
    REQUIRE(dev1->query_plane(0, p));
    CHECK(p.address == "127.0.0.1");
}

TEST_CASE("api: open_device errors are exceptions naming the cause", "[api]") {
    DeviceConfig d;
    d.driver = "udp";
    d.address = "203.0.113.7";  // not a local address: bind fails
    d.port = 31999;
    CHECK_THROWS_WITH(open_device(d), Catch::Contains("203.0.113.7"));
}

TEST_CASE("config: max_payload = auto is the default and sizes segments from the MTU (R-SEG-4)", "[config]") {
    CHECK(DeviceConfig{}.engine.max_payload == kMaxPayloadAuto);
    CHECK(parse_config("", "t").device().engine.max_payload == kMaxPayloadAuto);
    CHECK(parse_config("[engine]\nmax_payload = 4096\n[device d]\nmax_payload = auto\n", "t").device().engine.max_payload ==
          kMaxPayloadAuto);
    CHECK(parse_config("[device d]\nmax_payload = 2000\n", "t").device().engine.max_payload == 2000);
    // The largest power of two up to 8192 whose datagram (+ 28 B IPv4/UDP + 72 B header) fits.
    CHECK(max_payload_for_mtu(65536) == 8192);   // loopback
    CHECK(max_payload_for_mtu(9000) == 8192);    // jumbo frames
    CHECK(max_payload_for_mtu(8292) == 8192);
    CHECK(max_payload_for_mtu(8291) == 4096);
    CHECK(max_payload_for_mtu(4196) == 4096);
    CHECK(max_payload_for_mtu(1500) == 1024);    // plain Ethernet
    CHECK(max_payload_for_mtu(1280) == 1024);
    CHECK(max_payload_for_mtu(576) == 256);
    CHECK(max_payload_for_mtu(164) == 64);
    CHECK(max_payload_for_mtu(163) == 0);
    CHECK(max_payload_for_mtu(0) == 4096);       // unknown link
}

TEST_CASE("config: the same key in [engine] and in a device is an override, not a repeat", "[config]") {
    const Config c = parse_config("[engine]\npaths = 2\n[device a]\npaths = 3\n[device b]\npaths = 5\n", "t");
    CHECK(c.device("a").engine.num_paths == 3);
    CHECK(c.device("b").engine.num_paths == 5);
}

TEST_CASE("config: a file that cannot be read is an error naming the file and why", "[config]") {
    const std::string dir = "/tmp/mroce-test-config-dir-" + std::to_string(::getpid());
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    // A directory opens, and a stream reads it as an empty file: every key at its default.
    CHECK_THROWS_WITH(load_config_file(dir), Catch::Contains(dir + ": cannot read configuration file: it is a directory"));
    CHECK_THROWS_WITH(load_config(dir), Catch::Contains("it is a directory"));
    ::rmdir(dir.c_str());
    CHECK_THROWS_WITH(load_config_file(dir), Catch::Contains(dir + ": cannot read configuration file: No such file"));
    // Unreadable: a mode-000 file stops anyone but root; root is stopped by
    // a write-only sysctl (the check happens in open either way).
    std::string unreadable = "/tmp/mroce-test-config-000-" + std::to_string(::getpid());
    {
        std::ofstream f(unreadable);
        f << "[engine]\n";
    }
    ::chmod(unreadable.c_str(), 0);
    const std::string path = ::geteuid() == 0 ? "/proc/sys/vm/compact_memory" : unreadable;
    if (::access(path.c_str(), F_OK) == 0) {
        CHECK_THROWS_WITH(load_config_file(path), Catch::Contains(path + ": cannot read configuration file: Permission denied"));
    }
    std::remove(unreadable.c_str());
}
