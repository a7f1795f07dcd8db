// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-dpdk-bench: the bare PMD ceiling over a net_ring pair (port A's TX
// ring is port B's RX ring), so the mroce-over-DPDK figure has something to
// be compared with. Modes:
//   plain   preallocated, fully built single-segment frames; TX bumps the
//           refcount and sends, RX frees: no per-packet work beyond the PMD.
//           This is the baseline the target is measured against.
//   copy    plain, plus at RX one copy of the UDP payload into an 8 MiB
//           destination (as a receiver placing into a memory region must do
//           once per packet): a reference for what the receive copy alone costs,
//           not a replacement for the plain baseline.
//   drvtx   DpdkPort::tx_burst (header mbuf from the template + zero-copy
//           extbuf payload), RX frees the chains unparsed.
//   driver  DpdkPort on both sides: drvtx plus RX validation, peer lookup and
//           (net_ring passes TX chains through) payload linearisation.
//   engine  mroce itself: two Engines (max_payload = the payload size) on
//           DpdkPort + EngineLoop, A streaming 1 MiB RDMA WRITEs to B; the
//           figure counts completed WRITE bytes (goodput).
//   pipeline as engine, but in the pipeline arrangement: B with deferred
//           placement (PipelineLoop), both engines with offload_cc; both
//           engine loops on the main lcore, B's payload copies and both CC
//           cores on the worker lcore over rte_rings (2 lcores only).
// One lcore runs TX and RX in turn; two lcores run TX on a worker, RX on main.
// --memif: the bare loop of net_memif instead, between two forked processes
// (one lcore each: the client sends prebuilt frames, the server receives and
// frees them); the parent never initialises the EAL. mroce's own figure over
// memif comes from mroce-perf (doc/performance.md).
// --memif --lat: the bare memif ping-pong instead (issue 24), the latency
// yardstick for mroce-perf --lat over the DPDK driver: the client sends one
// frame of the size an 8-byte WRITE makes (42 + 72 + 8 bytes) and busy-polls
// until the server, busy-polling too, has sent it back; round trip p50 / p99.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "mroce/dpdk/loop.hpp"
#include "mroce/dpdk/pipeline.hpp"
#include "mroce/dpdk/port.hpp"
#include "mroce/engine.hpp"

using namespace mroce;
using namespace mroce::dpdk;
using Clock = std::chrono::steady_clock;

namespace {

unsigned g_ring = 1024;   // ring slots per direction (--ring)
unsigned g_cache = 256;   // per-lcore mempool cache of the driver's pools (--cache)
constexpr uint16_t kDesc = 1024;
constexpr uint16_t kMaxBurst = 256;
constexpr size_t kPlainFrames = 4096;
constexpr uint32_t kIpA = 0x0a000001, kIpB = 0x0a000002;

struct Opts {
    bool lat = false;        // --memif --lat: ping-pong
    uint64_t iters = 20000;  // --iters: measured round trips
    std::string side;        // --side server|client --socket PATH: one end alone (--lat under a profiler)
    std::string socket;
    std::vector<std::string> modes{"plain", "copy", "drvtx", "driver", "engine"};
    std::vector<uint32_t> payloads{64, 4096};
    std::vector<int> lcores{1, 2};
    double seconds = 2.0;
    uint16_t burst = 32;
    uint32_t mem_mb = 512;
    unsigned ring = 1024;
};

struct Pair {
    rte_ring* ab = nullptr;   // A TX -> B RX
    rte_ring* ba = nullptr;   // unused direction, the ports need both
    uint16_t a = 0, b = 0;
};

struct Result {
    uint64_t pkts = 0;
    double secs = 0;
    uint64_t goodput_bytes = 0;   // engine mode: completed WRITE bytes
};

struct Run {
    std::string mode;
    uint32_t payload = 0;
    uint16_t burst = 32;
    double seconds = 2;
    Pair pair;
    std::unique_ptr<DpdkPort> pa, pb;       // driver modes
    rte_mempool* plain_pool = nullptr;      // plain mode
    std::vector<rte_mbuf*> frames;
    std::vector<TxPacket> txp;
    std::vector<uint8_t> mem;
    std::vector<uint8_t> dst;               // copy mode: where payloads are placed
    size_t dst_off = 0;
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> tx_pkts{0};

