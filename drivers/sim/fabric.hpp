// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Deterministic simulated fabric: hosts (each driving one protocol engine
// through the packet_io boundary), links with rate, propagation delay,
// drop-tail queues, ECN marking, random loss/duplication and up/down state,
// and a router that maps each packet to a sequence of links. Time is virtual
// (ns); everything random comes from per-link PRNG streams derived from the
// fabric seed, so a run is a pure function of (seed, configuration, inputs).
// Single-threaded: the engine's tests and benchmarks drive it from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mroce/packet_io.hpp"

namespace mroce {
class Engine;
}

namespace mroce::sim {

using HostId = uint32_t;
using LinkId = uint32_t;

inline constexpr Time kNever = UINT64_MAX;
inline constexpr uint64_t kUnlimited = UINT64_MAX;
inline constexpr LinkId kNoLink = UINT32_MAX;
// Longest route a router may return (a host NIC link, if any, comes on top).
inline constexpr size_t kMaxHops = 7;
// Same value as mroce::kControlPath: connection control leaves from the
// device's well-known port, so topologies send it along path 0's route.
inline constexpr uint16_t kControlPathIndex = 0xFFFF;

// xoshiro256** seeded through splitmix64: fast, and fully reproducible on
// every platform (std::<random> distributions are not).
class Rng {
public:
    explicit Rng(uint64_t seed = 1) noexcept { reseed(seed); }
    void reseed(uint64_t seed) noexcept;
    uint64_t next() noexcept {
        const uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }
    // Uniform in [0, bound) (bound > 0); Lemire's multiply-shift, bias < 2^-64 * bound.
    uint64_t below(uint64_t bound) noexcept {
        return uint64_t((static_cast<unsigned __int128>(next()) * bound) >> 64);
    }
    double uniform() noexcept { return double(next() >> 11) * 0x1.0p-53; }

private:
    static uint64_t rotl(uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
    uint64_t s_[4];
};

uint64_t splitmix64(uint64_t x) noexcept;

struct LinkConfig {
    uint64_t rate_bps = 100'000'000'000;     // serialization rate
    Time delay = 1'000;                      // propagation, ns
    uint64_t capacity_bytes = kUnlimited;    // output queue (drop-tail), counting the packet in service
    uint64_t ecn_threshold_bytes = kUnlimited;  // CE-mark ECT packets that find more queued than this
    // RED-style ramp instead of the threshold (when ecn_max_bytes > 0): an
    // ECT packet that finds a backlog q is CE-marked with probability
    // ecn_pmax * (q - ecn_min_bytes) / (ecn_max_bytes - ecn_min_bytes)
    // between the two, always from ecn_max_bytes on (draws from the link's
    // own random stream).
    uint64_t ecn_min_bytes = 0;
    uint64_t ecn_max_bytes = 0;
    double ecn_pmax = 1;
    double loss = 0;                         // probability a packet is lost on the wire
    double duplicate = 0;                    // probability a packet arrives twice
    Time jitter = 0;                         // extra propagation, uniform in [0, jitter] ns per packet
    // Jitter normally never reorders one link's packets (a path must not
    // reorder, or its SACK gaps stop meaning loss); set to let it.
    bool jitter_reorders = false;
    // Framing added to each datagram on this link: 42 for Ethernet + IPv4 +
    // UDP headers, 66 with FCS, preamble and inter-frame gap.
    uint32_t overhead_bytes = 0;
    bool up = true;
    // Priority flow control for the one lossless class (RoCEv2 baselines; off
    // by default, and off for mroce, which needs none): the switch this link
    // feeds counts the bytes that came in over it and still wait in any of
    // its output queues; above pfc_xoff_bytes it pauses this link, below
    // pfc_xon_bytes it resumes it. PAUSE and RESUME take effect one
    // propagation delay later (the frame's flight back), so the receiving
    // queues need headroom above xoff for what is on the wire meanwhile. A
    // link with PFC serializes one packet at a time (a service event each),
    // so a pause stops it at the next packet boundary, and a paused link's
    // queue backs up into the links feeding it: pauses spread upstream.
    uint64_t pfc_xoff_bytes = kUnlimited;  // kUnlimited: no PFC on this link
    uint64_t pfc_xon_bytes = 0;
    std::string name;
};

struct LinkCounters {
    uint64_t tx_packets = 0;      // admitted to the queue (and serialized)
    uint64_t tx_bytes = 0;        // of those, including overhead_bytes
    uint64_t delivered = 0;       // reached the far end
    uint64_t drop_queue = 0;      // tail drops: queue at capacity
    uint64_t drop_loss = 0;       // random loss
    uint64_t drop_down = 0;       // link down at enqueue, or went down while the packet was queued/on the wire
    uint64_t ce_marks = 0;
    uint64_t duplicates = 0;
    uint64_t max_queue_bytes = 0; // largest backlog an arriving packet found
    uint64_t queue_samples = 0;   // arrivals at the queue (while up)
    uint64_t queue_bytes_sum = 0; // sum of the backlog each arrival found
    uint64_t pfc_pauses = 0;      // PFC: times this link was paused
    Time pfc_paused_ns = 0;       // ... and for how long in all (up to the last resume)
    double mean_queue_bytes() const noexcept {
        return queue_samples ? double(queue_bytes_sum) / double(queue_samples) : 0.0;
    }
    uint64_t drops() const noexcept { return drop_queue + drop_loss + drop_down; }
};

class Fabric;
class HostLoop;

namespace detail {

// FIFO ring that grows by doubling and never shrinks, so a queue that has
// reached its deepest point allocates nothing more.
template <class T>
class Fifo {
public:
    Fifo() : buf_(16) {}
    bool empty() const noexcept { return count_ == 0; }
    size_t size() const noexcept { return count_; }
    T& front() noexcept { return buf_[head_]; }
    const T& front() const noexcept { return buf_[head_]; }
    const T& operator[](size_t i) const noexcept { return buf_[(head_ + i) & (buf_.size() - 1)]; }
    void pop_front() noexcept {
        head_ = (head_ + 1) & (buf_.size() - 1);
        --count_;
    }
    void push_back(const T& v) {
        if (count_ == buf_.size()) grow();
        buf_[(head_ + count_) & (buf_.size() - 1)] = v;
        ++count_;
    }
    void clear() noexcept { head_ = count_ = 0; }

private:
    void grow() {
        std::vector<T> bigger(buf_.size() * 2);
        for (size_t i = 0; i < count_; ++i) bigger[i] = (*this)[i];
        buf_.swap(bigger);
        head_ = 0;
    }
    std::vector<T> buf_;
    size_t head_ = 0;
    size_t count_ = 0;
};

}  // namespace detail

// One direction of a wire with its output queue. Obtain with Fabric::link();
// every setter may be used mid-run (to fail a path, add loss, move a hot spot).
class Link {
public:
    LinkId id() const noexcept { return id_; }
    const LinkConfig& config() const noexcept { return cfg_; }
    const LinkCounters& counters() const noexcept { return ctr_; }
    void reset_counters() noexcept { ctr_ = {}; }

