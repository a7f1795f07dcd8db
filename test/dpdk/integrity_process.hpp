// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// One side of the integrity workload in its own process, with its own EAL
// and one port (net_memif, net_af_packet, ...). The test process never
// initialises the EAL: it maps both sides' memory, forks the two sides (so
// each knows the other's addresses without a side channel) and only waits.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <rte_ethdev.h>

#include <rte_launch.h>
#include <rte_lcore.h>

#include "integrity_workload.hpp"
#include "mroce/dpdk/pipeline.hpp"

namespace mroce::test {

struct ProcSide {
    bool requester = false;
    std::string name;                 // for messages
    std::vector<std::string> eal_args;
    std::string file_prefix;
    std::string netns;                // enter /run/netns/<netns> first, when set
    uint32_t local_ip = 0, peer_ip = 0;
    dpdk::MacAddr peer_mac{};
    uint32_t tx_max_l3 = 0;           // 0: the port's MTU
    uint32_t rx_mbuf_factor = 1;      // RX mbufs per frame when the PMD chains its buffers
    uint16_t rx_data_room = 0;        // 0: PoolConfig's default
    uint16_t max_payload = 4096;
    double loss = 0;
    uint64_t seed = 1;
    const Workload* w = nullptr;
    uint8_t* mem_a = nullptr;         // mapped before fork: same address in both children
    uint8_t* mem_b = nullptr;
    int seconds = 40;
    // The link also carries the kernel's own frames (ARP, ICMP port unreachable
    // for our UDP port in a namespace with addresses): drops of non-IPv4 and
    // non-UDP frames are expected then; anything else dropped is a fault.
    bool kernel_link = false;
    // Pipeline arrangement: deferred placement and offloaded CC,
    // PipelineLoop on the main lcore, the copies on the next EAL lcore and
    // the CC core on the one after (eal_args must give both).
    bool pipeline = false;
    // memif server: close the port only once the client's disconnect has
    // been handled (link down, then a grace), or 5 s passed. DPDK 22.11's
    // memif handles a disconnect on the EAL interrupt thread; arriving while
    // this process closes the same port, it read a freed interrupt handle
    // (SEGV in librte_eal from net_memif's handler, the CI's ASan build).
    // memif_disconnect() marks the link down first and frees the control
    // channel after, unlocked, so link down alone still raced rte_eth_dev_stop
    // (SEGV in rte_eth_dev_stop -> memif -> librte_eal, CI at d6f56d6).
    bool close_after_peer = false;
};

template <class Loop, class Outstanding>
int run_proc_loop(const ProcSide& ps, Engine& eng, LossyEngine& lossy, dpdk::DpdkPort& dp, Loop& loop,
                  const dpdk::PoolUsage& u0, std::chrono::steady_clock::time_point deadline,
                  Outstanding&& outstanding);

// Child body: returns the exit code and prints why on failure.
inline int run_proc_side(const ProcSide& ps) {
    using Clock = std::chrono::steady_clock;
    const char* who = ps.name.c_str();
    try {
        if (!ps.netns.empty()) {
            const std::string path = "/run/netns/" + ps.netns;
            const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0)
                throw dpdk::DpdkError(fmt::format("cannot enter network namespace {}", path));
            ::close(fd);
        }
        dpdk::EalConfig ec;
        ec.program = ps.name;
        ec.args = ps.eal_args;
        ec.file_prefix = ps.file_prefix;
        dpdk::eal_init(ec);
        // Declared before the port, so it runs after the port is gone.
        struct EalGuard {
            ~EalGuard() { dpdk::eal_cleanup(); }
        } eal_guard;
        if (rte_eth_dev_count_avail() != 1) throw dpdk::DpdkError("expected exactly one port");
        const uint16_t port = uint16_t(rte_eth_find_next(0));

        dpdk::PortConfig c;
        c.port_id = port;
        c.local_ip = ps.local_ip;
        c.neighbours = {{ps.peer_ip, ps.peer_mac}};
        c.tx_max_l3 = ps.tx_max_l3;
        const dpdk::PoolConfig need = dpdk::DpdkPort::min_pools(c);
        c.pools.rx_mbufs = need.rx_mbufs * ps.rx_mbuf_factor;
        // Pipeline: up to place_depth received mbufs wait for their copy.
        if (ps.pipeline) c.pools.rx_mbufs += EngineConfig{}.place_depth * ps.rx_mbuf_factor;
        c.pools.hdr_mbufs = need.hdr_mbufs;
        c.pools.ext_mbufs = need.ext_mbufs;
        if (ps.rx_data_room) c.pools.rx_data_room = ps.rx_data_room;
        dpdk::DpdkPort dp(c);
        // Declared after the port, so it runs before the port closes.
        struct PeerCloseWait {
            uint16_t port;
            bool on;
            ~PeerCloseWait() {
                const auto until = Clock::now() + std::chrono::seconds(5);
                rte_eth_link l{};
                while (on && Clock::now() < until) {
                    rte_eth_link_get_nowait(port, &l);
                    if (!l.link_status) {
                        // No API tells when the interrupt thread is done with
                        // the disconnect; it takes microseconds, the grace is
                        // for a descheduled thread on a loaded 2-CPU machine.
                        ::usleep(300 * 1000);
                        break;
                    }
                    ::usleep(1000);
                }
            }
        } peer_close_wait{port, ps.close_after_peer};

        const auto deadline = Clock::now() + std::chrono::seconds(ps.seconds);
        rte_eth_link link{};
        do {
            rte_eth_link_get_nowait(port, &link);
            if (Clock::now() > deadline) throw dpdk::DpdkError("link did not come up");
        } while (!link.link_status);
        const dpdk::PoolUsage u0 = dp.pool_usage();

        EngineConfig cfg = integrity_engine_config(ps.max_payload);
        cfg.deferred_placement = ps.pipeline;
        cfg.offload_cc = ps.pipeline;
        Engine eng(cfg);
        LossyEngine lossy(eng, ps.loss, ps.seed * (ps.requester ? 3 : 5) + 1);
        if (!ps.pipeline) {
            dpdk::EngineLoop<LossyEngine> loop(dpdk::QueuePort(dp), lossy);
            return run_proc_loop(ps, eng, lossy, dp, loop, u0, deadline, [] { return uint64_t(0); });
        }
        dpdk::PlacementRings rings("proc_pl", eng.config().place_depth);
        dpdk::CcRings cc_rings("proc_cc", eng.config().cc);
        dpdk::PipelineLoop<LossyEngine> loop(dpdk::QueuePort(dp), lossy, {&rings, &cc_rings});
        dpdk::PlacementStage placement;
        placement.add(rings);
        dpdk::CcStage cc;
        cc.add(cc_rings);
        const unsigned lc = rte_get_next_lcore(-1, 1, 0);
        const unsigned lc_cc = rte_get_next_lcore(lc, 1, 0);
        if (lc_cc >= RTE_MAX_LCORE)
            throw dpdk::DpdkError("pipeline needs two more EAL lcores (placement and the CC core)");
        int rc = 0;
        {
            dpdk::StageLcore<dpdk::PlacementStage> on_lc(placement, lc);
            dpdk::StageLcore<dpdk::CcStage> on_lc_cc(cc, lc_cc);
            rc = run_proc_loop(ps, eng, lossy, dp, loop, u0, deadline, [&] { return loop.outstanding(); });
            while (eng.cc_feedback_waiting()) cc_rings.exchange(lossy);
        }
        if (rc != 0) return rc;
        std::printf("%s: pipeline: %llu window records on CC lcore %u\n", who,
                    (unsigned long long)cc_rings.core().records(), lc_cc);
        if (cc_rings.core().records() != eng.stats().cc_feedback || eng.stats().cc_feedback == 0 ||
            eng.stats().cc_feedback_full != 0) {
            std::fprintf(stderr, "%s: CC core: %llu records applied, %llu fed, %llu dropped\n", who,
                         (unsigned long long)cc_rings.core().records(), (unsigned long long)eng.stats().cc_feedback,
                         (unsigned long long)eng.stats().cc_feedback_full);
            return 10;
        }
        std::printf("%s: pipeline: %llu copies on lcore %u\n", who, (unsigned long long)placement.copies(), lc);
        if (placement.copies() != loop.jobs_sent() || eng.stats().place_jobs != loop.jobs_sent() ||
            eng.place_outstanding() != 0 || (!ps.requester && placement.copies() == 0)) {
            std::fprintf(stderr, "%s: placement: %llu copies, %llu jobs sent, %llu made, %zu outstanding\n", who,
                         (unsigned long long)placement.copies(), (unsigned long long)loop.jobs_sent(),
                         (unsigned long long)eng.stats().place_jobs, eng.place_outstanding());
            return 9;
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", who, e.what());
        return 2;
    }
}

// The workload over one loop (EngineLoop or PipelineLoop); outstanding() =
// copies still on the placement rings.
template <class Loop, class Outstanding>
int run_proc_loop(const ProcSide& ps, Engine& eng, LossyEngine& lossy, dpdk::DpdkPort& dp, Loop& loop,
                  const dpdk::PoolUsage& u0, std::chrono::steady_clock::time_point deadline,
                  Outstanding&& outstanding) {
    using Clock = std::chrono::steady_clock;
    const char* who = ps.name.c_str();
    const Workload& w = *ps.w;
    {
        const uint64_t base_a = uint64_t(uintptr_t(ps.mem_a)), base_b = uint64_t(uintptr_t(ps.mem_b));
        IntegritySide side(eng, w, ps.requester, ps.requester ? ps.mem_a : ps.mem_b, base_a, base_b, 0);
        side.start();
        const auto t0 = Clock::now();
        auto pass = [&] {
            loop.step(loop.now());
            side.app();
        };
        while (!side.finished() && !side.failed() && Clock::now() < deadline) pass();
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        // Serve the peer a while longer: the responder acks the final SEND's
        // retransmissions, the requester acks late READ/atomic responses; any
        // completion now is a duplicate and fails verify().
        const auto linger = Clock::now() + std::chrono::milliseconds(600);
        while (Clock::now() < linger) pass();
        const auto drain = Clock::now() + std::chrono::seconds(2);
        while (outstanding() != 0 && Clock::now() < drain) pass();

        ConnStats cs{};
        eng.conn_stats(side.conn(), cs);
        const dpdk::PortStats st = dp.stats();
        std::printf("%s: %s in %.2f s: %zu ops, %.1f MB, injected drops %llu, retransmits %llu, rnr %llu, "
                    "port rx %llu tx %llu rx-dropped %llu\n",
                    who, side.finished() ? "finished" : "NOT finished", secs, w.want_send, w.payload_bytes / 1e6,
                    (unsigned long long)lossy.dropped(), (unsigned long long)cs.retransmits,
                    (unsigned long long)cs.rnr_drops, (unsigned long long)st.rx_packets,
                    (unsigned long long)st.tx_packets, (unsigned long long)st.rx_dropped());
        if (st.rx_dropped())
            std::printf("%s: port dropped: not-ipv4 %llu not-udp %llu wrong-port %llu wrong-dst %llu bad-len %llu "
                        "bad-cksum %llu unknown-peer %llu too-big %llu\n",
                        who, (unsigned long long)st.rx_not_ipv4, (unsigned long long)st.rx_not_udp,
                        (unsigned long long)st.rx_wrong_port, (unsigned long long)st.rx_wrong_dst,
                        (unsigned long long)st.rx_bad_length, (unsigned long long)st.rx_bad_cksum,
                        (unsigned long long)st.rx_unknown_peer, (unsigned long long)st.rx_too_big);
        if (!side.finished()) {
            for (const auto& e : side.errors()) std::fprintf(stderr, "%s: %s\n", who, e.c_str());
            std::fprintf(stderr, "%s: timeout, connection %s\n", who, to_string(eng.conn_state(side.conn())));
            return 5;
        }
        side.verify();
        for (const auto& e : side.errors()) std::fprintf(stderr, "%s: %s\n", who, e.c_str());
        if (side.failed()) return 6;
        if (eng.stats().rx_decode_errors) {
            std::fprintf(stderr, "%s: %llu decode errors\n", who, (unsigned long long)eng.stats().rx_decode_errors);
            return 7;
        }
        const uint64_t foreign = ps.kernel_link ? st.rx_not_ipv4 + st.rx_not_udp : 0;
        if (st.rx_dropped() != foreign) {
            std::fprintf(stderr, "%s: %llu received frames dropped by the port\n", who,
                         (unsigned long long)(st.rx_dropped() - foreign));
            return 8;
        }
        const dpdk::PoolUsage u = dp.pool_usage();
        if (u != u0) {
            std::fprintf(stderr, "%s: mbufs in use rx %u hdr %u ext %u, at start %u %u %u\n", who, u.rx, u.hdr,
                         u.ext, u0.rx, u0.hdr, u0.ext);
            return 4;
        }
        return 0;
    }
}

inline pid_t fork_side(const ProcSide& ps) {
    std::fflush(nullptr);
    const pid_t p = ::fork();
    if (p == 0) {
        const int rc = run_proc_side(ps);
        std::fflush(nullptr);   // _exit skips stdio flushing
        ::_exit(rc);
    }
    return p;
}

// Waits for both children until the deadline, kills what is left; exit codes (-1: killed or crashed).
inline std::pair<int, int> wait_pair(pid_t a, pid_t b, int seconds) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    int st[2] = {0, 0};
    bool done[2] = {a <= 0, b <= 0};
    const pid_t pid[2] = {a, b};
    while (!(done[0] && done[1]) && Clock::now() < deadline) {
        for (int i = 0; i < 2; ++i)
            if (!done[i] && ::waitpid(pid[i], &st[i], WNOHANG) == pid[i]) done[i] = true;
        ::usleep(10 * 1000);
    }
    int rc[2];
    for (int i = 0; i < 2; ++i) {
        if (pid[i] <= 0) {
            rc[i] = -1;
            continue;
        }
        if (!done[i]) {
            ::kill(pid[i], SIGKILL);
            ::waitpid(pid[i], &st[i], 0);
        }
        rc[i] = done[i] && WIFEXITED(st[i]) ? WEXITSTATUS(st[i]) : -1;
    }
    return {rc[0], rc[1]};
}

// Anonymous memory for both sides, mapped before fork.
struct SharedLayout {
    size_t len = 0;
    uint8_t* a = nullptr;
    uint8_t* b = nullptr;
    explicit SharedLayout(size_t n) : len(n) {
        a = static_cast<uint8_t*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        b = static_cast<uint8_t*>(::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    }
    bool ok() const { return a != MAP_FAILED && b != MAP_FAILED; }
    ~SharedLayout() {
        if (a != MAP_FAILED) ::munmap(a, len);
        if (b != MAP_FAILED) ::munmap(b, len);
    }
};

}  // namespace mroce::test
