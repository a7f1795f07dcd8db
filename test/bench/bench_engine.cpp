// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Engine cost per packet: one core drives both ends of a connection (A sends
// WRITEs, B places them and acks), no driver and no fabric. Prints ns per
// data packet for the whole protocol path, for the datagram assembly a NIC
// or the kernel would do (the "wire" copy, not engine work), and for a plain
// memcpy of the same payload; the difference is the protocol overhead.
// Run it under `valgrind --tool=callgrind` with a small -n for instructions.
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mroce/engine.hpp"

using namespace mroce;

namespace {

// Time of this thread on a CPU (default), or wall-clock time (--wall). On a
// machine shared with other jobs the wall clock also counts the time the
// scheduler gives to others, which swamps a figure of tens of ns; CPU time
// does not (cache and memory-bandwidth contention still show).
bool g_wall = false;
uint64_t now_ns() {
    timespec ts;
    clock_gettime(g_wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

struct Wire {
    std::vector<uint8_t> buf;
    std::vector<RxPacket> rx;
    std::vector<uint32_t> off;
};

// Assembles the TxPackets into contiguous datagrams (what a NIC or the kernel does).
size_t assemble(const TxPacket* tx, size_t n, Wire& w, uint32_t peer) {
    size_t pos = 0;
    if (w.rx.size() < n) w.rx.resize(n);  // grown once: zeroing it per burst would be counted as engine time
    for (size_t i = 0; i < n; ++i) {
        uint8_t* d = w.buf.data() + pos;
        std::memcpy(d, tx[i].hdr, tx[i].hdr_len);
        if (tx[i].payload_len) std::memcpy(d + tx[i].hdr_len, tx[i].payload, tx[i].payload_len);
        w.rx[i].data = d;
        w.rx[i].len = tx[i].hdr_len + tx[i].payload_len;
        w.rx[i].peer = peer;
        w.rx[i].ce = 0;
        pos += (w.rx[i].len + 63) & ~size_t(63);
    }
    return n;
}

}  // namespace

int main(int argc, char** argv) {
    uint64_t packets = 2'000'000;
    uint32_t mtu = 4096;
    uint16_t paths = 4;
    size_t region = size_t(64) << 20;
    size_t burst = 256;
    uint32_t idle_conns = 0;
    size_t msg_size = 0;  // 0: 1 MiB, or the region when it is smaller
    uint64_t outstanding_opt = 0;  // 0: 200 one-packet messages, 32 larger ones
    Time one_way = 0;              // -d: between a burst's arrival and the answer's
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "-n" || a == "--packets") && i + 1 < argc) packets = std::strtoull(argv[++i], nullptr, 10);
        else if ((a == "-m" || a == "--mtu") && i + 1 < argc) mtu = uint32_t(std::strtoul(argv[++i], nullptr, 10));
        else if ((a == "-p" || a == "--paths") && i + 1 < argc) paths = uint16_t(std::strtoul(argv[++i], nullptr, 10));
        else if (a == "--wall") g_wall = true;
        else if ((a == "-c" || a == "--idle-conns") && i + 1 < argc)
            idle_conns = uint32_t(std::strtoul(argv[++i], nullptr, 10));
        else if ((a == "-r" || a == "--region") && i + 1 < argc) {
            char* end = nullptr;
            const size_t v = std::strtoul(argv[++i], &end, 10);
            region = end && (*end == 'K' || *end == 'k') ? v << 10 : v << 20;
        } else if ((a == "-s" || a == "--size") && i + 1 < argc) {
            msg_size = std::strtoul(argv[++i], nullptr, 10);
        } else if ((a == "-o" || a == "--outstanding") && i + 1 < argc) {
            outstanding_opt = std::strtoull(argv[++i], nullptr, 10);
        } else if ((a == "-d" || a == "--delay") && i + 1 < argc) {
            one_way = std::strtoull(argv[++i], nullptr, 10);
        } else if ((a == "-b" || a == "--burst") && i + 1 < argc)
            burst = std::strtoul(argv[++i], nullptr, 10);
        else {
            std::printf("usage: %s [-n packets] [-m mtu] [-p paths] [-r region[K]] [-s bytes] [-o outstanding] [-d ns] [-b burst] [-c idle-conns] [--wall]\n"
                        "  Engine cost per data packet (one core drives both ends), vs memcpy.\n"
                        "  -r: source and destination buffer size, MiB, or KiB with a K suffix\n"
                        "      (default 64: beyond the caches, every copy goes to memory; a few MiB\n"
                        "      stays in the LLC; 256K with -b 32 keeps source, destination and\n"
                        "      datagrams in L2, which isolates the engine's own cost from memory)\n"
                        "      WRITEs are 1 MiB, or the region's size when it is smaller\n"
                        "  -s: WRITE size in bytes instead (1..region); messages of one packet are\n"
                        "      kept 200 outstanding, and then every figure is per message\n"
                        "  -o: messages kept outstanding (default 200 of one packet, 32 larger);\n"
                        "      -s 8 -o 1 is the latency regime: each message alone, answered by an\n"
                        "      ACK of its own, completed before the next is posted\n"
                        "  -d: the clock moves this many ns (at most 1999) between the data's\n"
                        "      arrival and its ACK's (default 0: every RTT sample is 0, and a\n"
                        "      timer armed for two RTTs is due at the next pass)\n"
                        "  -b: packets per tx_burst / rx_burst (default 256)\n"
                        "  -c: that many more connections between the two engines, established and\n"
                        "      idle, beside the one that carries the WRITEs\n"
                        "  --wall: wall-clock instead of thread CPU time\n", argv[0]);
            return a == "-h" || a == "--help" ? 0 : 2;
        }
    }
    if (one_way >= 2000) {
        std::fprintf(stderr, "bench_engine: -d below 2000 (a pass is 2000 ns)\n");
        return 2;
    }
    if (outstanding_opt > 256) {
        std::fprintf(stderr, "bench_engine: -o at most 256 (the stream depth)\n");
        return 2;
    }
    if (region < (size_t(64) << 10) || burst == 0 || burst > 512 || mtu < 256 || paths == 0 || msg_size > region) {
        std::fprintf(stderr, "bench_engine: need -r >= 64K, -b 1..512, -m >= 256, -p >= 1, -s <= region\n");
        return 2;
    }
    EngineConfig cfg;
    cfg.max_payload = uint16_t(mtu);
    cfg.num_paths = paths;
    cfg.rate_hints = false;  // pacing would make one core wait on a clock it does not have
    cfg.cc.init_cwnd = 256;
    Engine a(cfg), b(cfg);
    const size_t kRegion = region;  // default larger than the LLC: copies go to memory as a NIC's would
    const size_t kMsg = msg_size ? msg_size : std::min<size_t>(size_t(1) << 20, kRegion);
    const uint64_t pkts_per_msg = std::max<uint64_t>(1, (kMsg + mtu - 1) / mtu);
    // Small messages: enough outstanding that bursts stay full (the stream depth is 256).
    const uint64_t outstanding = outstanding_opt ? outstanding_opt : pkts_per_msg == 1 ? 200 : 32;
    const size_t copy_len = std::min<size_t>(kMsg, mtu);  // the baseline's copy per data packet
    std::vector<uint8_t> src(kRegion, 0x5a), dst(kRegion, 0);
    const uint32_t pda = a.alloc_pd(), pdb = b.alloc_pd();
    uint32_t cqa, cqb;
    a.create_cq(1 << 16, cqa);
    b.create_cq(1 << 16, cqb);
    MrInfo ms, md;
    a.register_mr(pda, src.data(), src.size(), kAccessLocalWrite, ms);
    b.register_mr(pdb, dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite, md);

    Wire w;
    w.buf.resize(burst * ((mtu + 256 + 63) & ~size_t(63)));
    std::vector<TxPacket> tx(burst);
    Time now = 1000;
    auto exchange = [&](Engine& from, Engine& to, uint32_t peer_of_from) {
        size_t n = from.tx_burst(tx.data(), tx.size(), now);
        if (n) {
            assemble(tx.data(), n, w, peer_of_from);
            to.rx_burst(w.rx.data(), n, now);
        }
        return n;
    };
    uint32_t ca = 0, cb = 0;
    a.connect(1, ca);
    for (int i = 0; i < 10 && !cb; ++i) {
        exchange(a, b, 0);
        ConnEvent ev[4];
        size_t k = b.poll_events(ev, 4);
        for (size_t j = 0; j < k; ++j) cb = ev[j].conn;
        exchange(b, a, 1);
        now += 1000;
    }
    if (!cb || a.conn_state(ca) != ConnState::established) {
        std::fprintf(stderr, "bench_engine: connection did not establish\n");
        return 1;
    }
    a.create_stream(ca, 1, pda, cqa, cqa);
    b.create_stream(cb, 1, pdb, cqb, cqb);
    for (uint32_t k = 0; k < idle_conns; ++k) {
        uint32_t c = 0;
        if (a.connect(1, c) != Status::ok) {
            std::fprintf(stderr, "bench_engine: connect %u refused\n", k);
            return 1;
        }
        for (int i = 0; i < 10 && a.conn_state(c) != ConnState::established; ++i) {
            exchange(a, b, 0);
            exchange(b, a, 1);
            now += 1000;
        }
        if (a.conn_state(c) != ConnState::established) {
            std::fprintf(stderr, "bench_engine: idle connection %u did not establish\n", k);
            return 1;
        }
    }
    {
        ConnEvent ev[64];
        while (b.poll_events(ev, 64) > 0) {}
        while (a.poll_events(ev, 64) > 0) {}
    }

    const uint64_t msgs_total = (packets + pkts_per_msg - 1) / pkts_per_msg;
    uint64_t posted = 0, done = 0, data_pkts = 0;
    uint64_t wire_ns = 0;
    auto post = [&] {
        while (posted - done < outstanding && posted < msgs_total) {
            SendWr wr;
            wr.wr_id = posted;
            wr.op = OpKind::write;
            const size_t off = (posted * kMsg) % (kRegion - kMsg + 1);
            wr.local_addr = uint64_t(reinterpret_cast<uintptr_t>(src.data() + off));
            wr.length = uint32_t(kMsg);
            wr.lkey = ms.lkey;
            wr.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data() + off));
            wr.rkey = md.rkey;
            wr.signaled = true;
            if (a.post_send(ca, 1, wr) != Status::ok) break;
            ++posted;
        }
    };
    // The run is cut into windows of about kWindow data packets; after each
    // window the baseline memcpy copies the same number of packets. Both
    // halves of a window see the same load from the rest of the machine, so
    // the per-window overhead (engine - wire assembly - memcpy) is a fair
    // comparison even on a busy machine; the median over the windows is the
    // headline figure, the totals over the whole run are printed too.
    const uint64_t kWindow = 16384;
    std::vector<double> window_overhead;
    double engine_ns_total = 0, memcpy_ns_total = 0;
    uint64_t copied = 0;
    auto baseline = [&](uint64_t pkts) {
        const uint64_t m0 = now_ns();
        for (uint64_t i = 0; i < pkts; ++i, ++copied) {
            const size_t off = (copied * copy_len) % (kRegion - copy_len + 1);
            std::memcpy(dst.data() + off, src.data() + off, copy_len);
        }
        return double(now_ns() - m0);
    };
    while (done < msgs_total) {
        const uint64_t pkts0 = data_pkts, wire0 = wire_ns;
        const uint64_t t0 = now_ns();
        while (done < msgs_total && data_pkts - pkts0 < kWindow) {
            post();
            size_t n = a.tx_burst(tx.data(), tx.size(), now);
            if (n) {
                const uint64_t w0 = now_ns();
                assemble(tx.data(), n, w, 0);
                wire_ns += now_ns() - w0;
                b.rx_burst(w.rx.data(), n, now);
                data_pkts += n;
            }
            now += one_way;
            exchange(b, a, 1);
            Completion c[64];
            done += a.poll_cq(cqa, c, 64);
            now += 2000 - one_way;
        }
        const double eng = double(now_ns() - t0);
        const uint64_t pkts = data_pkts - pkts0;
        const double copy = baseline(pkts);
        engine_ns_total += eng;
        memcpy_ns_total += copy;
        if (pkts) window_overhead.push_back((eng - double(wire_ns - wire0) - copy) / double(pkts));
    }
    if (std::memcmp(src.data(), dst.data(), std::min<size_t>(1024, kMsg)) != 0) return 1;
    std::sort(window_overhead.begin(), window_overhead.end());
    auto pct = [&](double q) {
        return window_overhead.empty() ? 0.0 : window_overhead[size_t(q * double(window_overhead.size() - 1) + 0.5)];
    };

    const double per_pkt = engine_ns_total / double(data_pkts);
    const double wire_pp = double(wire_ns) / double(data_pkts);
    const double copy_pp = memcpy_ns_total / double(data_pkts);
    std::printf("mtu %u B, %u paths, %llu data packets (%llu x %zu B WRITE), acks included, %zu KiB buffers, "
                "bursts of %zu, %u idle connections, %s\n",
                mtu, paths, (unsigned long long)data_pkts, (unsigned long long)msgs_total, kMsg, kRegion >> 10,
                burst, idle_conns,
                g_wall ? "wall-clock time" : "thread CPU time");
    std::printf("%-44s %8.1f ns/packet\n", "engine, both ends (incl. wire assembly)", per_pkt);
    std::printf("%-44s %8.1f ns/packet\n", "  of which wire assembly (NIC's copy)", wire_pp);
    std::printf("%-44s %8.1f ns/packet\n", "plain memcpy of the payload", copy_pp);
    std::printf("%-44s %8.1f ns/packet\n", "protocol overhead beyond the copy", per_pkt - wire_pp - copy_pp);
    std::printf("%-44s %8.1f ns/packet (%zu windows of %llu packets; p10 %.1f, p90 %.1f)\n",
                "  per window, median", pct(0.5), window_overhead.size(), (unsigned long long)kWindow, pct(0.1),
                pct(0.9));
    std::printf("%-44s %8.2f Gbit/s\n", "engine goodput on one core",
                double(data_pkts) * double(copy_len) * 8 / engine_ns_total);
    return 0;
}
