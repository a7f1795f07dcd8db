// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-scale-bench: the engine's cost against the number of connections
// (issue 22 item 3, doc/performance.md section 10). Many engines in one
// process, joined by an in-memory loop (no fabric model): every round each
// engine's tx_burst output is assembled into datagrams, as a NIC would, and
// handed to its destination engine's rx_burst one round (--delay ns) later;
// when no packet moved, the clock jumps to the earliest engine deadline. So
// all of the CPU time is engines and the datagram copy, and nothing limits
// rates but the engines' own windows, pacing and receiver hints.
//
//   --pairs N   two engines, N connections from the first to the second, each
//               kept busy with WRITEs; stops after -n data packets (for the
//               callgrind difference of scripts/bench-scale.sh)
//   --hosts H   H engines, all-to-all: one connection per ordered pair
//               (H * (H - 1), each with two ends), each host WRITEs --bytes in
//               all, split over its peers; prints RSS and the CPU time
// Both print "<n> data packets", connections, CPU seconds and max RSS.
// Benchmarks print figures; nothing here asserts a timing.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "mroce/engine.hpp"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

using namespace mroce;

namespace {

double cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double max_rss_mib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

// Current RSS from /proc (ru_maxrss also counts what setup freed).
double rss_mib() {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long pages = 0, res = 0;
    const int got = std::fscanf(f, "%lu %lu", &pages, &res);
    std::fclose(f);
    return got == 2 ? double(res) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0) : 0;
}

// Datagrams on their way to one engine: assembled into buf, delivered next round.
struct Inbox {
    // Grown by doubling, never zeroed (value-initialising a vector would
    // count as the benchmark's instructions every time it grows).
    std::unique_ptr<uint8_t[]> buf;
    size_t cap = 0;
    std::vector<RxPacket> rx;
    size_t used = 0;
    size_t peak = 0;  // the most one round held: the bytes of buf ever touched
    void clear() {
        rx.clear();
        peak = std::max(peak, used);
        used = 0;
    }
    void reserve(size_t bytes) {
        if (bytes <= cap) return;
        std::unique_ptr<uint8_t[]> nb(new uint8_t[bytes]);
        if (used) std::memcpy(nb.get(), buf.get(), used);
        buf = std::move(nb);
        cap = bytes;
    }
};

struct Host {
    std::unique_ptr<Engine> eng;
    uint32_t pd = 0, cq = 0;
    std::vector<uint8_t> mem;
    MrInfo mr{};
    Inbox in[2];  // [round & 1]: being filled, [!]: being delivered
};

struct Flow {
    uint32_t src = 0, dst = 0, conn = 0;
    uint64_t bytes_left = 0;  // --hosts: still to post
    uint32_t outstanding = 0;
    uint32_t next_off = 0;
};

struct Opts {
    uint32_t pairs = 0;
    uint32_t hosts = 0;
    uint64_t packets = 100000;
    uint64_t bytes = 64ull << 20;  // per host, --hosts
    uint32_t msg = 64 << 10;
    uint32_t outstanding = 4;
    Time delay = 2000;
    size_t burst = 256;
    uint32_t rx_capacity_mbps = 0;  // 0: the engine default
    uint64_t warmup = 20000;        // --pairs: data packets before the measurement
    bool lean = false;
};

int usage(const char* argv0, int rc) {
    std::printf("usage: %s (--pairs N [-n packets] | --hosts H [--bytes B[K|M]]) [--msg B] [--outstanding W]\n"
                "          [--delay ns] [--burst B] [--rx-capacity mbps]\n"
                "          [--warmup P] [--lean]\n"
                "  --pairs N: two engines, N busy connections from one to the other, stop after -n data packets\n"
                "  --hosts H: H engines all-to-all (H*(H-1) connections), each host WRITEs --bytes in all\n"
                "  --msg: WRITE size (default 64K); --outstanding: WRITEs in flight per connection (default 4)\n"
                "  --delay: one-way delay of the in-memory loop (default 2000 ns)\n"
                "  --warmup P: --pairs: measure (and instrument, under callgrind --instr-atstart=no) only\n"
                "      after P data packets (default 20000), so setup and ramp-up are left out\n"
                "  --lean: csn_window 256, stream_depth 16, recv_depth 16: memory only (the per-packet\n"
                "      path is the same; 64 packets per connection in flight stay below every limit),\n"
                "      so that 4,000 connections fit under valgrind\n"
                "  Default engine configuration otherwise (doc/performance.md section 10).\n",
                argv0);
    return rc;
}

