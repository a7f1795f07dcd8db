// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// DpdkPort over net_memif between two processes (memif never connects two
// ports of one process). The test process itself never initialises the EAL:
// it forks a server and a client, each with its own EAL and file prefix; the
// client sends patterned 64 B and 4 KiB datagrams in an irregular order, the
// server checks them byte for byte and echoes them, the client checks the
// echoes. The memif buffers hold a whole frame (bsize=8192): with DPDK's
// default 2 KiB buffers, 22.11 corrupts a frame that lands in the first slot
// of an earlier multi-buffer one (seen here as garbage and timeouts within
// 4000 frames of this order; a strictly alternating order hides it until
// load breaks the rhythm, which is how it showed up as a rare flake).
// mroce refuses such a configuration (memif_buffer_problem, eal.hpp).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>

#include "mroce/dpdk/port.hpp"

using namespace mroce;
using namespace mroce::dpdk;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kIpServer = 0x0a000101, kIpClient = 0x0a000102;
constexpr const char* kMacServer = "02:00:00:00:01:01";
constexpr const char* kMacClient = "02:00:00:00:01:02";
constexpr uint32_t kPerSize = 2000;
constexpr uint32_t kSizes[] = {64, 4096};
constexpr uint32_t kTotal = kPerSize * 2;
constexpr uint16_t kHdr = 72;

uint8_t pattern(uint32_t seq, uint32_t i) { return uint8_t(seq * 131 + i * 7 + (i >> 8)); }
uint32_t size_of(uint32_t seq) { return kSizes[((seq * 2654435761u) >> 13) % 2]; }  // irregular, seeded

