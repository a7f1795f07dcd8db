// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Planes on the DPDK driver (doc/spec.md R-PLANE-1..7): two processes, each
// with a two-plane dpdk device of the native API (open_device, a
// configuration file's text), each plane its own net_memif pair (two vdevs
// per process, one socket file per plane). The client names the server on
// both planes (R-PLANE-6); WRITEs of a pattern, each read back and compared.
//   - both planes up: the transfer verifies and both planes carry data
//     at both ends (per-plane counters, R-PLANE-5);
//   - plane 1 cut mid-run at the client (dpdk::set_link_cut: everything sent
//     and received on its port dropped) after a third of the messages: the
//     transfer completes and verifies on plane 0, no error, and plane 0
//     carries the rest (R-PLANE-4).
// Nothing is timed: the cut comes after a count of verified messages; the
// 60 s limits only end a hung run.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <rte_ethdev.h>

#include "mroce/api.hpp"
#include "mroce/dpdk/eal.hpp"
#include "mroce/dpdk/port.hpp"

using namespace mroce;

namespace {

constexpr uint32_t kSlot = 65536;
constexpr uint32_t kSlots = 8;
constexpr uint32_t kMessages = 240;   // WRITE + READ-back pairs
constexpr Time kLimit = 60'000'000'000;

// Published by the server for the client (anonymous shared memory, mapped before fork).
struct Shared {
    std::atomic<uint64_t> addr{0};
    std::atomic<uint32_t> rkey{0};
    std::atomic<int> ready{0};
};

struct Sides {
    std::string sock[2];
    int cpu_server = 0, cpu_client = 0;
    std::string tag;
};

std::string config_text(const Sides& s, bool server) {
    const char* role = server ? "server" : "client";
    const int me = server ? 1 : 2, peer = server ? 2 : 1;
    std::string vdevs;
    for (int p = 0; p < 2; ++p)
        // bsize: one frame per memif buffer (test_dpdk_integrity_memif.cpp: DPDK 22.11's memif).
        vdevs += fmt::format(" --vdev=net_memif{},role={},id=0,socket={},socket-abstract=no,mac=02:00:00:00:0{}:0{},"
                             "bsize=8192", p, role, s.sock[p], p + 1, me);
    return fmt::format(R"([engine]
max_payload = 4096
paths = 4
[device planes]
driver = dpdk
planes = 10.0.1.{me}, 10.0.2.{me}
lcores = {cpu}
eal_args = --no-huge --no-pci --log-level lib.eal:warning{vdevs}
dpdk_port = net_memif0, net_memif1
neighbours = 10.0.1.{peer} 02:00:00:00:01:0{peer} | 10.0.2.{peer} 02:00:00:00:02:0{peer}
tx_max_l3 = 4196
)",
                       fmt::arg("me", me), fmt::arg("peer", peer), fmt::arg("cpu", server ? s.cpu_server : s.cpu_client),
                       fmt::arg("vdevs", vdevs));
}

void fill(uint8_t* p, uint32_t msg) {
    uint64_t x = (uint64_t(msg) + 1) * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < kSlot; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(p + i, &x, 8);
    }
}

std::vector<PlaneInfo> planes_of(const Device& dev) {
    std::vector<PlaneInfo> v(dev.num_planes());
    for (size_t p = 0; p < v.size(); ++p) dev.query_plane(p, v[p]);
    return v;
}

void print_planes(const char* who, const char* when, const std::vector<PlaneInfo>& v) {
    for (size_t p = 0; p < v.size(); ++p)
        std::printf("%s: %s plane %zu %s: tx %llu pkts %llu B, rx %llu pkts %llu B\n", who, when, p,
                    v[p].address.c_str(), (unsigned long long)v[p].tx_packets, (unsigned long long)v[p].tx_bytes,
                    (unsigned long long)v[p].rx_packets, (unsigned long long)v[p].rx_bytes);
}

uint16_t port_id(const char* name) {
    uint16_t id = 0;
    if (rte_eth_dev_get_port_by_name(name, &id) != 0) throw Error(std::string("no port ") + name);
    return id;
}