    bool up() const noexcept { return cfg_.up; }
    // Down: every packet queued or on the wire is dropped, and so is every
    // packet offered until it is up again (a failed path or plane).
    void set_up(bool up) noexcept;
    void set_loss(double p) noexcept;
    void set_duplicate(double p) noexcept;
    void set_ecn_threshold(uint64_t bytes) noexcept { cfg_.ecn_threshold_bytes = bytes; }
    // ecn_max_bytes = 0: back to the threshold.
    void set_ecn_ramp(uint64_t min_bytes, uint64_t max_bytes, double pmax);
    void set_capacity(uint64_t bytes) noexcept { cfg_.capacity_bytes = bytes; }
    void set_rate(uint64_t bps) noexcept;
    void set_delay(Time ns) noexcept { cfg_.delay = ns; }
    void set_jitter(Time ns) noexcept { cfg_.jitter = ns; }
    bool paused() const noexcept { return paused_; }

    // Bytes queued or in service at the fabric's current time.
    uint64_t queue_bytes() const noexcept;

private:
    struct QueueEntry {
        Time finish;  // end of serialization (rounded up to the ns)
        uint64_t bytes;
    };
    struct Arrival {
        Time t;
        uint64_t key;   // event order key, taken when the packet was enqueued
        uint32_t slot;
    };

    friend class Fabric;
    Link(LinkId id, const LinkConfig& cfg, uint64_t seed, Fabric* fab);
    void drain(Time now) noexcept;
    bool ce_mark(uint64_t backlog) noexcept;  // whether an ECT packet finding this backlog is marked
    // Starts serializing `bytes` at the later of now and the end of the
    // previous packet; returns when the last bit leaves (rounded up to the ns).
    Time serialize(Time now, uint64_t bytes) noexcept;