uint64_t parse_size(const char* s) {
    char* end = nullptr;
    uint64_t v = std::strtoull(s, &end, 10);
    if (end && (*end == 'K' || *end == 'k')) v <<= 10;
    if (end && (*end == 'M' || *end == 'm')) v <<= 20;
    if (end && (*end == 'G' || *end == 'g')) v <<= 30;
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    Opts o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : "0"; };
        if (a == "--pairs") o.pairs = uint32_t(std::strtoul(next(), nullptr, 10));
        else if (a == "--hosts") o.hosts = uint32_t(std::strtoul(next(), nullptr, 10));
        else if (a == "-n" || a == "--packets") o.packets = std::strtoull(next(), nullptr, 10);
        else if (a == "--bytes") o.bytes = parse_size(next());
        else if (a == "--msg") o.msg = uint32_t(parse_size(next()));
        else if (a == "--outstanding") o.outstanding = uint32_t(std::strtoul(next(), nullptr, 10));
        else if (a == "--delay") o.delay = std::strtoull(next(), nullptr, 10);
        else if (a == "--burst") o.burst = std::strtoul(next(), nullptr, 10);
        else if (a == "--rx-capacity") o.rx_capacity_mbps = uint32_t(std::strtoul(next(), nullptr, 10));
        else if (a == "--warmup") o.warmup = std::strtoull(next(), nullptr, 10);
        else if (a == "--lean") o.lean = true;
        else return usage(argv[0], a == "-h" || a == "--help" ? 0 : 2);
    }
    if ((o.pairs == 0) == (o.hosts == 0) || (o.hosts == 1) || o.msg == 0 || o.outstanding == 0 || o.burst == 0 ||
        o.burst > 4096 || o.delay == 0)
        return usage(argv[0], 2);

    EngineConfig cfg;  // the defaults: what the figures are about
    if (o.rx_capacity_mbps) cfg.rx_capacity_mbps = o.rx_capacity_mbps;
    if (o.lean) {
        cfg.csn_window = 256;
        cfg.stream_depth = 16;
        cfg.recv_depth = 16;
    }
    const uint32_t nhosts = o.pairs ? 2 : o.hosts;
    const double cpu0 = cpu_seconds();
    std::vector<Host> hosts(nhosts);
    const size_t region = std::max<size_t>(o.msg, 1 << 20);
    const size_t slot = (size_t(cfg.max_payload) + 128 + 63) & ~size_t(63);
    // Each host's CQ holds what its connections can have outstanding (a
    // deeper one would count its slots in the RSS as if they were the engine's).
    const uint32_t out_per_host = (o.pairs ? o.pairs : nhosts - 1) * o.outstanding;
    const uint32_t cq_depth = std::max<uint32_t>(1024, std::bit_ceil(2 * out_per_host));
    for (Host& h : hosts) {
        h.eng = std::make_unique<Engine>(cfg);
        h.pd = h.eng->alloc_pd();
        if (h.eng->create_cq(cq_depth, h.cq) != Status::ok) return 1;
        h.mem.assign(region, 0x5a);
        if (h.eng->register_mr(h.pd, h.mem.data(), h.mem.size(), kAccessLocalWrite | kAccessRemoteWrite, h.mr) !=
            Status::ok)
            return 1;
    }

    std::vector<Flow> flows;
    if (o.pairs) {
        for (uint32_t k = 0; k < o.pairs; ++k) flows.push_back(Flow{0, 1, 0, ~0ull, 0, 0});
    } else {
        const uint64_t per_flow = std::max<uint64_t>(1, o.bytes / (nhosts - 1));
        for (uint32_t s = 0; s < nhosts; ++s)
            for (uint32_t d = 0; d < nhosts; ++d)
                if (s != d) flows.push_back(Flow{s, d, 0, per_flow, 0, 0});
    }
    Time now = 1'000'000;
    uint64_t round = 0, data_pkts = 0;
    std::vector<TxPacket> tx(o.burst);
    // At most this many bursts per engine and round (what a NIC ring would take).
    constexpr int kBurstsPerRound = 16;
    if (o.pairs)
        for (Host& h : hosts)
            for (Inbox& box : h.in) {
                box.reserve(kBurstsPerRound * o.burst * slot);
                box.rx.reserve(kBurstsPerRound * o.burst);
            }
    // One round: every engine sends, its datagrams land in the destination's
    // inbox for the next round; then every engine receives last round's.
    auto exchange = [&]() -> size_t {
        const size_t fill = round & 1, drain = fill ^ 1;
        size_t moved = 0;
        for (uint32_t h = 0; h < nhosts; ++h) {
            for (int b = 0; b < kBurstsPerRound; ++b) {
                const size_t n = hosts[h].eng->tx_burst(tx.data(), tx.size(), now);
                for (size_t i = 0; i < n; ++i) {
                    const TxPacket& t = tx[i];
                    // Peer handle 2 * host: a connection this engine opened;
                    // 2 * host + 1: one it accepted (see the handshakes).
                    const uint32_t dst = t.peer / 2;
                    if (dst >= nhosts) continue;
                    Inbox& box = hosts[dst].in[fill];
                    if (box.cap < box.used + slot) box.reserve(std::max(box.cap * 2, 64 * slot));
                    box.rx.push_back(RxPacket{});
                    box.rx.back().len = t.hdr_len + t.payload_len;
                    box.rx.back().peer = 2 * h + (1 - (t.peer & 1));
                    // data points into buf after all appends (buf may move): offsets first
                    box.rx.back().data = reinterpret_cast<const uint8_t*>(box.used);
                    std::memcpy(box.buf.get() + box.used, t.hdr, t.hdr_len);
                    if (t.payload_len) std::memcpy(box.buf.get() + box.used + t.hdr_len, t.payload, t.payload_len);
                    box.used += (box.rx.back().len + 63) & ~size_t(63);
                    if (t.payload_len) ++data_pkts;
                }
                moved += n;
                if (n < tx.size()) break;
            }
        }
        for (uint32_t h = 0; h < nhosts; ++h) {
            Inbox& box = hosts[h].in[drain];
            if (box.rx.empty()) continue;
            for (RxPacket& r : box.rx) r.data = box.buf.get() + reinterpret_cast<uintptr_t>(r.data);
            hosts[h].eng->rx_burst(box.rx.data(), box.rx.size(), now);
            moved += box.rx.size();
            box.clear();
        }
        ++round;
        return moved;
    };
    auto advance = [&](size_t moved) {
        bool inflight = false;
        for (const Host& h : hosts) inflight |= !h.in[(round & 1) ^ 1].rx.empty();
        if (moved || inflight) {
            now += o.delay;
            return;
        }
        Time t = ~Time(0);
        for (const Host& h : hosts) t = std::min(t, h.eng->next_deadline(now));
        now = std::max(now + 1, t == ~Time(0) ? now + o.delay : t);
    };

    // Handshakes, then one stream per connection on both ends. Each engine
    // has two addresses (as two UDP ports): peer handle 2 * host for the
    // connections it opens, 2 * host + 1 for those it accepts. One address
    // would make the all-to-all's two directions between a pair one
    // connection (R-CONN-14: connect() takes the one the peer opened), and
    // each ordered pair is to have its own.
    size_t accepted = 0;
    for (Flow& f : flows)
        if (hosts[f.src].eng->connect(2 * f.dst, f.conn) != Status::ok) {
            std::fprintf(stderr, "scale-bench: connect refused (%zu flows)\n", flows.size());
            return 1;
        }
    for (int i = 0; i < 100000 && accepted < flows.size(); ++i) {
        advance(exchange());
        for (Host& h : hosts) {
            ConnEvent ev[256];
            for (size_t k = 0, n = h.eng->poll_events(ev, 256); k < n; ++k)
                if (ev[k].kind == EventKind::incoming) {
                    if (h.eng->create_stream(ev[k].conn, 1, h.pd, h.cq, h.cq) != Status::ok) return 1;
                    ++accepted;
                }
        }
    }
    for (int i = 0; i < 100; ++i) {  // the last handshakes' ACKs, without jumping to later timers
        exchange();
        now += o.delay;
    }
    for (Flow& f : flows)
        if (hosts[f.src].eng->conn_state(f.conn) != ConnState::established ||
            hosts[f.src].eng->create_stream(f.conn, 1, hosts[f.src].pd, hosts[f.src].cq, hosts[f.src].cq) !=
                Status::ok) {
            std::fprintf(stderr, "scale-bench: %zu of %zu connections accepted, not all established\n", accepted,
                         flows.size());
            return 1;
        }
    const double rss_setup = rss_mib();
    const uint64_t setup_rounds = round;
    const Time setup_ns = now - 1'000'000;
    const double cpu_setup = cpu_seconds();

    // Flows of one source, by connection id (wr_id), to refill on completion.
    auto post = [&](uint32_t fi) {
        Flow& f = flows[fi];
        Host& s = hosts[f.src];
        const Host& d = hosts[f.dst];
        while (f.outstanding < o.outstanding && f.bytes_left > 0) {
            const uint32_t len = uint32_t(std::min<uint64_t>(o.msg, f.bytes_left));
            if (f.next_off + len > region) f.next_off = 0;
            SendWr wr;
            wr.wr_id = fi;
            wr.op = OpKind::write;
            wr.local_addr = uint64_t(reinterpret_cast<uintptr_t>(s.mem.data() + f.next_off));
            wr.length = len;
            wr.lkey = s.mr.lkey;
            wr.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(d.mem.data() + f.next_off));
            wr.rkey = d.mr.rkey;
            wr.signaled = true;
            if (s.eng->post_send(f.conn, 1, wr) != Status::ok) break;
            f.next_off += len;
            if (f.bytes_left != ~0ull) f.bytes_left -= len;
            ++f.outstanding;
        }
    };
    for (uint32_t fi = 0; fi < flows.size(); ++fi) post(fi);
    Time t_start = now;
    uint64_t pkts0 = data_pkts;
    double cpu_run0 = cpu_setup;
    bool measuring = !(o.pairs && o.warmup);
    if (measuring) CALLGRIND_START_INSTRUMENTATION;
    uint64_t failed = 0, done_flows = 0;
    std::vector<Completion> comp(4096);
    for (;;) {
        advance(exchange());
        for (Host& h : hosts)
            for (size_t n; (n = h.eng->poll_cq(h.cq, comp.data(), comp.size())) > 0;)
                for (size_t i = 0; i < n; ++i) {
                    Flow& f = flows[uint32_t(comp[i].wr_id)];
                    if (comp[i].status != WcStatus::success) ++failed;
                    --f.outstanding;
                    post(uint32_t(comp[i].wr_id));
                    if (f.outstanding == 0 && f.bytes_left == 0) ++done_flows;
                }
        if (!measuring && data_pkts - pkts0 >= o.warmup) {
            measuring = true;
            pkts0 = data_pkts;
            t_start = now;
            cpu_run0 = cpu_seconds();
            CALLGRIND_START_INSTRUMENTATION;
        }
        if (measuring && o.pairs && data_pkts - pkts0 >= o.packets) break;
        if (o.hosts && done_flows == flows.size()) break;
        if (failed) break;
        if (now - t_start > 600'000'000'000ull) {
            std::fprintf(stderr, "scale-bench: not done after 600 s of simulated time\n");
            return 1;
        }
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    const double cpu_end = cpu_seconds();
    const double sim_s = double(now - t_start) / 1e9;
    std::printf("%zu connections over %u engines, %llu data packets measured, %llu failed WRITEs\n", flows.size(), nhosts,
                (unsigned long long)(data_pkts - pkts0), (unsigned long long)failed);
    std::printf("setup: %llu rounds, %.3f ms simulated; run: %llu rounds\n", (unsigned long long)setup_rounds,
                double(setup_ns) / 1e6, (unsigned long long)(round - setup_rounds));
    // The inboxes are this harness's fabric (an unlimited one: every packet an
    // engine releases in a round lands in the next), and their bytes count in
    // the RSS beside the engines' state.
    size_t fabric_bytes = 0;
    for (const Host& h : hosts)
        for (const Inbox& box : h.in) fabric_bytes += std::max(box.peak, box.used);
    std::printf("datagrams in transit: at most %.0f MiB (the most each inbox held in a round, summed)\n",
                double(fabric_bytes) / (1024.0 * 1024.0));
    std::printf("rss after setup %.0f MiB, at the end %.0f MiB, max %.0f MiB (%.0f KiB per connection end)\n",
                rss_setup, rss_mib(), max_rss_mib(), rss_setup * 1024.0 / double(2 * flows.size()));
    std::printf("cpu: setup %.2f s, run %.2f s (%.0f ns per data packet), simulated %.3f ms, goodput %.1f Gbit/s\n",
                cpu_setup - cpu0, cpu_end - cpu_run0, (cpu_end - cpu_run0) * 1e9 / double(std::max<uint64_t>(1, data_pkts - pkts0)),
                sim_s * 1e3, sim_s > 0 ? double(data_pkts - pkts0) * cfg.max_payload * 8 / sim_s / 1e9 : 0.0);
    return failed ? 1 : 0;
}