// Child body: returns an exit code, prints why on failure.
int run_side(bool server, const std::string& sock) {
    try {
        EalConfig ec;
        ec.program = server ? "memif-server" : "memif-client";
        ec.args = {"-l", "0", "--no-huge", "--no-pci", "-m", "256", "--log-level", "lib.eal:warning",
                   fmt::format("--vdev=net_memif0,role={},id=0,socket={},socket-abstract=no,mac={},bsize=8192",
                               server ? "server" : "client", sock, server ? kMacServer : kMacClient)};
        ec.file_prefix = fmt::format("mroce-test-memif-{}-{}", server ? "s" : "c", ::getpid());
        eal_init(ec);
        // Declared before the port, so it runs after the port is gone.
        struct EalGuard {
            ~EalGuard() { eal_cleanup(); }
        } eal_guard;
        uint16_t port = 0;
        if (rte_eth_dev_count_avail() != 1) throw DpdkError("expected exactly one (memif) port");
        port = uint16_t(rte_eth_find_next(0));

        PortConfig c;
        c.port_id = port;
        c.local_mac_from_port = true;
        c.local_ip = server ? kIpServer : kIpClient;
        c.neighbours = {{server ? kIpClient : kIpServer, parse_mac(server ? kMacClient : kMacServer)}};
        c.rx_desc = c.tx_desc = 1024;
        c.burst = 32;
        c.tx_max_l3 = 28 + kHdr + 4096;   // memif reports MTU 1500 whatever its buffer size
        const PoolConfig need = DpdkPort::min_pools(c);
        c.pools.rx_mbufs = need.rx_mbufs * 2;   // 4 KiB frames take several RX mbufs
        c.pools.hdr_mbufs = need.hdr_mbufs;
        c.pools.ext_mbufs = need.ext_mbufs;
        DpdkPort dp(c);

        const auto deadline = Clock::now() + std::chrono::seconds(30);
        rte_eth_link link{};
        do {
            rte_eth_link_get_nowait(port, &link);
            if (Clock::now() > deadline) throw DpdkError("memif link did not come up in 30 s");
        } while (!link.link_status);

        // Payload memory must stay put until the PMD has taken (memif: copied) it.
        std::vector<uint8_t> mem(size_t(kTotal) * 4096);
        std::vector<TxPacket> pending;
        uint32_t sent = 0, received = 0, bad = 0;
        uint32_t next_seq = 0;
        RxPacket rx[32];
        while (received < kTotal || (server && (sent < kTotal || !pending.empty()))) {
            if (Clock::now() > deadline)
                throw DpdkError(fmt::format("timeout: sent {} received {} (rx dropped {})", sent, received,
                                            dp.stats().rx_dropped()));
            if (!server && next_seq < kTotal && pending.size() < 32) {
                const uint32_t seq = next_seq++;
                TxPacket p;
                p.peer = 0;
                p.entropy = uint16_t(seq % 4);
                p.hdr_len = kHdr;
                std::memcpy(p.hdr, &seq, 4);
                for (uint32_t i = 4; i < kHdr; ++i) p.hdr[i] = pattern(seq, 10000 + i);
                const uint32_t len = size_of(seq);
                uint8_t* pl = mem.data() + size_t(seq) * 4096;
                for (uint32_t i = 0; i < len; ++i) pl[i] = pattern(seq, i);
                p.payload = pl;
                p.payload_len = len;
                pending.push_back(p);
            }
            if (!pending.empty()) {
                const size_t n = dp.tx_burst(0, pending.data(), pending.size());
                sent += uint32_t(n);
                pending.erase(pending.begin(), pending.begin() + long(n));
            }
            const size_t n = dp.rx_burst(0, rx, 32);
            for (size_t k = 0; k < n; ++k) {
                uint32_t seq = 0;
                // One span, or two for a frame memif chained over buffers (packet_io.hpp).
                std::vector<uint8_t> dg(rx[k].data, rx[k].data + rx[k].len);
                if (rx[k].len2) dg.insert(dg.end(), rx[k].data2, rx[k].data2 + rx[k].len2);
                if (dg.size() < kHdr) { ++bad; continue; }
                std::memcpy(&seq, dg.data(), 4);
                const uint32_t len = seq < kTotal ? size_of(seq) : 0;
                bool ok = seq < kTotal && dg.size() == kHdr + len && rx[k].peer == 0;
                for (uint32_t i = 4; ok && i < kHdr; ++i) ok = dg[i] == pattern(seq, 10000 + i);
                for (uint32_t i = 0; ok && i < len; ++i) ok = dg[kHdr + i] == pattern(seq, i);
                if (!ok) { ++bad; continue; }
                ++received;
                if (server) {
                    // Echo: the RX data is only valid until release, so keep a copy.
                    TxPacket p;
                    p.peer = 0;
                    p.entropy = uint16_t(seq % 4);
                    p.hdr_len = kHdr;
                    std::memcpy(p.hdr, dg.data(), kHdr);
                    uint8_t* pl = mem.data() + size_t(seq) * 4096;
                    std::memcpy(pl, dg.data() + kHdr, len);
                    p.payload = pl;
                    p.payload_len = len;
                    pending.push_back(p);
                }
            }
            dp.rx_release(0);
            if (bad) throw DpdkError(fmt::format("{} datagrams not byte-exact (seq check)", bad));
        }
        const PortStats s = dp.stats();
        std::printf("%s: sent %u received %u byte-exact, linearized %llu, rx dropped %llu\n",
                    server ? "server" : "client", sent, received, (unsigned long long)s.rx_linearized,
                    (unsigned long long)s.rx_dropped());
        if (s.rx_dropped()) return 3;
        // Let the peer drain our last frames before the port (and its memif region) goes
        // away, then stop polling before either side closes: DPDK's memif unmaps a
        // disconnected peer's regions from its interrupt thread, and an rx_burst running
        // at that moment reads unmapped memory (seen under ASan, where the old 500 ms
        // server linger overlapped the client's close).
        const auto linger = Clock::now() + std::chrono::milliseconds(200);
        while (Clock::now() < linger) {
            dp.rx_burst(0, rx, 32);
            dp.rx_release(0);
        }
        if (!server) {
            // Lone header-only frames, each a burst of its own (DpdkPort's
            // tx_one on this recycling queue), until memif takes none: the
            // server has stopped reading (or gone). The refused frame's header
            // mbuf must stay ours and idle (the pool checks below).
            TxPacket p;
            p.peer = 0;
            p.hdr_len = kHdr;
            std::memset(p.hdr, 0xff, kHdr);
            const uint64_t full0 = dp.stats().tx_ring_full, sent0 = dp.stats().tx_packets;
            const auto end = Clock::now() + std::chrono::seconds(10);
            size_t took = 1;
            while (took == 1 && Clock::now() < end) took = dp.tx_burst(0, &p, 1);
            const PortStats f = dp.stats();
            std::printf("client: %llu lone frames taken before one was refused\n",
                        (unsigned long long)(f.tx_packets - sent0));
            if (took != 0 || f.tx_ring_full != full0 + 1) {
                std::fprintf(stderr, "client: lone frames: last took %zu, ring-full count %llu -> %llu\n", took,
                             (unsigned long long)full0, (unsigned long long)f.tx_ring_full);
                return 6;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        // memif copies on TX and frees our mbufs at once; RX mbufs went back at rx_release.
        const PoolUsage u = dp.pool_usage();
        if (u.hdr || u.ext || u.rx) {
            std::fprintf(stderr, "%s: mbufs still in use: rx %u hdr %u ext %u\n", server ? "server" : "client",
                         u.rx, u.hdr, u.ext);
            return 4;
        }
        // ... and, with our reference held across the burst, the header mbufs
        // came back to the TX queue for the next burst (recycled, port.cpp):
        // out of the pool, yet not in use.
        const rte_mempool* hp = rte_mempool_lookup(fmt::format("mroce_hd_{}", port).c_str());
        if (!hp || rte_mempool_in_use_count(hp) == 0) {
            std::fprintf(stderr, "%s: no header mbuf recycled\n", server ? "server" : "client");
            return 5;
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", server ? "server" : "client", e.what());
        return 2;
    }
}

}  // namespace

TEST_CASE("dpdk memif: two processes exchange 64 B and 4 KiB datagrams byte-exact", "[dpdk][memif]") {
    const std::string sock = fmt::format("/tmp/mroce-memif-{}.sock", ::getpid());
    ::unlink(sock.c_str());
    std::fflush(nullptr);
    const pid_t srv = ::fork();
    REQUIRE(srv >= 0);
    // _exit skips stdio flushing: flush the child's report first.
    if (srv == 0) { const int rc = run_side(true, sock); std::fflush(nullptr); ::_exit(rc); }
    // The client retries connecting, but give the server its socket first.
    ::usleep(300 * 1000);
    const pid_t cli = ::fork();
    if (cli == 0) { const int rc = run_side(false, sock); std::fflush(nullptr); ::_exit(rc); }
    REQUIRE(cli >= 0);
    int st_s = -1, st_c = -1;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    bool s_done = false, c_done = false;
    while (!(s_done && c_done) && Clock::now() < deadline) {
        if (!s_done && ::waitpid(srv, &st_s, WNOHANG) == srv) s_done = true;
        if (!c_done && ::waitpid(cli, &st_c, WNOHANG) == cli) c_done = true;
        ::usleep(20 * 1000);
    }
    if (!s_done) { ::kill(srv, SIGKILL); ::waitpid(srv, &st_s, 0); }
    if (!c_done) { ::kill(cli, SIGKILL); ::waitpid(cli, &st_c, 0); }
    ::unlink(sock.c_str());
    CHECK(s_done);
    CHECK(c_done);
    CHECK(WIFEXITED(st_s));
    CHECK(WEXITSTATUS(st_s) == 0);
    CHECK(WIFEXITED(st_c));
    CHECK(WEXITSTATUS(st_c) == 0);
}