    LinkId id_;
    LinkConfig cfg_;
    LinkCounters ctr_{};
    Rng rng_;
    Fabric* fab_;
    uint64_t loss_threshold_ = 0;  // next() < threshold: lost; precomputed so the hot path has no doubles
    uint64_t dup_threshold_ = 0;
    uint32_t epoch_ = 0;           // bumped on every down transition; packets remember it
    // The transmitter is busy until busy_ns_ + busy_rem_ / rate_bps ns: the
    // remainder is kept exactly, so a long train at a rate that does not
    // divide a nanosecond never drifts.
    Time busy_ns_ = 0;
    uint64_t busy_rem_ = 0;
    uint64_t backlog_bytes_ = 0;
    Time last_arrival_ = 0;
    detail::Fifo<QueueEntry> queue_;  // packets whose serialization has not finished
    // Packets past the queue, in arrival order (a link never reorders unless
    // jitter_reorders): the fabric's event heap holds only each link's head,
    // so it stays as small as the number of busy links.
    detail::Fifo<Arrival> arrivals_;
    // PFC (cfg_.pfc_xoff_bytes set on this link or on a link it feeds):
    // packets admitted but not yet serializing, one at a time after the other.
    struct Held {
        uint32_t slot;
        uint64_t bytes;
        LinkId upstream;  // the link it came in on (kNoLink: from its host)
    };
    bool pfc_served_ = false;     // this link serializes through held_
    detail::Fifo<Held> held_;
    bool serving_ = false;        // a packet is serializing; its end is an event
    Held in_service_{};
    uint64_t ingress_bytes_ = 0;  // bytes that came in over this link, still queued downstream
    bool pause_wanted_ = false;   // what the downstream switch last signalled
    bool paused_ = false;         // what is in effect here
    Time paused_since_ = 0;
};

// What a host runs, in the fabric's own unit tests (which need not link the
// engine): a stand-in for the engine, driven by the same loop
// (host_loop.hpp) as the real one that Fabric::add_host(Engine&) adds.
class Endpoint {
public:
    virtual ~Endpoint() = default;
    virtual void rx_burst(const RxPacket* pkts, size_t n, Time now) = 0;
    virtual size_t tx_burst(TxPacket* out, size_t max, Time now) = 0;
    virtual Time next_deadline(Time now) = 0;
};

struct HostConfig {
    uint32_t burst = 32;        // packets per rx_burst / tx_burst call
    Time rx_coalesce = 0;       // process arrivals at most this long after the first (0: at once)
    // Optional NIC: a serializing link in front of every route from this host,
    // with a transmit ring: tx_burst is not called while more than
    // nic_ring_bytes wait in it (backpressure instead of drops). 0 = no NIC model.
    uint64_t nic_rate_bps = 0;
    uint64_t nic_ring_bytes = 256 * 1024;
    uint32_t nic_overhead_bytes = 0;
};

struct HostCounters {
    uint64_t tx_packets = 0;
    uint64_t tx_bytes = 0;        // datagram bytes (header + payload)
    uint64_t rx_packets = 0;
    uint64_t rx_bytes = 0;
    uint64_t drop_no_route = 0;   // router returned no links
    uint64_t drop_bad_peer = 0;   // TxPacket::peer is not a host
    uint64_t polls = 0;
    uint64_t rx_bursts = 0;
    uint64_t tx_bursts = 0;
    uint64_t nic_stalls = 0;      // polls that stopped pulling packets because the NIC ring was full
    uint64_t deadline_spins = 0;  // next_deadline() <= now after tx_burst came back short (engine bug smell)
};

// Fills out[0..kMaxHops) with the links from src to dst for one packet and
// returns how many (0: unroutable, the packet is dropped and counted).
using Router = std::function<size_t(HostId src, HostId dst, uint16_t path, uint16_t entropy, LinkId* out)>;

struct TraceEvent {
    enum class Kind : uint8_t {
        send,          // host handed a packet to the fabric
        enqueue,       // admitted to a link queue
        drop_queue,
        drop_loss,
        drop_down,
        drop_no_route,
        ce_mark,
        duplicate,
        deliver,       // handed to the destination endpoint's rx_burst
    };
    Time time = 0;
    Kind kind = Kind::send;
    LinkId link = kNoLink;
    HostId src = 0;
    HostId dst = 0;
    uint16_t path = 0;
    uint16_t entropy = 0;
    uint32_t len = 0;
    uint8_t ce = 0;
};
const char* to_string(TraceEvent::Kind k) noexcept;

class Fabric {
public:
    explicit Fabric(uint64_t seed = 1);
    ~Fabric();
    Fabric(const Fabric&) = delete;
    Fabric& operator=(const Fabric&) = delete;