int server(const Sides& s, Shared& sh) {
    const char* who = "planes-server";
    int rc = 0;
    {
        auto dev = open_device(parse_config(config_text(s, true), "server.conf").device());
        if (dev->num_planes() != 2) {
            std::fprintf(stderr, "%s: %zu planes\n", who, dev->num_planes());
            return 3;
        }
        const uint32_t pd = dev->alloc_pd();
        const uint32_t cq = dev->create_cq(256);
        std::vector<uint8_t> mem(size_t(kSlots) * kSlot);
        const MemoryRegion mr = dev->register_mr(pd, mem.data(), mem.size(),
                                                 kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
        dev->set_accept_streams({StreamSpec{1, pd, cq, cq}});
        sh.addr = mr.iova();
        sh.rkey = mr.rkey;
        sh.ready = 1;
        Connection c = dev->accept(30'000'000'000);
        const Time t0 = dev->now();
        ConnState st;
        while ((st = c.state()) == ConnState::established && dev->now() - t0 < kLimit) dev->idle(dev->progress() != 0);
        // The client's DISCONNECT: closing, then closed.
        while (st == ConnState::closing && dev->now() - t0 < kLimit) {
            dev->idle(dev->progress() != 0);
            st = c.state();
        }
        const auto v = planes_of(*dev);
        print_planes(who, "end", v);
        if (st != ConnState::closed) {
            std::fprintf(stderr, "%s: connection %s\n", who, to_string(st));
            rc = 4;
        }
        // Data reached the server on both planes (the cut, if any, came after a third).
        if (rc == 0 && (v[0].rx_bytes < kSlot || v[1].rx_bytes < kSlot)) {
            std::fprintf(stderr, "%s: a plane carried no data\n", who);
            rc = 5;
        }
        // memif server: close the ports only after the client closed its end
        // (test/dpdk/integrity_process.hpp, close_after_peer: DPDK 22.11's
        // memif handles the disconnect on the interrupt thread).
        const uint16_t ports[2] = {port_id("net_memif0"), port_id("net_memif1")};
        for (uint16_t p : ports) {
            rte_eth_link l{};
            for (int i = 0; i < 5000; ++i) {
                rte_eth_link_get_nowait(p, &l);
                if (!l.link_status) break;
                dev->idle(dev->progress() != 0);
                ::usleep(1000);
            }
        }
        ::usleep(300 * 1000);
    }
    dpdk::eal_cleanup();
    return rc;
}

int client(const Sides& s, Shared& sh, bool cut) {
    const char* who = "planes-client";
    int rc = 0;
    {
        auto dev = open_device(parse_config(config_text(s, false), "client.conf").device());
        const uint32_t pd = dev->alloc_pd();
        const uint32_t cq = dev->create_cq(256);
        std::vector<uint8_t> src(size_t(kSlots) * kSlot), dst(size_t(kSlots) * kSlot);
        const MemoryRegion ms = dev->register_mr(pd, src.data(), src.size(), kAccessLocalWrite);
        const MemoryRegion md = dev->register_mr(pd, dst.data(), dst.size(), kAccessLocalWrite);
        for (int i = 0; i < 3000 && !sh.ready; ++i) ::usleep(10 * 1000);
        const uint64_t raddr = sh.addr;
        const uint32_t rkey = sh.rkey;
        // R-PLANE-6: the server on both planes, plane 0 first.
        Connection c = dev->connect({PeerAddress{"10.0.1.1", 4793}, PeerAddress{"10.0.2.1", 4793}}, 10'000'000'000);
        c.create_stream(1, pd, cq, cq);
        uint32_t posted = 0, verified = 0, mismatches = 0, failures = 0;
        auto post = [&](uint32_t slot) {
            const uint32_t msg = posted++;
            fill(src.data() + size_t(slot) * kSlot, msg);
            std::memset(dst.data() + size_t(slot) * kSlot, 0, kSlot);
            c.post_send(1, Connection::write_wr(uint64_t(slot) << 1, ms, ms.iova(size_t(slot) * kSlot), kSlot,
                                                raddr + uint64_t(slot) * kSlot, rkey, false));
            c.post_send(1, Connection::read_wr(uint64_t(slot) << 1 | 1, md, md.iova(size_t(slot) * kSlot), kSlot,
                                               raddr + uint64_t(slot) * kSlot, rkey));
        };
        for (uint32_t i = 0; i < kSlots; ++i) post(i);
        std::vector<PlaneInfo> at_cut;
        const uint16_t cut_port = port_id("net_memif1");
        const Time t0 = dev->now();
        Completion comp[32];
        while (verified + failures < kMessages && dev->now() - t0 < kLimit) {
            const bool moved = dev->progress() != 0;
            const size_t got = dev->poll_cq(cq, comp, 32);
            for (size_t k = 0; k < got; ++k) {
                const uint32_t slot = uint32_t(comp[k].wr_id >> 1);
                if (comp[k].status != WcStatus::success) {
                    std::fprintf(stderr, "%s: slot %u: %s\n", who, slot, to_string(comp[k].status));
                    ++failures;
                    continue;
                }
                if (std::memcmp(dst.data() + size_t(slot) * kSlot, src.data() + size_t(slot) * kSlot, kSlot) != 0)
                    ++mismatches;
                ++verified;
                if (posted < kMessages) post(slot);
            }
            if (cut && at_cut.empty() && verified >= kMessages / 3) {
                at_cut = planes_of(*dev);
                print_planes(who, "at cut", at_cut);
                dpdk::set_link_cut(cut_port, true);   // plane 1 fails: both directions
            }
            dev->idle(moved || got);
        }
        const auto v = planes_of(*dev);
        print_planes(who, "end", v);
        const ConnState st = c.state();
        uint32_t failed_paths = 0;
        for (uint16_t p = 0; p < c.num_paths(); ++p) failed_paths += c.path_stats(p).state == PathStateKind::failed;
        std::printf("%s: %u of %u verified, %u mismatches, %u failures, connection %s, %llu retransmits, "
                    "%u of %u paths failed now\n", who, verified, kMessages, mismatches, failures, to_string(st),
                    (unsigned long long)c.stats().retransmits, failed_paths, unsigned(c.num_paths()));
        if (verified != kMessages || mismatches || failures || st != ConnState::established) rc = 4;
        if (rc == 0 && (v[0].tx_bytes < kSlot || v[1].tx_bytes < kSlot)) {
            std::fprintf(stderr, "%s: a plane carried no data\n", who);
            rc = 5;
        }
        if (rc == 0 && cut) {
            // Cut packets are not counted as sent: plane 1's counters stand
            // still; plane 0 carried the two thirds left (at least their WRITE payload).
            if (v[1].tx_packets != at_cut[1].tx_packets || v[1].rx_packets != at_cut[1].rx_packets) {
                std::fprintf(stderr, "%s: plane 1 counted traffic after the cut\n", who);
                rc = 6;
            } else if (v[0].tx_bytes - at_cut[0].tx_bytes < uint64_t(kMessages / 2) * kSlot) {
                std::fprintf(stderr, "%s: plane 0 carried only %llu B after the cut\n", who,
                             (unsigned long long)(v[0].tx_bytes - at_cut[0].tx_bytes));
                rc = 7;
            }
        }
        c.disconnect();
        for (const Time end = dev->now() + 2'000'000'000; c.state() == ConnState::closing && dev->now() < end;)
            dev->idle(dev->progress() != 0);
        dpdk::set_link_cut(cut_port, false);
    }
    dpdk::eal_cleanup();
    return rc;
}

pid_t fork_run(const std::function<int()>& body) {
    std::fflush(nullptr);
    const pid_t p = ::fork();
    if (p == 0) {
        int rc = 2;
        try {
            rc = body();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s\n", e.what());
        }
        std::fflush(nullptr);
        ::_exit(rc);
    }
    return p;
}

int wait_for(pid_t p, int seconds) {
    int st = 0;
    for (int i = 0; i < seconds * 100; ++i) {
        if (::waitpid(p, &st, WNOHANG) == p) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        ::usleep(10 * 1000);
    }
    ::kill(p, SIGKILL);
    ::waitpid(p, &st, 0);
    return -1;
}

void run(bool cut) {
    Sides s;
    s.tag = fmt::format("{}-{}", ::getpid(), cut ? "cut" : "up");
    for (int p = 0; p < 2; ++p) {
        s.sock[p] = fmt::format("/tmp/mroce-planes-{}-{}.sock", s.tag, p);
        ::unlink(s.sock[p].c_str());
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    std::vector<int> cpus;
    for (int i = 0; i < CPU_SETSIZE; ++i)
        if (CPU_ISSET(i, &set)) cpus.push_back(i);
    s.cpu_server = cpus.front();
    s.cpu_client = cpus.back();
    void* m = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    Shared* sh = new (m) Shared;
    const pid_t srv = fork_run([&] { return server(s, *sh); });
    REQUIRE(srv > 0);
    // memif clients start once their server's sockets exist.
    struct stat sb{};
    for (int i = 0; i < 3000 && (::stat(s.sock[0].c_str(), &sb) != 0 || ::stat(s.sock[1].c_str(), &sb) != 0); ++i)
        ::usleep(10 * 1000);
    const pid_t cli = fork_run([&] { return client(s, *sh, cut); });
    const int rc_cli = cli > 0 ? wait_for(cli, 90) : -1;
    const int rc_srv = wait_for(srv, 30);
    for (const auto& f : s.sock) ::unlink(f.c_str());
    ::munmap(m, sizeof(Shared));
    INFO("cut " << cut << " (the children print their plane counters above)");
    CHECK(rc_cli == 0);
    CHECK(rc_srv == 0);
}

}  // namespace

TEST_CASE("dpdk planes: two planes over two net_memif pairs, both carry data (R-PLANE-2, R-PLANE-5)",
          "[dpdk][memif][planes]") {
    run(false);
}

TEST_CASE("dpdk planes: plane 1 cut mid-transfer, the transfer completes on plane 0 (R-PLANE-4)",
          "[dpdk][memif][planes]") {
    run(true);
}
