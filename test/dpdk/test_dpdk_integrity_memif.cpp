// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The all-operation integrity workload (integrity_workload.hpp) between two
// processes over net_memif, at 0, 1 and 10% injected receive loss. memif
// connects two processes only, so each case forks a server (the responder)
// and a client (the requester), each with its own EAL; the test process
// itself never initialises the EAL. Every case runs in both lcore
// arrangements: run to completion (one lcore per process) and pipeline
// (each process: PipelineLoop on its main lcore, copies on a second lcore).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <fmt/format.h>

#include "integrity_process.hpp"

using namespace mroce;
using namespace mroce::test;

namespace {

constexpr uint32_t kIpServer = 0x0a000101, kIpClient = 0x0a000102;
constexpr const char* kMacServer = "02:00:00:00:01:01";
constexpr const char* kMacClient = "02:00:00:00:01:02";

void run_memif(double loss, uint64_t seed, bool pipeline) {
    const Workload w = Workload::make(seed, 4, 200, 16u << 20);
    SharedLayout mem(w.mem);
    REQUIRE(mem.ok());
    const std::string sock = fmt::format("/tmp/mroce-integ-memif-{}-{}.sock", ::getpid(), seed);
    ::unlink(sock.c_str());
    auto side = [&](bool server) {
        ProcSide ps;
        ps.requester = !server;
        ps.name = server ? "memif-responder" : "memif-requester";
        // bsize: every frame must fit one memif buffer. DPDK 22.11's memif TX
        // never clears the first descriptor's flags on the client-to-server
        // ring, so a frame spread over several buffers leaves MEMIF_DESC_FLAG_NEXT
        // behind in its first slot, and a later one-buffer frame there is chained
        // by the server's RX with slots past the ring head: stale frames replayed
        // by the million, garbage, and eventually a crash. With the default 2 KiB
        // buffers and mixed frame sizes this happens within a second.
        // One CPU each: both busy-poll. Pipeline: a placement lcore and a CC
        // lcore beside each engine lcore, all six floating over the two CPUs.
        const std::string lcores = pipeline ? "(0,1,2)@(0,1)" : (server ? "0" : "1");
        ps.eal_args = {pipeline ? "--lcores" : "-l", lcores, "--no-huge", "--no-pci", "-m", "256", "--log-level", "lib.eal:warning",
                       fmt::format("--vdev=net_memif0,role={},id=0,socket={},socket-abstract=no,mac={},bsize=8192",
                                   server ? "server" : "client", sock, server ? kMacServer : kMacClient)};
        ps.file_prefix = fmt::format("mroce-test-imemif-{}-{}-{}", server ? "s" : "c", ::getpid(), seed);
        ps.local_ip = server ? kIpServer : kIpClient;
        ps.peer_ip = server ? kIpClient : kIpServer;
        ps.peer_mac = dpdk::parse_mac(server ? kMacClient : kMacServer);
        // memif reports MTU 1500 whatever its buffer size. RX mbufs hold a whole
        // frame, so the engine gets a pointer into the mbuf (no linearising copy).
        ps.tx_max_l3 = 28 + wire::kMaxHeaderLen + 4096;
        ps.rx_data_room = 128 + 4352;
        ps.max_payload = 4096;
        ps.loss = loss;
        ps.seed = seed;
        ps.w = &w;
        ps.mem_a = mem.a;
        ps.mem_b = mem.b;
        ps.seconds = 40;
        ps.pipeline = pipeline;
        ps.close_after_peer = server;
        return ps;
    };
    const pid_t srv = fork_side(side(true));
    REQUIRE(srv > 0);
    // Start the client once the server listens: a client that finds no socket
    // may not come back to it soon enough.
    struct stat sb{};
    for (int i = 0; i < 1000 && ::stat(sock.c_str(), &sb) != 0; ++i) ::usleep(10 * 1000);
    const pid_t cli = fork_side(side(false));
    const auto [rs, rc] = wait_pair(srv, cli, 50);
    ::unlink(sock.c_str());
    REQUIRE(cli > 0);
    INFO("loss " << loss << " seed " << seed << " pipeline " << pipeline << " (children print their reports above)");
    CHECK(rs == 0);
    CHECK(rc == 0);
}

}  // namespace

TEST_CASE("dpdk integrity: all ops over net_memif (two processes), no loss", "[dpdk][memif][integrity]") {
    run_memif(0.0, 21, false);
}
TEST_CASE("dpdk integrity: all ops over net_memif (two processes), 1% loss", "[dpdk][memif][integrity]") {
    run_memif(0.01, 22, false);
}
TEST_CASE("dpdk integrity: all ops over net_memif (two processes), 10% loss", "[dpdk][memif][integrity]") {
    run_memif(0.10, 23, false);
}
TEST_CASE("dpdk integrity, pipeline lcores: all ops over net_memif (two processes), no loss",
          "[dpdk][memif][integrity][pipeline]") {
    run_memif(0.0, 21, true);
}
TEST_CASE("dpdk integrity, pipeline lcores: all ops over net_memif (two processes), 1% loss",
          "[dpdk][memif][integrity][pipeline]") {
    run_memif(0.01, 22, true);
}
TEST_CASE("dpdk integrity, pipeline lcores: all ops over net_memif (two processes), 10% loss",
          "[dpdk][memif][integrity][pipeline]") {
    run_memif(0.10, 23, true);
}