    uint64_t seed() const noexcept { return seed_; }

    // Host ids are 0, 1, 2, ... in order of addition; a host id is the peer
    // handle in TxPacket::peer / RxPacket::peer (and for Engine::connect).
    // RxPacket::local_path carries the sender's path index (each path is a
    // port pair in the sim). The fabric does not own an Engine or Endpoint
    // passed by reference: it must outlive the fabric's last run.
    HostId add_host(Engine& engine, const HostConfig& cfg = {});  // defined in engine_host.cpp
    HostId add_host(Engine* engine, const HostConfig& cfg = {}) { return add_host(*engine, cfg); }
    HostId add_host(Endpoint& endpoint, const HostConfig& cfg = {});
    HostId add_host(std::unique_ptr<Endpoint> endpoint, const HostConfig& cfg = {});
    size_t num_hosts() const noexcept;
    const HostCounters& host_counters(HostId h) const;
    LinkId nic_link(HostId h) const;  // kNoLink without a NIC model

    LinkId add_link(const LinkConfig& cfg);
    size_t num_links() const noexcept { return links_.size(); }
    Link& link(LinkId l) { return *links_.at(l); }
    const Link& link(LinkId l) const { return *links_.at(l); }

    void set_router(Router r);

    // Virtual time. Every run_until first polls every host (so work posted to
    // an engine between runs is picked up without an explicit kick).
    Time now() const noexcept { return now_; }
    void run_until(Time t);
    void run_for(Time dt) { run_until(now_ + dt); }
    // Runs until pred() holds (checked before the first and after every
    // event) or the clock reaches limit; returns whether pred() held.
    template <class Pred>
    bool run_until(Pred&& pred, Time limit) {
        kick_all();
        for (;;) {
            if (pred()) return true;
            if (!step(limit)) return pred();
        }
    }
    // Processes the next event if it is due at or before limit and returns
    // true; otherwise advances the clock to limit and returns false.
    bool step(Time limit);

    void kick(HostId h);  // poll this host now
    void kick_all();
    // Runs fn at virtual time t (>= now), e.g. to fail a plane mid-run.
    void at(Time t, std::function<void()> fn);

    // Puts a packet on the wire from host src as if its endpoint had sent it:
    // routed by the router, or along an explicit route. The bytes are copied.
    void inject(HostId src, const TxPacket& pkt);
    void inject(HostId src, const TxPacket& pkt, std::span<const LinkId> route);

    void set_trace(std::function<void(const TraceEvent&)> fn);

    uint64_t events_processed() const noexcept { return events_; }
    size_t events_pending() const noexcept;
    uint64_t packets_in_flight() const noexcept;

