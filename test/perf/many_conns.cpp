// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-test-conns: many concurrent connections between two processes over
// the native API, one stream each, default configuration (driven by
// perf_many_conns.py, which also fails paths in the middle of the run).
//
//   server PORT N            accepts N connections (automatic progress),
//                            prints "addr ADDR rkey RKEY" and waits until all
//                            N are closed (or 120 s)
//   client IP PORT LPORT N ADDR RKEY ROUNDS SECONDS
//                            connects N times; each connection WRITEs its
//                            16 KiB slot of the server's buffer with a
//                            pattern of (connection, round), READs it back
//                            and checks it, for ROUNDS rounds and at least
//                            SECONDS; prints "connected" once all are up and
//                            one JSON line at the end. Exit 0: every round of
//                            every connection verified.
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mroce/api.hpp"

using namespace mroce;

namespace {

constexpr uint32_t kSlot = 16384;

uint64_t rss_bytes() {
    long pages = 0, resident = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
        if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return uint64_t(resident) * uint64_t(::sysconf(_SC_PAGESIZE));
}

void fill(uint8_t* p, uint32_t conn, uint32_t round) {
    uint64_t x = (uint64_t(conn) << 32 | round) * 0x9E3779B97F4A7C15ull + 1;
    for (uint32_t i = 0; i < kSlot; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(p + i, &x, 8);
    }
}

int server(uint16_t port, uint32_t n) {
    Config cfg = load_config();
    DeviceConfig d = cfg.device();
    d.port = port;
    d.progress = ProgressMode::automatic;
    auto dev = open_device(d);
    const uint32_t pd = dev->alloc_pd();
    const uint32_t cq = dev->create_cq(4096);
    std::vector<uint8_t> mem(size_t(n) * kSlot);
    const MemoryRegion mr =
        dev->register_mr(pd, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead);
    dev->set_accept_streams({StreamSpec{1, pd, cq, cq}});
    std::printf("addr %" PRIu64 " rkey %u\n", mr.iova(), mr.rkey);
    std::fflush(stdout);
    std::vector<Connection> conns;
    while (conns.size() < n) conns.push_back(dev->accept(60'000'000'000));
    const Time end = dev->now() + 120'000'000'000;
    for (;;) {
        size_t open = 0;
        for (const Connection& c : conns) open += c.state() == ConnState::established || c.state() == ConnState::closing;
        if (open == 0 || dev->now() > end) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const EngineStats e = dev->engine_stats();
    std::printf("{\"role\": \"server\", \"probes_sent\": %" PRIu64 ", \"keepalives_sent\": %" PRIu64
                ", \"probes_deferred\": %" PRIu64 "}\n",
                e.probes_sent, e.keepalives_sent, e.probes_deferred);
    return 0;
}

int client(const std::string& ip, uint16_t port, uint16_t lport, uint32_t n, uint64_t raddr, uint32_t rkey,
           uint32_t rounds, double seconds) {
    Config cfg = load_config();
    DeviceConfig d = cfg.device();
    d.port = lport;
    auto dev = open_device(d);
    const uint32_t pd = dev->alloc_pd();
    const uint32_t cq = dev->create_cq(4 * n + 64);
    std::vector<uint8_t> src(size_t(n) * kSlot), dst(size_t(n) * kSlot);
    const MemoryRegion ms = dev->register_mr(pd, src.data(), src.size(), kAccessLocalWrite);
    const MemoryRegion md = dev->register_mr(pd, dst.data(), dst.size(), kAccessLocalWrite);
    const uint64_t rss0 = rss_bytes();
    std::vector<Connection> conns;
    conns.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
        conns.push_back(dev->connect(ip, port));
        conns.back().create_stream(1, pd, cq, cq);
    }
    const uint64_t rss1 = rss_bytes();
    std::printf("connected\n");
    std::fflush(stdout);
    const EngineStats e0 = dev->engine_stats();
    const Time t0 = dev->now();
    std::vector<uint32_t> round(n, 0);
    uint64_t mismatches = 0, failures = 0, verified = 0;
    uint32_t max_failed_paths = 0;
    auto post_write = [&](uint32_t i) {
        fill(src.data() + size_t(i) * kSlot, i, round[i]);
        std::memset(dst.data() + size_t(i) * kSlot, 0, kSlot);
        conns[i].post_send(1, Connection::write_wr(uint64_t(i) << 1, ms, ms.iova(size_t(i) * kSlot), kSlot,
                                                    raddr + uint64_t(i) * kSlot, rkey));
        conns[i].post_send(1, Connection::read_wr(uint64_t(i) << 1 | 1, md, md.iova(size_t(i) * kSlot), kSlot,
                                                   raddr + uint64_t(i) * kSlot, rkey));
    };
    for (uint32_t i = 0; i < n; ++i) post_write(i);
    uint32_t finished = 0;
    Time next_sample = t0;
    std::vector<Completion> c(256);
    while (finished < n) {
        const bool moved = dev->progress() != 0;
        const size_t got = dev->poll_cq(cq, c.data(), c.size());
        const Time now = dev->now();
        for (size_t k = 0; k < got; ++k) {
            const uint32_t i = uint32_t(c[k].wr_id >> 1);
            if (c[k].status != WcStatus::success) {
                ++failures;
                std::fprintf(stderr, "connection %u round %u: %s\n", i, round[i], to_string(c[k].status));
                if (++finished == n) break;
                continue;
            }
            if (!(c[k].wr_id & 1)) continue;  // the WRITE; its READ completes after it (R-CMPL-2)
            if (std::memcmp(dst.data() + size_t(i) * kSlot, src.data() + size_t(i) * kSlot, kSlot) != 0) ++mismatches;
            else ++verified;
            ++round[i];
            if (round[i] >= rounds && double(now - t0) / 1e9 >= seconds) {
                conns[i].disconnect();
                ++finished;
            } else {
                post_write(i);
            }
        }
        if (now >= next_sample) {  // failed paths at this moment, over every connection
            uint32_t failed = 0;
            for (const Connection& x : conns)
                for (uint16_t p = 0; p < x.num_paths(); ++p) failed += x.path_stats(p).state == PathStateKind::failed;
            max_failed_paths = std::max(max_failed_paths, failed);
            next_sample = now + 50'000'000;
        }
        if (now - t0 > 60'000'000'000) {
            std::fprintf(stderr, "stalled: %u of %u connections finished\n", finished, n);
            break;
        }
        dev->idle(moved || got);
    }
    const Time t1 = dev->now();
    // Let the DISCONNECTs be answered.
    for (const Time end = t1 + 1'000'000'000; dev->now() < end;) {
        size_t open = 0;
        for (const Connection& x : conns) open += x.state() == ConnState::closing;
        if (!open) break;
        dev->idle(dev->progress() != 0);
    }
    const EngineStats e = dev->engine_stats();
    const double secs = double(t1 - t0) / 1e9;
    std::printf("{\"role\": \"client\", \"connections\": %u, \"verified\": %" PRIu64 ", \"mismatches\": %" PRIu64
                ", \"failures\": %" PRIu64 ", \"seconds\": %.3f, \"probes_sent\": %" PRIu64
                ", \"keepalives_sent\": %" PRIu64 ", \"probes_deferred\": %" PRIu64
                ", \"max_failed_paths\": %u, \"rss_per_conn\": %" PRIu64 ", \"conn_state_bytes\": %zu"
                ", \"stream_state_bytes\": %zu}\n",
                n, verified, mismatches, failures, secs, e.probes_sent - e0.probes_sent,
                e.keepalives_sent - e0.keepalives_sent, e.probes_deferred - e0.probes_deferred, max_failed_paths,
                (rss1 - rss0) / n, Engine::conn_state_bytes(), Engine::stream_state_bytes());
    return failures == 0 && mismatches == 0 && verified >= uint64_t(n) * rounds ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 4 && std::string(argv[1]) == "server")
            return server(uint16_t(std::atoi(argv[2])), uint32_t(std::atoi(argv[3])));
        if (argc == 10 && std::string(argv[1]) == "client")
            return client(argv[2], uint16_t(std::atoi(argv[3])), uint16_t(std::atoi(argv[4])),
                          uint32_t(std::atoi(argv[5])), std::strtoull(argv[6], nullptr, 10),
                          uint32_t(std::strtoul(argv[7], nullptr, 10)), uint32_t(std::atoi(argv[8])),
                          std::atof(argv[9]));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mroce-test-conns: %s\n", e.what());
        return 3;
    }
    std::fprintf(stderr, "usage: mroce-test-conns server PORT N | client IP PORT LPORT N ADDR RKEY ROUNDS SECONDS\n");
    return 1;
}