    // One TX step: returns packets sent.
    size_t tx_once(size_t& cursor) {
        if (mode == "plain" || mode == "copy") {
            rte_mbuf* b[kMaxBurst];
            for (uint16_t i = 0; i < burst; ++i) {
                b[i] = frames[(cursor + i) % frames.size()];
                rte_mbuf_refcnt_update(b[i], 1);
            }
            const uint16_t n = rte_eth_tx_burst(pair.a, 0, b, burst);
            for (uint16_t i = n; i < burst; ++i) rte_mbuf_refcnt_update(b[i], -1);
            cursor += n;
            return n;
        }
        const size_t n = pa->tx_burst(0, txp.data() + (cursor % (txp.size() - burst)), burst);
        cursor += n;
        return n;
    }
    // One RX step: returns packets received.
    size_t rx_once() {
        if (mode == "driver") {
            RxPacket rx[kMaxBurst];
            const size_t n = pb->rx_burst(0, rx, burst);
            pb->rx_release(0);
            return n;
        }
        rte_mbuf* b[kMaxBurst];
        const uint16_t n = rte_eth_rx_burst(pair.b, 0, b, burst);
        if (mode == "copy") {
            constexpr size_t kL2L4Hdr = 42 + 72;
            for (uint16_t i = 0; i < n; ++i) {
                if (dst_off + payload > dst.size()) dst_off = 0;
                std::memcpy(dst.data() + dst_off, rte_pktmbuf_mtod_offset(b[i], const uint8_t*, kL2L4Hdr), payload);
                dst_off += payload;
            }
        }
        if (n) rte_pktmbuf_free_bulk(b, n);
        return n;
    }
};

int tx_lcore(void* arg) {
    auto* r = static_cast<Run*>(arg);
    size_t cursor = 0;
    uint64_t sent = 0;
    while (!r->stop.load(std::memory_order_relaxed)) sent += r->tx_once(cursor);
    r->tx_pkts = sent;
    return 0;
}

Result measure(Run& r, int lcores) {
    Result res;
    // Warm up (caches, pools), then measure at the receiver.
    const auto warm_end = Clock::now() + std::chrono::milliseconds(200);
    size_t cursor = 0;
    unsigned worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
    if (lcores == 2) {
        if (worker >= RTE_MAX_LCORE) throw DpdkError("two-lcore run needs a worker lcore (EAL -l 0,1)");
        r.stop = false;
        if (int rc = rte_eal_remote_launch(tx_lcore, &r, worker); rc != 0)
            throw DpdkError(fmt::format("rte_eal_remote_launch: {}", rte_strerror(-rc)));
    }
    auto step = [&] {
        if (lcores == 1) r.tx_once(cursor);
        return r.rx_once();
    };
    while (Clock::now() < warm_end) step();
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration<double>(r.seconds);
    uint64_t got = 0;
    for (;;) {
        for (int i = 0; i < 256; ++i) got += step();
        if (Clock::now() >= end) break;
    }
    res.secs = std::chrono::duration<double>(Clock::now() - t0).count();
    res.pkts = got;
    if (lcores == 2) {
        r.stop = true;
        rte_eal_wait_lcore(worker);
    }
    // Drain what is still in the ring so every mbuf is home before teardown.
    while (r.rx_once()) {
    }
    return res;
}

PortConfig port_cfg(uint16_t port, uint32_t local, uint32_t remote, const MacAddr& remote_mac, uint16_t burst) {
    PortConfig c;
    c.port_id = port;
    c.local_ip = local;
    c.neighbours = {{remote, remote_mac}};
    c.mtu = 9000;
    c.burst = burst;
    c.rx_desc = c.tx_desc = kDesc;
    c.pools.cache = g_cache;
    const PoolConfig need = DpdkPort::min_pools(c);
    // Frames parked in the ring hold A's mbufs on top of the minimum.
    c.pools.rx_mbufs = need.rx_mbufs;
    c.pools.hdr_mbufs = need.hdr_mbufs + g_ring;
    c.pools.ext_mbufs = need.ext_mbufs + g_ring;
    return c;
}

MacAddr mac_of(uint16_t port) {
    rte_ether_addr a{};
    rte_eth_macaddr_get(port, &a);
    MacAddr m;
    std::memcpy(m.data(), a.addr_bytes, 6);
    return m;
}

Pair make_pair(int idx) {
    Pair p;
    p.ab = rte_ring_create(fmt::format("b_ab{}", idx).c_str(), g_ring, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    p.ba = rte_ring_create(fmt::format("b_ba{}", idx).c_str(), g_ring, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!p.ab || !p.ba) throw DpdkError(fmt::format("rte_ring_create: {}", rte_strerror(rte_errno)));
    const int a = rte_eth_from_rings(fmt::format("b_a{}", idx).c_str(), &p.ba, 1, &p.ab, 1, 0);
    const int b = rte_eth_from_rings(fmt::format("b_b{}", idx).c_str(), &p.ab, 1, &p.ba, 1, 0);
    if (a < 0 || b < 0) throw DpdkError(fmt::format("rte_eth_from_rings: {}", rte_strerror(rte_errno)));
    p.a = uint16_t(a);
    p.b = uint16_t(b);
    return p;
}

void start_raw(uint16_t port, rte_mempool* rx_pool) {
    rte_eth_conf conf{};
    if (int rc = rte_eth_dev_configure(port, 1, 1, &conf); rc != 0)
        throw DpdkError(fmt::format("rte_eth_dev_configure({}): {}", port, rte_strerror(-rc)));
    if (rte_eth_rx_queue_setup(port, 0, kDesc, 0, nullptr, rx_pool) != 0 ||
        rte_eth_tx_queue_setup(port, 0, kDesc, 0, nullptr) != 0 || rte_eth_dev_start(port) != 0)
        throw DpdkError(fmt::format("queue setup/start on port {} failed", port));
}

struct EngineSide {
    std::unique_ptr<DpdkPort> port;
    std::unique_ptr<Engine> eng;
    std::unique_ptr<EngineLoop<Engine>> loop;
    // Pipeline mode, A: only the CC core on the worker lcore, copies inline.
    using CcLoop = DriveLoop<QueuePort, Engine, Pipeline<NoStage, CcRings>>;
    std::unique_ptr<CcLoop> ccloop;
    // Pipeline mode: the receiver's copies on the worker lcore (deferred
    // placement); both engines' congestion-control cores there too (offload_cc).
    std::unique_ptr<PlacementRings> rings;
    std::unique_ptr<CcRings> cc;
    std::unique_ptr<PipelineLoop<Engine>> ploop;
    std::vector<uint8_t> mem;
    uint32_t pd = 0, cq = 0, conn = 0;
    MrInfo mr;
};

struct EngineRun {
    EngineSide s[2];
    std::atomic<bool> stop{false};
    std::atomic<bool> measuring{false};
    std::atomic<uint64_t> bytes{0};
    uint64_t posted = 0, completed = 0;
    static constexpr uint32_t kMsg = 1 << 20;
    static constexpr uint32_t kDepth = 8;

    void post_writes() {
        EngineSide& a = s[0];
        while (posted - completed < kDepth) {
            SendWr wr;
            wr.wr_id = posted;
            wr.op = OpKind::write;
            const size_t slot = (posted % kDepth) * kMsg;
            wr.local_addr = uint64_t(uintptr_t(a.mem.data() + slot));
            wr.length = kMsg;
            wr.lkey = a.mr.lkey;
            wr.remote_addr = uint64_t(uintptr_t(s[1].mem.data() + slot));
            wr.rkey = s[1].mr.rkey;
            if (a.eng->post_send(a.conn, 1, wr) != Status::ok) break;
            ++posted;
        }
    }
    // Sender pass: loop step, completions, refill.
    void sender_step() {
        EngineSide& a = s[0];
        if (a.ccloop) a.ccloop->step(a.ccloop->now());
        else a.loop->step(a.loop->now());
    }
    void sender_pass() {
        EngineSide& a = s[0];
        sender_step();
        Completion c[32];
        const size_t n = a.eng->poll_cq(a.cq, c, 32);
        for (size_t i = 0; i < n; ++i) {
            if (c[i].status != WcStatus::success)
                throw DpdkError(fmt::format("WRITE completed with {}", to_string(c[i].status)));
            ++completed;
            if (measuring.load(std::memory_order_relaxed)) bytes.fetch_add(kMsg, std::memory_order_relaxed);
        }
        post_writes();
    }
    void receiver_pass() {
        if (s[1].ploop) s[1].ploop->step(s[1].ploop->now());
        else s[1].loop->step(s[1].loop->now());
    }
};

// The worker lcore of the pipeline mode: B's placement stage and both
// engines' CC cores, polled in turn.
struct PlacementRun {
    PlacementStage stage;
    CcStage cc;
    std::atomic<bool> stop{false};
};

int placement_lcore(void* arg) {
    auto* p = static_cast<PlacementRun*>(arg);
    for (;;) {
        if (p->stage.poll() + p->cc.poll()) continue;
        if (p->stop.load(std::memory_order_acquire)) {
            while (p->stage.poll() + p->cc.poll()) {}   // nothing left on a ring (mbufs among it)
            return 0;
        }
        rte_pause();
    }
}

int engine_tx_lcore(void* arg) {
    auto* r = static_cast<EngineRun*>(arg);
    while (!r->stop.load(std::memory_order_relaxed)) r->sender_pass();
    return 0;
}

// pipeline: B runs the pipeline arrangement, its payload copies on the worker
// lcore, and both engines' CC cores run there too (R-CC-8); both engine
// loops share the main lcore (as with lcores == 1).
Result measure_engine(uint32_t payload, int lcores, double seconds, int idx, bool pipeline = false) {
    EngineRun r;
    PlacementRun placement;
    if (pipeline) lcores = 1;
    Pair pair = make_pair(idx);
    const uint16_t pid[2] = {pair.a, pair.b};
    const uint32_t ip[2] = {kIpA, kIpB};
    for (int i = 0; i < 2; ++i) {
        EngineSide& sd = r.s[i];
        sd.port = std::make_unique<DpdkPort>(port_cfg(pid[i], ip[i], ip[1 - i], mac_of(pid[1 - i]), 32));
        EngineConfig ec;
        ec.max_payload = uint16_t(payload);
        ec.rate_hints = false;   // the ceiling of the transport, not of a configured capacity
        ec.deferred_placement = pipeline && i == 1;
        ec.offload_cc = pipeline;
        sd.eng = std::make_unique<Engine>(ec);
        if (ec.offload_cc) {
            sd.cc = std::make_unique<CcRings>(fmt::format("cc{}_{}", i, idx), sd.eng->config().cc);
            placement.cc.add(*sd.cc);
        }
        if (ec.deferred_placement) {
            sd.rings = std::make_unique<PlacementRings>(fmt::format("b_pl{}", idx), sd.eng->config().place_depth);
            sd.ploop = std::make_unique<PipelineLoop<Engine>>(
                QueuePort(*sd.port), *sd.eng, Pipeline<PlacementRings, CcRings>{sd.rings.get(), sd.cc.get()});
            placement.stage.add(*sd.rings);
        } else if (ec.offload_cc) {
            sd.ccloop = std::make_unique<EngineSide::CcLoop>(QueuePort(*sd.port), *sd.eng,
                                                             Pipeline<NoStage, CcRings>{nullptr, sd.cc.get()});
        } else {
            sd.loop = std::make_unique<EngineLoop<Engine>>(QueuePort(*sd.port), *sd.eng);
        }
        sd.mem.assign(size_t(EngineRun::kDepth) * EngineRun::kMsg, uint8_t(i));
        sd.pd = sd.eng->alloc_pd();
        if (sd.eng->create_cq(1 << 12, sd.cq) != Status::ok ||
            sd.eng->register_mr(sd.pd, sd.mem.data(), sd.mem.size(), kAccessLocalWrite | kAccessRemoteWrite,
                                sd.mr) != Status::ok)
            throw DpdkError("engine setup (cq/mr) failed");
    }
    if (r.s[0].eng->connect(0, r.s[0].conn) != Status::ok) throw DpdkError("connect refused");
    const auto cdl = Clock::now() + std::chrono::seconds(5);
    while (!(r.s[1].conn && r.s[0].eng->conn_state(r.s[0].conn) == ConnState::established)) {
        if (Clock::now() > cdl) throw DpdkError("engine connection not established in 5 s");
        r.sender_pass();
        r.receiver_pass();
        ConnEvent ev[4];
        const size_t n = r.s[1].eng->poll_events(ev, 4);
        for (size_t i = 0; i < n; ++i)
            if (ev[i].kind == EventKind::incoming) r.s[1].conn = ev[i].conn;
    }
    for (int i = 0; i < 2; ++i)
        if (r.s[i].eng->create_stream(r.s[i].conn, 1, r.s[i].pd, r.s[i].cq, r.s[i].cq) != Status::ok)
            throw DpdkError("create_stream failed");

    unsigned worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
    if (lcores == 2) {
        if (worker >= RTE_MAX_LCORE) throw DpdkError("two-lcore run needs a worker lcore (EAL -l 0,1)");
        if (int rc = rte_eal_remote_launch(engine_tx_lcore, &r, worker); rc != 0)
            throw DpdkError(fmt::format("rte_eal_remote_launch: {}", rte_strerror(-rc)));
    }
    if (pipeline) {
        if (worker >= RTE_MAX_LCORE) throw DpdkError("pipeline run needs a placement lcore (EAL -l 0,1)");
        if (int rc = rte_eal_remote_launch(placement_lcore, &placement, worker); rc != 0)
            throw DpdkError(fmt::format("rte_eal_remote_launch: {}", rte_strerror(-rc)));
    }
    auto pass = [&] {
        if (lcores == 1) r.sender_pass();
        r.receiver_pass();
    };
    const auto warm = Clock::now() + std::chrono::milliseconds(200);
    while (Clock::now() < warm) pass();
    const PortStats b0 = r.s[1].port->stats();
    r.measuring = true;
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration<double>(seconds);
    while (Clock::now() < end)
        for (int i = 0; i < 64; ++i) pass();
    r.measuring = false;
    Result res;
    res.secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const uint64_t goodput_bytes = r.bytes.load();
    const PortStats b1 = r.s[1].port->stats();
    if (lcores == 2) {
        r.stop = true;
        rte_eal_wait_lcore(worker);
    }
    // Quiesce: outstanding WRITEs finish, acks drain, every mbuf returns.
    const auto qdl = Clock::now() + std::chrono::seconds(2);
    r.posted = r.completed;   // post no more
    while (Clock::now() < qdl) {
        r.sender_step();
        Completion c[32];
        r.s[0].eng->poll_cq(r.s[0].cq, c, 32);
        r.receiver_pass();
    }
    if (pipeline) {
        placement.stop = true;
        rte_eal_wait_lcore(worker);
    }
    res.pkts = b1.rx_packets - b0.rx_packets;   // all packets B received (data), for Mpps
    res.goodput_bytes = goodput_bytes;
    for (auto& sd : r.s) {
        sd.ploop.reset();
        sd.ccloop.reset();
        sd.rings.reset();
        sd.cc.reset();
        sd.loop.reset();
        sd.eng.reset();
    }
    r.s[0].port.reset();
    r.s[1].port.reset();
    rte_ring_free(pair.ab);
    rte_ring_free(pair.ba);
    return res;
}

// ---- net_memif bare loop (two processes) ---------------------------------

// The round trips of the client's ping-pong, in ns.
struct PingPong {
    std::vector<uint64_t> rtt;
};

// One side; returns 0 and, on the server, the packets received in the timed
// window; with pp (ping-pong), the server echoes and the client fills pp->rtt.
int memif_side(bool server, const std::string& sock, uint32_t payload, double seconds, uint16_t burst,
               int cpu, uint32_t mem_mb, uint64_t& got, double& secs, PingPong* pp = nullptr, uint64_t iters = 0) {
    EalConfig ec;
    ec.program = server ? "memif-bench-rx" : "memif-bench-tx";
    ec.args = {"-l", std::to_string(cpu), "--no-huge", "--no-pci", "--log-level", "lib.eal:warning",
               fmt::format("--vdev=net_memif0,role={},id=0,socket={},socket-abstract=no,bsize=8192",
                           server ? "server" : "client", sock)};
    ec.memory_mb = mem_mb;
    ec.file_prefix = fmt::format("mroce-bench-memif-{}-{}", server ? "s" : "c", ::getpid());
    eal_init(ec);
    const uint16_t port = uint16_t(rte_eth_find_next(0));
    const uint32_t frame = 42 + 72 + payload;
    rte_mempool* pool = rte_pktmbuf_pool_create("mb_pool", kPlainFrames + 4 * kDesc, 256, 0,
                                                uint16_t(RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(frame, 2048)), 0);
    if (!pool) throw DpdkError(fmt::format("memif pool: {}", rte_strerror(rte_errno)));
    start_raw(port, pool);
    const auto link_dl = Clock::now() + std::chrono::seconds(20);
    rte_eth_link link{};
    do {
        rte_eth_link_get_nowait(port, &link);
        if (Clock::now() > link_dl) throw DpdkError("memif link did not come up");
    } while (!link.link_status);
    rte_mbuf* b[kMaxBurst];
    got = 0;
    if (pp) {
        // The last round trip's frame carries 0xff in its first payload byte: the server stops.
        constexpr size_t kWarm = 1000;
        const auto end = Clock::now() + std::chrono::duration<double>(seconds + 20.0);
        if (server) {
            bool last = false;
            while (!last && Clock::now() < end) {
                const uint16_t n = rte_eth_rx_burst(port, 0, b, burst);
                if (!n) continue;
                for (uint16_t i = 0; i < n; ++i)
                    last |= rte_pktmbuf_data_len(b[i]) > 42 + 72 && *rte_pktmbuf_mtod_offset(b[i], uint8_t*, 42 + 72) == 0xff;
                const uint16_t s = rte_eth_tx_burst(port, 0, b, n);
                if (s < n) rte_pktmbuf_free_bulk(b + s, n - s);
                got += n;
            }
        } else {
            rte_mbuf* m = rte_pktmbuf_alloc(pool);
            if (!m) throw DpdkError("memif pool exhausted");
            std::memset(rte_pktmbuf_append(m, uint16_t(frame)), 0, frame);
            uint8_t* mark = rte_pktmbuf_mtod_offset(m, uint8_t*, 42 + 72);
            pp->rtt.reserve(iters);
            const auto stop_at = Clock::now() + std::chrono::duration<double>(seconds);
            for (size_t i = 0; i < kWarm + iters; ++i) {
                const bool last = i + 1 == kWarm + iters || (i >= kWarm && Clock::now() >= stop_at);
                if (last) *mark = 0xff;
                const auto t0 = Clock::now();
                rte_mbuf_refcnt_update(m, 1);
                while (rte_eth_tx_burst(port, 0, &m, 1) == 0) {}
                uint16_t n = 0;
                while ((n = rte_eth_rx_burst(port, 0, b, burst)) == 0)
                    if (Clock::now() > end) throw DpdkError("memif ping-pong: no answer");
                const auto t1 = Clock::now();
                rte_pktmbuf_free_bulk(b, n);
                if (i >= kWarm) pp->rtt.push_back(uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
                if (last) break;
            }
            rte_pktmbuf_free(m);
        }
    } else if (server) {
        const auto warm = Clock::now() + std::chrono::milliseconds(300);
        while (Clock::now() < warm) {
            const uint16_t n = rte_eth_rx_burst(port, 0, b, burst);
            if (n) rte_pktmbuf_free_bulk(b, n);
        }
        const auto t0 = Clock::now();
        const auto end = t0 + std::chrono::duration<double>(seconds);
        for (;;) {
            for (int i = 0; i < 256; ++i) {
                const uint16_t n = rte_eth_rx_burst(port, 0, b, burst);
                got += n;
                if (n) rte_pktmbuf_free_bulk(b, n);
            }
            if (Clock::now() >= end) break;
        }
        secs = std::chrono::duration<double>(Clock::now() - t0).count();
    } else {
        std::vector<rte_mbuf*> frames;
        for (size_t i = 0; i < kPlainFrames; ++i) {
            rte_mbuf* m = rte_pktmbuf_alloc(pool);
            if (!m) throw DpdkError("memif pool exhausted while preallocating");
            std::memset(rte_pktmbuf_append(m, uint16_t(frame)), uint8_t(i), frame);
            frames.push_back(m);
        }
        // Until the server is done (its window plus warm-up, with margin).
        const auto end = Clock::now() + std::chrono::duration<double>(seconds + 1.0);
        size_t cursor = 0;
        while (Clock::now() < end) {
            for (int k = 0; k < 256; ++k) {
                for (uint16_t i = 0; i < burst; ++i) {
                    b[i] = frames[(cursor + i) % frames.size()];
                    rte_mbuf_refcnt_update(b[i], 1);
                }
                const uint16_t n = rte_eth_tx_burst(port, 0, b, burst);
                for (uint16_t i = n; i < burst; ++i) rte_mbuf_refcnt_update(b[i], -1);
                cursor += n;
            }
        }
        for (rte_mbuf* m : frames) rte_pktmbuf_free(m);
    }
    // memif: closed on the interrupt thread, not beside the peer's disconnect handler there.
    close_port_on_interrupt_thread(port, true);
    rte_mempool_free(pool);
    eal_cleanup();
    return 0;
}

// One end of the ping-pong in this process, so that a profiler can run it
// beside a native peer (scripts/bench-memif-instr.sh LAT=1): forked, both ends
// would run under it and each would count the other's slowness as empty polls.
int run_memif_side(const Opts& o) {
    const bool server = o.side == "server";
    uint64_t got = 0;
    double secs = 0;
    PingPong pp;
    const int rc = memif_side(server, o.socket, o.payloads.front(), o.seconds, o.burst, server ? 0 : 1, o.mem_mb, got,
                              secs, &pp, o.iters);
    if (!server) fmt::print("memif-pingpong client: {} round trips measured\n", pp.rtt.size());
    return rc;
}

int run_memif(const Opts& o) {
    if (!o.side.empty()) return run_memif_side(o);
    if (o.lat) fmt::print("{:<11} {:>7} {:>9} {:>9} {:>9}\n", "mode", "payload", "p50 us", "p99 us", "samples");
    else
        fmt::print("{:<11} {:>6} {:>7} {:>10} {:>12} {:>12}\n", "mode", "lcores", "payload", "Mpps", "Gbit/s pay",
                   "Gbit/s frame");
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    for (uint32_t payload : o.payloads) {
        const std::string sock = fmt::format("/tmp/mroce-bench-memif-{}.sock", ::getpid());
        ::unlink(sock.c_str());
        int fds[2];
        if (::pipe(fds) != 0) throw DpdkError("pipe");
        std::fflush(nullptr);
        const pid_t srv = ::fork();
        if (srv == 0) {
            ::close(fds[0]);
            uint64_t got = 0;
            double secs = 0;
            int rc = 1;
            PingPong echo;
            try {
                rc = memif_side(true, sock, payload, o.seconds, o.burst, cpus.front(), o.mem_mb, got, secs,
                                o.lat ? &echo : nullptr, o.iters);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "memif server: %s\n", e.what());
            }
            const double r[2] = {double(got), secs};
            if (!o.lat && ::write(fds[1], r, sizeof r) != sizeof r) rc = 1;
            std::fflush(nullptr);
            ::_exit(rc);
        }
        struct stat sb{};
        for (int i = 0; i < 1000 && ::stat(sock.c_str(), &sb) != 0; ++i) ::usleep(10 * 1000);
        const pid_t cli = ::fork();
        if (cli == 0) {
            ::close(fds[0]);
            uint64_t got = 0;
            double secs = 0;
            int rc = 1;
            PingPong pp;
            try {
                rc = memif_side(false, sock, payload, o.seconds, o.burst, cpus.back(), o.mem_mb, got, secs,
                                o.lat ? &pp : nullptr, o.iters);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "memif client: %s\n", e.what());
            }
            if (o.lat) {
                std::sort(pp.rtt.begin(), pp.rtt.end());
                auto pct = [&](double q) {
                    return pp.rtt.empty() ? 0.0 : double(pp.rtt[size_t(q * double(pp.rtt.size() - 1) + 0.5)]) / 1e3;
                };
                const double r[2] = {pct(0.5), pct(0.99)};
                if (pp.rtt.empty() || ::write(fds[1], r, sizeof r) != sizeof r) rc = 1;
                const double n = double(pp.rtt.size());
                if (::write(fds[1], &n, sizeof n) != sizeof n) rc = 1;
            }
            std::fflush(nullptr);
            ::_exit(rc);
        }
        ::close(fds[1]);  // (after both forks: the ping-pong's client reports through it)
        double r[2] = {0, 0}, samples = 0;
        const bool ok = ::read(fds[0], r, sizeof r) == sizeof r && (!o.lat || ::read(fds[0], &samples, sizeof samples) == sizeof samples);
        ::close(fds[0]);
        int st = 0;
        ::waitpid(srv, &st, 0);
        ::waitpid(cli, &st, 0);
        ::unlink(sock.c_str());
        if (o.lat) {
            if (!ok || r[0] <= 0) throw DpdkError("memif ping-pong failed (see the children's messages)");
            fmt::print("{:<11} {:>7} {:>9.2f} {:>9.2f} {:>9.0f}   (two processes, one lcore each, busy-poll)\n",
                       "memif-pingpong", payload, r[0], r[1], samples);
            std::fflush(stdout);
            continue;
        }
        if (!ok || r[1] <= 0) throw DpdkError("memif bare loop failed (see the children's messages)");
        const double pps = r[0] / r[1];
        fmt::print("{:<11} {:>6} {:>7} {:>10.3f} {:>12.2f} {:>12.2f}   (two processes, one lcore each)\n",
                   "memif-plain", 2, payload, pps / 1e6, pps * payload * 8 / 1e9, pps * (42.0 + 72 + payload) * 8 / 1e9);
        std::fflush(stdout);
    }
    return 0;
}

void usage() {
    std::puts(
        "usage: mroce-dpdk-bench [--mode plain,copy,drvtx,driver,engine,pipeline] [--payload 64,4096] [--lcores 1,2]\n"
        "                        [--seconds S] [--burst N] [--ring SLOTS] [--mem MB] [--cache N] [-- EAL args]\n"
        "       mroce-dpdk-bench --memif [--payload 64,4096] [--seconds S] [--burst N] [--mem MB]\n"
        "       mroce-dpdk-bench --memif --lat [--payload 8] [--iters N] [--seconds S]: bare memif ping-pong\n"
        "           [--side server|client --socket PATH]: one end alone, server on CPU 0, client on CPU 1\n"
        "Default EAL args: -l 0,1 --no-huge --no-pci -m <mem> --file-prefix mroce-bench-<pid>");
}

template <class T, class F>
std::vector<T> split(const std::string& s, F conv) {
    std::vector<T> v;
    size_t pos = 0;
    while (pos <= s.size()) {
        const size_t c = s.find(',', pos);
        v.push_back(conv(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos)));
        if (c == std::string::npos) break;
        pos = c + 1;
    }
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    Opts o;
    bool memif = false, payload_given = false;
    std::vector<std::string> eal_extra;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage();
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--mode") o.modes = split<std::string>(val(), [](std::string s) { return s; });
        else if (a == "--payload") payload_given = true, o.payloads = split<uint32_t>(val(), [](const std::string& s) { return uint32_t(std::stoul(s)); });
        else if (a == "--lcores") o.lcores = split<int>(val(), [](const std::string& s) { return std::stoi(s); });
        else if (a == "--seconds") o.seconds = std::stod(val());
        else if (a == "--burst") o.burst = uint16_t(std::stoul(val()));
        else if (a == "--ring") o.ring = unsigned(std::stoul(val()));
        else if (a == "--mem") o.mem_mb = uint32_t(std::stoul(val()));
        else if (a == "--memif") memif = true;
        else if (a == "--lat") o.lat = true;
        else if (a == "--iters") o.iters = std::stoull(val());
        else if (a == "--side") o.side = val();
        else if (a == "--socket") o.socket = val();
        else if (a == "--cache") g_cache = unsigned(std::stoul(val()));
        else if (a == "--") { eal_extra.assign(argv + i + 1, argv + argc); break; }
        else { usage(); return a == "-h" || a == "--help" ? 0 : 2; }
    }
    if (o.burst == 0 || o.burst > kMaxBurst) {
        std::fprintf(stderr, "--burst must be in [1, %u]\n", kMaxBurst);
        return 2;
    }
    if (o.ring < 2 || (o.ring & (o.ring - 1))) {
        std::fprintf(stderr, "--ring must be a power of two >= 2\n");
        return 2;
    }
    g_ring = o.ring;
    if (o.lat && !memif) {
        std::fprintf(stderr, "--lat is the memif ping-pong: add --memif\n");
        return 2;
    }
    if (!o.side.empty() && (!o.lat || (o.side != "server" && o.side != "client") || o.socket.empty())) {
        std::fprintf(stderr, "--side server|client needs --memif --lat and --socket PATH\n");
        return 2;
    }
    if (memif) {
        if (o.lat && !payload_given) o.payloads = {8};
        try {
            return run_memif(o);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "mroce-dpdk-bench: %s\n", e.what());
            return 1;
        }
    }
    try {
        EalConfig ec;
        ec.program = "mroce-dpdk-bench";
        ec.args = eal_extra.empty()
            ? std::vector<std::string>{"-l", "0,1", "--no-huge", "--no-pci", "--log-level", "lib.eal:warning"}
            : eal_extra;
        ec.memory_mb = o.mem_mb;
        ec.file_prefix = fmt::format("mroce-bench-{}", ::getpid());
        const auto used = eal_init(ec);
        std::string joined;
        for (const auto& s : used) joined += s + " ";
        fmt::print("EAL: {}\n", joined);
        fmt::print("{:<7} {:>6} {:>7} {:>10} {:>12} {:>12}\n", "mode", "lcores", "payload", "Mpps", "Gbit/s pay",
                   "Gbit/s frame");

        int idx = 0;
        for (const auto& mode : o.modes) {
            if (mode != "plain" && mode != "copy" && mode != "drvtx" && mode != "driver" && mode != "engine" &&
                mode != "pipeline")
                throw DpdkError("unknown mode " + mode + " (plain, copy, drvtx, driver, engine, pipeline)");
            for (uint32_t payload : o.payloads) {
                for (int lc : o.lcores) {
                    if (mode == "pipeline" && lc != 2) continue;   // engine lcore + placement lcore
                    if (mode == "engine" || mode == "pipeline") {
                        const Result res = measure_engine(payload, lc, o.seconds, idx++, mode == "pipeline");
                        const double pps = double(res.pkts) / res.secs;
                        const double gbps = double(res.goodput_bytes) * 8 / res.secs / 1e9;
                        fmt::print("{:<7} {:>6} {:>7} {:>10.3f} {:>12.2f} {:>12.2f}   (pay = WRITE goodput; "
                                   "Mpps = all frames B received)\n",
                                   mode, lc, payload, pps / 1e6, gbps, pps * (42.0 + 72 + payload) * 8 / 1e9);
                        std::fflush(stdout);
                        continue;
                    }
                    Run r;
                    r.mode = mode;
                    r.payload = payload;
                    r.burst = o.burst;
                    r.seconds = o.seconds;
                    r.pair = make_pair(idx++);
                    constexpr uint16_t kHdr = 72;
                    if (mode == "plain" || mode == "copy") {
                        // 8 MiB: the size of the engine mode's destination region.
                        if (mode == "copy") r.dst.assign(8u << 20, 0);
                        const uint32_t frame = 42 + kHdr + payload;
                        r.plain_pool = rte_pktmbuf_pool_create(fmt::format("b_pl{}", idx).c_str(),
                                                               kPlainFrames + g_ring + 512, 256, 0,
                                                               uint16_t(RTE_PKTMBUF_HEADROOM + frame), 0);
                        if (!r.plain_pool)
                            throw DpdkError(fmt::format("plain pool: {}", rte_strerror(rte_errno)));
                        start_raw(r.pair.a, r.plain_pool);
                        start_raw(r.pair.b, r.plain_pool);
                        for (size_t i = 0; i < kPlainFrames; ++i) {
                            rte_mbuf* m = rte_pktmbuf_alloc(r.plain_pool);
                            if (!m) throw DpdkError("plain pool exhausted while preallocating");
                            std::memset(rte_pktmbuf_append(m, uint16_t(frame)), uint8_t(i), frame);
                            r.frames.push_back(m);
                        }
                    } else {
                        r.pa = std::make_unique<DpdkPort>(
                            port_cfg(r.pair.a, kIpA, kIpB, mac_of(r.pair.b), o.burst));
                        if (mode == "driver") {
                            r.pb = std::make_unique<DpdkPort>(
                                port_cfg(r.pair.b, kIpB, kIpA, mac_of(r.pair.a), o.burst));
                        } else {
                            r.plain_pool = rte_pktmbuf_pool_create(fmt::format("b_rx{}", idx).c_str(),
                                                                   kDesc + 512, 0, 0, 2048 + RTE_PKTMBUF_HEADROOM, 0);
                            if (!r.plain_pool) throw DpdkError("rx pool: " + std::string(rte_strerror(rte_errno)));
                            start_raw(r.pair.b, r.plain_pool);
                        }
                        // Distinct payload slices, as an engine streaming a message would send.
                        const size_t slices = 1024;
                        r.mem.assign(slices * payload + 1, 0x5a);
                        for (size_t i = 0; i < slices + kMaxBurst; ++i) {
                            TxPacket p;
                            p.peer = 0;
                            p.entropy = uint16_t(i % 8);
                            p.hdr_len = kHdr;
                            std::memset(p.hdr, int(i), kHdr);
                            p.payload = payload ? r.mem.data() + (i % slices) * payload : nullptr;
                            p.payload_len = payload;
                            r.txp.push_back(p);
                        }
                    }
                    const Result res = measure(r, lc);
                    const double pps = double(res.pkts) / res.secs;
                    fmt::print("{:<7} {:>6} {:>7} {:>10.3f} {:>12.2f} {:>12.2f}\n", mode, lc, payload, pps / 1e6,
                               pps * payload * 8 / 1e9, pps * (42.0 + kHdr + payload) * 8 / 1e9);
                    if (r.pb) {
                        const PortStats s = r.pb->stats();
                        if (s.rx_dropped())
                            fmt::print("  (receiver dropped {} frames: bug)\n", s.rx_dropped());
                    }
                    std::fflush(stdout);
                    // Teardown: every mbuf back home first (frames, ring contents).
                    for (rte_mbuf* m : r.frames) rte_pktmbuf_free(m);
                    r.pb.reset();
                    r.pa.reset();
                    if (mode != "driver") {
                        if (mode == "plain" || mode == "copy") {
                            rte_eth_dev_stop(r.pair.a);
                            rte_eth_dev_close(r.pair.a);
                        }
                        rte_eth_dev_stop(r.pair.b);
                        rte_eth_dev_close(r.pair.b);
                    }
                    rte_mempool_free(r.plain_pool);
                    rte_ring_free(r.pair.ab);
                    rte_ring_free(r.pair.ba);
                }
            }
        }
        eal_cleanup();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mroce-dpdk-bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