    struct Impl;

private:
    friend class Link;
    HostId new_host(const HostConfig& cfg);              // the host without its loop
    void attach(HostId h, std::unique_ptr<HostLoop> loop);   // ... and with it: polled from now on
    uint64_t seed_;
    Time now_ = 0;
    uint64_t events_ = 0;
    std::vector<std::unique_ptr<Link>> links_;
    std::unique_ptr<Impl> impl_;
};

// --- topologies -------------------------------------------------------------
// Each builder creates links among existing hosts and installs the router.

// Two hosts joined by N parallel paths, each its own pair of links; packet
// path index mod N picks the path (control packets take path 0).
struct PairConfig {
    uint16_t paths = 4;
    LinkConfig link{};
    std::vector<LinkConfig> per_path;  // if non-empty: path i uses per_path[i] (both directions)
};
struct PairTopology {
    HostId a = 0, b = 0;
    std::vector<LinkId> forward;  // a -> b, per path
    std::vector<LinkId> reverse;  // b -> a, per path
    void set_path_up(Fabric& fab, size_t path, bool up) const;
};
PairTopology build_pair(Fabric& fab, HostId a, HostId b, const PairConfig& cfg = {});

// Incast star: every sender has an access link into one switch; one
// bottleneck link (the shared queue, where ECN marks) runs from the switch to
// the receiver; reverse links carry acks (receiver -> switch -> each sender).
struct StarConfig {
    LinkConfig access{};      // sender -> switch
    LinkConfig bottleneck{};  // switch -> receiver
    LinkConfig reverse{};     // receiver -> switch, switch -> sender
};
struct StarTopology {
    std::vector<HostId> senders;
    HostId receiver = 0;
    std::vector<LinkId> access;    // per sender: sender -> switch
    std::vector<LinkId> downlink;  // per sender: switch -> sender
    LinkId bottleneck = kNoLink;   // switch -> receiver
    LinkId uplink = kNoLink;       // receiver -> switch
};
StarTopology build_star(Fabric& fab, std::span<const HostId> senders, HostId receiver,
                        const StarConfig& cfg = {});

// P independent planes, each a leaf-spine network: hosts attach to a leaf of
// every plane (hosts_per_leaf per leaf), leaves connect to K spines. Packet
// path index mod P picks the plane; between leaves, ECMP picks the spine by
// hashing (src, dst, entropy), as a switch hashes the 5-tuple. With the
// default hosts_per_leaf = 1 every pair crosses the spines.
//
// tiers = 3 makes each plane a three-tier fat-tree: the leaves are grouped
// in pods of leaves_per_pod, the K "spines" are then each pod's aggregation
// switches (every leaf of a pod links to all K of its pod), and K groups of
// cores_per_agg core switches join the pods: aggregation switch k of every
// pod links to every core of group k. Between pods a packet climbs leaf ->
// aggregation (ECMP over K) -> core (ECMP over cores_per_agg, hashed apart
// from the first choice) and comes down core -> the destination pod's
// aggregation k -> leaf. tiers = 2 is one pod, no cores.
struct PlanesConfig {
    uint16_t planes = 4;
    uint16_t spines = 4;
    uint32_t hosts_per_leaf = 1;
    uint16_t tiers = 2;             // 2 or 3
    uint32_t leaves_per_pod = 0;    // tiers = 3: leaves per pod (> 0)
    uint16_t cores_per_agg = 0;     // tiers = 3: cores per aggregation group (> 0)
    LinkConfig host_link{};   // host <-> leaf, both directions
    LinkConfig spine_link{};  // leaf <-> spine (aggregation), aggregation <-> core, both directions
};
struct PlanesTopology {
    std::vector<HostId> hosts;
    uint16_t planes = 0, spines = 0;
    uint32_t leaves = 0, hosts_per_leaf = 1;
    uint16_t tiers = 2;
    uint32_t pods = 1, leaves_per_pod = 0;  // tiers = 2: one pod of every leaf
    uint16_t cores_per_agg = 0;             // tiers = 2: 0
    std::vector<LinkId> up;          // [host index * planes + plane]: host -> leaf
    std::vector<LinkId> down;        // [host index * planes + plane]: leaf -> host
    // leaf <-> spine; tiers = 3: spine s of a leaf is aggregation switch s of the leaf's pod
    std::vector<LinkId> leaf_spine;  // [(plane * leaves + leaf) * spines + spine]
    std::vector<LinkId> spine_leaf;  // [(plane * spines + spine) * leaves + leaf]
    // tiers = 3 only: aggregation (pod, s) <-> core c of group s
    std::vector<LinkId> agg_core;    // [((plane * pods + pod) * spines + s) * cores_per_agg + c]
    std::vector<LinkId> core_agg;    // [((plane * spines + s) * cores_per_agg + c) * pods + pod]
    uint64_t ecmp_seed = 0;          // what the router hashes with (ecmp_pick's seed)
    std::vector<LinkId> plane_links(uint16_t plane) const;
    void set_plane_up(Fabric& fab, uint16_t plane, bool up) const;
};
PlanesTopology build_planes(Fabric& fab, std::span<const HostId> hosts, const PlanesConfig& cfg = {});

// The spine ECMP picks for a flow (exposed so tests can aim at one spine);
// tiers = 3: the core within the group, with seed splitmix64(ecmp_seed ^ 0xc0e).
uint16_t ecmp_pick(uint64_t seed, uint16_t plane, HostId src, HostId dst, uint16_t entropy,
                   uint16_t choices) noexcept;

}  // namespace mroce::sim
