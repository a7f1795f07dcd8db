// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The native mroce API: a Device (one Engine plus the transport that moves its
// packets), memory registration, connections and their streams (an RC QP is a
// stream), completion queues, statistics, and configuration loading.
//
// lib/ must not depend on drivers/, so the Device takes its packet I/O through
// the small abstract Transport below (one virtual call per burst, never per
// packet). open_device() builds a Device with the driver named in the
// configuration; it is defined in drivers/open_device.cpp (library
// mroce_device), which is the only place that knows the concrete drivers.
//
// Progress:
//  - manual: the application calls progress() (and idle() when it has nothing
//    to do) from its own loop; no thread, no lock is ever taken;
//  - auto: open_device() starts an engine thread that runs the rx/tx loop; every
//    API call and every loop pass takes one device mutex (per call, per burst,
//    never per packet), so calls are serialized with the engine (v1 design).
//
// Completion notification (verbs ibv_comp_channel, ibv_req_notify_cq): a CQ
// created with a CompletionChannel and armed with req_notify_cq signals the
// channel's event file descriptor once; poll() it, get_event() the CQ that
// fired, ack_cq_events() what was got (doc/spec.md R-NOTIFY-*).
//
// Errors: everything that cannot proceed throws an mroce::Error subclass
// (std::runtime_error) whose message names the cause. The one expected
// condition of a busy data path, a full send/receive queue, is a false return
// of try_post_send / try_post_recv instead.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "mroce/drive_loop.hpp"
#include "mroce/engine.hpp"
#include "mroce/packet_io.hpp"

namespace mroce {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};
// Bad configuration: the message names the file:line, the key and the reason.
class ConfigError : public Error {
public:
    using Error::Error;
};
// The connection failed (peer silent past conn_timeout, refused, closed).
class ConnectionError : public Error {
public:
    using Error::Error;
};
class TimeoutError : public Error {
public:
    using Error::Error;
};

// --------------------------------------------------------------------------
// Configuration (config/mroce.conf documents every key).

enum class ProgressMode : uint8_t { manual, automatic };

// DeviceConfig::engine.max_payload == kMaxPayloadAuto: the device picks the
// segment size from its link (max_payload_for_mtu); config key "max_payload = auto".
inline constexpr uint16_t kMaxPayloadAuto = 0;
// What auto means on a dpdk device: its mbufs and frames are sized before the
// port is up, and net_memif reports 1500 whatever it carries.
inline constexpr uint16_t kDpdkAutoMaxPayload = 4096;

// The segment size of max_payload = auto for a link carrying IPv4 datagrams of
// up to mtu bytes (R-SEG-4): the largest power of two, at most 8192 (the
// largest the wire's 9000 admits), with IPv4 + UDP (28) + the largest mroce
// header (72) + it <= mtu. Loopback (65536) and jumbo frames (9000) get 8192,
// 1500-byte Ethernet 1024. mtu 0 (unknown): 4096. 0 if not even 64 fits.
uint16_t max_payload_for_mtu(uint32_t mtu) noexcept;

inline EngineConfig socket_engine_defaults() {
    EngineConfig e;
    e.min_rto = 1'000'000;
    e.initial_rto = 2'000'000;
    e.max_payload = kMaxPayloadAuto;
    // R-SCHED-5 on by default for devices: on a multi-plane or ECMP fabric a
    // path left on a marking plane after a failover would otherwise sit at
    // cwnd 1 (the engine's own default stays 0, as its tests expect).
    e.reroute_after_marks = 4;
    return e;
}

// The arrangement of a device's drive loop (key pipeline, architecture 3.1
// and 4): everything on the thread that drives the engine (none, run to
// completion), or the payload copies (placement) and also the
// congestion-control core (placement_cc) on cores of their own, the engine
// built with deferred_placement and offload_cc accordingly. driver = dpdk only.
enum class PipelineMode : uint8_t { none, placement, placement_cc };
const char* to_string(PipelineMode m) noexcept;   // none, placement, placement+cc (the key's values)

// Keys of a driver = dpdk device (config/mroce.conf documents them). The
// native layer only carries them; drivers/open_device_dpdk.cpp applies them.
struct DpdkDeviceConfig {
    std::string eal_args;               // passed to rte_eal_init, split at blanks
    uint32_t eal_memory_mb = 256;       // -m when running without hugepages
    std::string port;                   // ethdev name (net_memif0) or port id; empty: the only port
    std::string neighbours;             // static neighbour table: "IP MAC, IP MAC, ..."
    std::string mac;                    // local MAC; empty: the port's own
    std::string lcores = "auto";        // auto (hwloc) or an EAL core list ("2", "2,3")
    uint16_t rx_queues = 1, tx_queues = 1;
    uint16_t rx_desc = 1024, tx_desc = 1024;
    uint32_t rx_mbufs = 0, hdr_mbufs = 0, ext_mbufs = 0;  // 0: derived from the queue geometry
    uint32_t mbuf_cache = 256;          // per-lcore cache of each pool
    uint32_t rx_data_room = 0;          // 0: one whole max_payload frame per RX mbuf
    uint32_t tx_max_l3 = 0;             // 0: the port's MTU
    PipelineMode pipeline = PipelineMode::none;
    // EAL lcores of the placement and CC stages; -1: the EAL's worker lcores
    // in order (the placement stage the first, the CC stage the next).
    int32_t placement_lcore = -1, cc_lcore = -1;
};

struct DeviceConfig {
    std::string name = "default";
    std::string driver = "udp";         // udp | dpdk
    std::string address = "127.0.0.1";  // local IPv4 address to bind (one plane)
    // R-PLANE-1: one local IPv4 address per plane (key planes, at most
    // wire::kMaxPlanes); empty: one plane at address. With planes, address is
    // planes[0] (parse_config sets it; the key address may not be given too).
    std::vector<std::string> planes;
    uint16_t port = 4793;               // well-known (listen) UDP port
    uint16_t path_port_base = 0;        // first path source port; 0: port + 1
    uint16_t path_port_span = 16;       // distinct path source ports
    ProgressMode progress = ProgressMode::manual;
    uint32_t spin_us = 50;              // busy-poll this long after activity before blocking
    // Automatic progress with callers driving (Device::drive, the verbs
    // provider's poll_cq): the engine thread stands by this long after the
    // last driving call before it takes the loop back.
    uint32_t drive_handoff_us = 20;
    bool spin_yield = false;            // udp: idle passes while spinning yield the CPU (after 20 us)
    uint32_t rx_batch = 64;
    bool gso = true;
    bool gro = true;
    DpdkDeviceConfig dpdk;              // driver = dpdk only
    // The vendor_part_id the verbs provider reports (doc/verbs.md): 0 is
    // mroce's own; tools that enable features by part id (perftest 4.5 takes
    // its ibv_wr_* post path for ConnectX-4 and later, e.g. 4119) may be given one.
    uint32_t verbs_part_id = 0;
    // num_paths, max_payload, rx_capacity_mbps, timers, ... Over sockets the
    // RTO floor is 1 ms, not the engine's 100 us: a descheduled peer process
    // (two processes on two cores) otherwise fires spurious timeouts that each
    // resend a path's window and collapse it (doc/performance.md section 3).
    // max_payload defaults to kMaxPayloadAuto: udp devices size segments from
    // their interface's MTU, dpdk devices use 4096 (Device::config() holds the
    // value chosen).
    EngineConfig engine = socket_engine_defaults();

    // TEST ONLY fault injection, applied to received packets before rx_burst:
    // seeded random drop with probability inject_loss, CE marking with inject_ce
    // (config keys inject_loss, inject_ce, inject_seed).
    double inject_loss = 0;
    double inject_ce = 0;
    uint64_t inject_seed = 1;
};

struct Config {
    std::vector<DeviceConfig> devices;  // never empty after loading
    std::string origin;                 // file it came from, or "built-in defaults"
    // The device of that name; an empty name means the first one. Throws ConfigError.
    const DeviceConfig& device(const std::string& name = {}) const;
};

// Parses the text of a configuration file; origin names it in error messages.
Config parse_config(std::string_view text, const std::string& origin = "<config>");
// Reads and parses a file. Throws ConfigError if it cannot be read or is invalid.
Config load_config_file(const std::string& path);
// A per-plane list value of the configuration, plane 0 first ("a, b" with
// sep ',', "t0 | t1" with sep '|'): entries trimmed; a trailing separator
// gives an empty last entry (which the loader refuses).
std::vector<std::string> split_config_list(const std::string& v, char sep);
// path if non-empty, else $MROCE_CONFIG if set, else the built-in defaults
// (one udp device, every key at its documented default).
Config load_config(const std::string& path = {});

// --------------------------------------------------------------------------
// Transport: what a Device needs of a driver. Calls are per burst.

// tx_syscalls: the sends that took packets (UDP: sendmmsg calls; DPDK: PMD transmit bursts).
struct TransportStats {
    uint64_t tx_packets = 0, tx_bytes = 0, tx_errors = 0, tx_syscalls = 0;
    uint64_t rx_packets = 0, rx_bytes = 0, rx_truncated = 0, rx_errors = 0, rx_syscalls = 0;
};

// One plane of a device (R-PLANE-1, R-PLANE-5): its local address and the
// driver's traffic counters on it (UDP payload bytes, every packet type).
struct PlaneInfo {
    std::string address;   // local IPv4 address
    uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
};

// A remote device's address on one plane (R-PLANE-6): its IPv4 address
// there and the UDP port it listens on.
struct PeerAddress {
    std::string ip;
    uint16_t port = 0;
};

// The stages of the pipeline arrangement (DpdkDeviceConfig::pipeline,
// architecture 4.2) as the Device's drive loop sees them; the driver runs
// them on cores of their own (Transport::start_stages). Calls are per burst,
// from the thread that drives the loop; the counters may be read from any.
class PipelineStages {
public:
    // Quiesces the stages: every copy handed over is done and its received
    // buffer freed, the stage cores stopped. Before the engine and the port go.
    virtual ~PipelineStages() = default;
    // Placement: the copies of datagrams of the transport's last recv_burst
    // (PlaceJob::cookie: the datagram's index in that burst); the driver
    // keeps their received buffers until the stage has copied them.
    virtual void submit(const PlaceJob* jobs, size_t n, Time now) = 0;
    // Tokens of finished copies, for Engine::placed.
    virtual size_t take_done(uint32_t* tokens, size_t max, Time now) = 0;
    // CC stage (PipelineMode::placement_cc): the stage's views into the
    // engine, then its feedback out (R-CC-8). Returns the records moved.
    virtual size_t exchange(Engine& eng, Time now) = 0;
    // Records on their way to or from the CC stage (the loop does not nap then).
    virtual bool cc_pending() const noexcept = 0;
    // The stages' own counts: copies the placement stage made, window
    // records the CC stage applied.
    virtual uint64_t copies() const noexcept = 0;
    virtual uint64_t cc_records() const noexcept = 0;
    // Where they run, in words (printed at open).
    virtual std::string describe() const = 0;
};

class Transport {
public:
    virtual ~Transport() = default;
    virtual Time now() noexcept = 0;
    virtual size_t recv_burst(RxPacket* out, size_t max) = 0;
    // Returns the number sent; indices of refused packets go to unsent (ascending).
    virtual size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) = 0;
    // Adaptive spin-then-block: active says the caller just did work; deadline is
    // when the engine must run again (UINT64_MAX: never). True if it blocked.
    // After work now may be the clock the pass began with, and is not used
    // (DrivePort, SpinWindow); otherwise it is current.
    virtual bool idle(bool active, Time now, Time deadline) = 0;
    // Interrupts a blocked idle() from any thread.
    virtual void wake() = 0;
    // Peer handle for a remote device's well-known address. Throws Error.
    virtual uint32_t resolve_peer(const std::string& ip, uint16_t port) = 0;
    // R-PLANE-6: one handle for a peer given by its address on each plane
    // (plane 0 first); known says how many of them the driver will send to
    // (plane p's packets to planes[p]). A one-plane driver knows planes[0] only.
    virtual uint32_t resolve_peer(const std::vector<PeerAddress>& planes, uint8_t& known) {
        known = 1;
        return resolve_peer(planes.at(0).ip, planes.at(0).port);
    }
    virtual std::string peer_name(uint32_t peer) const = 0;
    // The last network error the driver saw about packets to the peer (ICMP
    // port or host unreachable, a send refused for want of a route), in
    // words, and how many it has seen: connection errors name their cause.
    struct PeerNetError {
        std::string what;   // empty: none
        uint64_t count = 0;
    };
    virtual PeerNetError peer_error(uint32_t) const { return {}; }
    virtual TransportStats stats() const = 0;
    virtual std::string describe() const = 0;
    // Largest IPv4 datagram the link sends unfragmented (the interface's MTU);
    // 0 if unknown. Device resolves max_payload = auto from it and refuses an
    // explicit max_payload that does not fit (R-SEG-4).
    virtual uint32_t link_mtu() const noexcept { return 0; }
    // Payload segments of packets already sent that the driver's NIC may still
    // read from registered memory (zero-copy TX), after waiting up to wait_ns
    // for them to be released: 0 for a driver that copies in send_burst.
    // Device::deregister_mr asks before the region goes (R-MEM-6).
    virtual uint32_t tx_payload_held(Time /*wait_ns*/) { return 0; }
    // Planes of the device (R-PLANE-1): 1 for a one-plane driver, whose
    // plane_info(0) carries the device's totals.
    virtual size_t num_planes() const noexcept { return 1; }
    virtual PlaneInfo plane_info(size_t plane) const {
        PlaneInfo i;
        if (plane != 0) return i;
        const TransportStats s = stats();
        i.tx_packets = s.tx_packets;
        i.tx_bytes = s.tx_bytes;
        i.rx_packets = s.rx_packets;
        i.rx_bytes = s.rx_bytes;
        return i;
    }
    // The pipeline arrangement: starts the stages mode names on cores of
    // their own, for an engine with configuration `engine`; from then on
    // recv_burst keeps what the stages need to find a datagram's buffer.
    // The stages must be destroyed before the transport. A driver without
    // stage cores throws ConfigError naming the key.
    virtual std::unique_ptr<PipelineStages> start_stages(PipelineMode mode, const EngineConfig& engine);
};

// --------------------------------------------------------------------------
// Objects.

struct MemoryRegion {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
    uint32_t pd = 0;
    uint32_t access = 0;
    uint8_t* addr = nullptr;
    uint64_t length = 0;
    uint64_t iova(size_t off = 0) const noexcept { return uint64_t(reinterpret_cast<uintptr_t>(addr)) + off; }
};

// A stream (RC QP) to create: its id, objects and own attributes (engine
// StreamAttr, doc/spec.md R-STREAM-9/9, R-SRQ-1); zero means the device's default.
struct StreamSpec {
    uint32_t id = 0;
    uint32_t pd = 0;
    uint32_t send_cq = 0;
    uint32_t recv_cq = 0;
    uint32_t send_depth = 0;          // verbs max_send_wr
    uint32_t recv_depth = 0;          // verbs max_recv_wr (0 with an srq)
    uint32_t max_rd_atomic = 0;       // verbs max_rd_atomic: READ/atomic outstanding; later ones wait
    uint32_t max_dest_rd_atomic = 0;  // verbs max_dest_rd_atomic: more incoming are refused
    uint32_t srq = 0;                 // Device::create_srq; 0: the stream's own receive queue
    StreamAttr attr() const {
        StreamAttr a;
        a.pd = pd;
        a.send_cq = send_cq;
        a.recv_cq = recv_cq;
        a.send_depth = send_depth;
        a.recv_depth = recv_depth;
        a.max_rd_atomic = max_rd_atomic;
        a.max_dest_rd_atomic = max_dest_rd_atomic;
        a.srq = srq;
        return a;
    }
};

// Counters of the native layer itself (the engine's and the transport's are separate).
struct DeviceStats {
    uint64_t passes = 0;            // progress passes
    uint64_t blocks = 0;            // idle() calls that blocked
    uint64_t tx_retry_dropped = 0;  // packets refused twice by the transport (left to loss recovery)
    uint64_t injected_drops = 0;    // TEST ONLY fault injector
    uint64_t injected_ce = 0;
    // The pipeline arrangement's stages (0 in run to completion): payload
    // copies the placement stage made, window records the CC stage applied.
    uint64_t stage_copies = 0;
    uint64_t stage_cc_records = 0;
};

class Device;

// A completion channel (verbs ibv_comp_channel), owned by its Device and
// serving any number of its CQs. fd() is an eventfd, readable exactly while
// an event waits, for poll()/epoll in any thread. Events come from CQs armed
// with Device::req_notify_cq, one per arming (R-NOTIFY-3).
class CompletionChannel {
public:
    ~CompletionChannel();
    CompletionChannel(const CompletionChannel&) = delete;
    CompletionChannel& operator=(const CompletionChannel&) = delete;
    int fd() const noexcept { return fd_; }
    // verbs ibv_get_cq_event: takes the oldest event, the CQ that fired, into
    // cq; waits up to timeout_ns for one (0: does not wait). False: none. With
    // manual progress the device's progress runs while it waits (there is no
    // other thread to make the completion happen).
    bool get_event(uint32_t& cq, Time timeout_ns = UINT64_MAX);

private:
    friend class Device;
    explicit CompletionChannel(Device& dev);
    bool take(uint32_t& cq);            // one event if one waits
    void post(uint32_t cq, uint32_t n);  // the drive loop's delivery: n events of cq
    Device& dev_;
    int fd_ = -1;
    std::mutex mu_;
    std::deque<uint32_t> q_;
};

// A connection handle (cheap to copy). RC QP semantics live in its streams.
class Connection {
public:
    Connection() = default;
    uint32_t id() const noexcept { return id_; }
    bool valid() const noexcept { return dev_ != nullptr; }

    // Streams must exist with the same id on both sides before traffic for them
    // arrives (Device::set_accept_streams does that for incoming connections).
    void create_stream(uint32_t stream_id, uint32_t pd, uint32_t send_cq, uint32_t recv_cq);
    void create_stream(const StreamSpec& s);
    // verbs modify_qp to ERR (R-STREAM-12): everything outstanding on the
    // stream completes with wr_flush_err; later posts complete so at once.
    void set_stream_error(uint32_t stream_id);
    // verbs destroy_qp (R-STREAM-11): no completions; the id may be created
    // again at once (the peer must destroy and create it too, R-STREAM-11).
    void destroy_stream(uint32_t stream_id);
    // verbs modify_qp(IBV_QP_MAX_QP_RD_ATOMIC) on an existing stream (0: no limit).
    void set_max_rd_atomic(uint32_t stream_id, uint32_t max_rd_atomic);
    // false: the stream's queue is full (poll completions, retry). Other failures throw.
    bool try_post_send(uint32_t stream_id, const SendWr& wr);
    bool try_post_recv(uint32_t stream_id, const RecvWr& wr);
    // A list in one call, in order (verbs' chained WRs, perftest's --post_list):
    // how many were posted; fewer than n: the queue filled (poll completions,
    // post the rest). Other failures throw, the WRs before the failed one posted.
    size_t try_post_sends(uint32_t stream_id, const SendWr* wrs, size_t n);
    // Same, but a full queue throws Error too.
    void post_send(uint32_t stream_id, const SendWr& wr);
    void post_recv(uint32_t stream_id, const RecvWr& wr);

    // Convenience builders of SendWr for the common verbs.
    static SendWr write_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint32_t len, uint64_t raddr,
                           uint32_t rkey, bool signaled = true);
    static SendWr read_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint32_t len, uint64_t raddr,
                          uint32_t rkey, bool signaled = true);
    static SendWr send_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint32_t len,
                          bool signaled = true);
    static SendWr cas_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint64_t raddr, uint32_t rkey,
                         uint64_t compare, uint64_t swap);
    static SendWr fadd_wr(uint64_t wr_id, const MemoryRegion& mr, uint64_t laddr, uint64_t raddr, uint32_t rkey,
                          uint64_t add);

    ConnState state() const;
    // Throws ConnectionError if the connection is in error or closed.
    void check() const;
    ConnStats stats() const;
    uint16_t num_paths() const;
    PathStats path_stats(uint16_t path) const;
    std::string peer_name() const;
    void disconnect();
    // Frees a CLOSED or ERROR connection in the engine (R-CONN-13) once its
    // flushed completions are polled: a long-running server releases every
    // connection it is done with. Its handles are no longer usable. Throws
    // Error naming the state if the connection is still open.
    void release();

private:
    friend class Device;
    Connection(Device* d, uint32_t id, uint32_t peer) : dev_(d), id_(id), peer_(peer) {}
    bool send_refused(uint32_t stream_id, Status s);  // try_post_send's answer to a post that failed
    Device* dev_ = nullptr;
    uint32_t id_ = 0;
    uint32_t peer_ = 0;
};

class Device {
public:
    Device(const DeviceConfig& cfg, std::unique_ptr<Transport> t);
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    const DeviceConfig& config() const noexcept { return cfg_; }
    Transport& transport() noexcept { return *tr_; }

    uint32_t alloc_pd();
    MemoryRegion register_mr(uint32_t pd, void* addr, uint64_t length, uint32_t access);
    void deregister_mr(const MemoryRegion& mr);
    uint32_t create_cq(uint32_t depth);
    // A CQ whose notifications go to channel (nullptr: none, like create_cq(depth)).
    uint32_t create_cq(uint32_t depth, CompletionChannel* channel);
    size_t poll_cq(uint32_t cq, Completion* out, size_t max);
    // verbs ibv_create_comp_channel; the channel lives as long as the device.
    CompletionChannel& create_comp_channel();
    // verbs ibv_req_notify_cq (R-NOTIFY-1): the next completion of cq (or,
    // solicited_only, the next solicited receive or error completion) puts
    // one event on its channel. One-shot: arm again after each event. Throws
    // Error if cq has no channel.
    void req_notify_cq(uint32_t cq, bool solicited_only = false);
    // verbs ibv_ack_cq_events: n events of cq taken by get_event are
    // acknowledged. Throws Error if more than were taken and not yet acknowledged.
    void ack_cq_events(uint32_t cq, uint32_t n);
    // Events of cq taken by get_event and not acknowledged yet.
    uint64_t unacked_cq_events(uint32_t cq) const;

    // Shared receive queues (verbs SRQ, doc/spec.md R-SRQ-*): any stream of
    // any connection created with StreamSpec::srq takes its receives from it.
    uint32_t create_srq(uint32_t pd, uint32_t depth);
    // false: every entry is posted or taken by a message not yet complete.
    bool try_post_srq_recv(uint32_t srq, const RecvWr& wr);
    void post_srq_recv(uint32_t srq, const RecvWr& wr);
    // verbs IBV_SRQ_LIMIT: one event (poll_srq_events) when the entries posted
    // and not yet taken drop below limit; then disarmed. 0 disarms.
    void arm_srq_limit(uint32_t srq, uint32_t limit);
    uint32_t srq_posted(uint32_t srq) const;
    // SRQs whose limit event fired since the last call, in order.
    size_t poll_srq_events(uint32_t* srqs, size_t max);
    // Throws Error while a stream uses it.
    void destroy_srq(uint32_t srq);

    // The data path without exceptions or strings, for adapters whose callers
    // take error codes (the verbs provider): posts wrs[0, n) in order under
    // one lock and stops at the first one refused; returns its Status (ok:
    // all were posted) and how many were posted. A completion raised at post
    // notifies its channel; the engine thread is woken for what was posted.
    Status submit_sends(uint32_t conn, uint32_t stream, const SendWr* wrs, size_t n, size_t& posted) noexcept;
    Status submit_recvs(uint32_t conn, uint32_t stream, const RecvWr* wrs, size_t n, size_t& posted) noexcept;
    Status submit_srq_recvs(uint32_t srq, const RecvWr* wrs, size_t n, size_t& posted) noexcept;

    // Called in the progress path, under the device lock, for each error,
    // closed and srq_limit event as it is taken from the engine (the verbs
    // provider turns them into async events). It must not call the Device.
    void set_event_listener(std::function<void(const ConnEvent&)> f);

    // Streams created on every incoming connection the moment it appears, in
    // the progress path, so the first data for them is never refused.
    void set_accept_streams(std::vector<StreamSpec> streams);

    // Active open; waits (progressing in manual mode) until established.
    // Throws ConnectionError if refused or not established within timeout_ns.
    // Two devices that connect to each other at the same moment get one
    // connection (R-CONN-14): both calls return a handle to it. If the peer's
    // connect reached this device first, this call returns the connection it
    // accepted (set_accept_streams applied to it as to any accepted one), and
    // accept() does not return it.
    Connection connect(const std::string& ip, uint16_t port, Time timeout_ns = 5'000'000'000);
    // The same toward a peer given by its address on each of its planes,
    // plane 0 first (R-PLANE-6): the CONNECT_REQ and its repeats rotate over
    // min(this device's planes, planes.size()) planes, each to the peer's
    // address on that plane, and the CONNECT_ACK is taken from any of them,
    // so the connection is set up while any of those planes is up. The
    // ConnectionError after the last attempt names every address tried and
    // the number of attempts.
    Connection connect(const std::vector<PeerAddress>& planes, Time timeout_ns = 5'000'000'000);
    // Waits for the next incoming connection. Throws TimeoutError.
    Connection accept(Time timeout_ns = UINT64_MAX);

    // Manual progress: one receive + transmit pass; returns the packets moved.
    // In automatic mode it does nothing and returns 0 (the engine thread owns the loop).
    size_t progress();
    // Where a pass transmits (drive loop TxOrder, architecture 3.1): after_rx
    // (the default) acknowledges what arrived in the pass that received it;
    // before_rx acknowledges it at the start of the next pass, right behind
    // what the application posted in between: for applications that
    // answer what they receive at once and keep calling progress (ping-pong,
    // request/response; mroce-perf --lat), whose answer then leaves without
    // an ACK send ahead of it (issue 24). An application that stops calling
    // progress holds its ACKs until it calls again.
    void set_tx_order(TxOrder o);
    // Automatic progress driven by callers (the verbs provider: a thread
    // polling a CQ runs the transport itself rather than contend with the
    // engine thread for the device lock): one loop pass in the caller's
    // thread, after which the engine thread stands by for drive_handoff_us;
    // it takes the loop back when callers stop (or at once after
    // stop_driving(), before a caller blocks). The longer callers have been
    // driving without a break of a millisecond, the longer it naps between
    // looks (a quarter of that time, at most 1 ms), so a busy poller is not
    // interrupted by its wake-ups. Manual mode: progress(). drive_locked: the caller holds lock().
    size_t drive();
    size_t drive_locked();
    void stop_driving();
    // The driving caller returns to its application with what it waited for
    // (the verbs provider: ibv_poll_cq returning completions); g holds lock().
    // An application whose absence after such a return outlasted
    // drive_handoff_us waits outside the provider (ib_write_lat spins on its
    // buffer for the peer's WRITE, which only a pass can place): from then on
    // the caller lingers, driving passes for at most spin_us until one moves
    // a packet, so that the answer it waits for lands in its own thread
    // rather than through the engine thread. A linger that runs out, or an
    // application that waits outside the first time, returns true: the
    // caller calls stop_driving() once it has released g, and the engine
    // thread takes the loop at once instead of after its standby nap (up to
    // 1 ms). An application that comes straight back (posts, polls again:
    // ib_write_bw, ping-pongs that poll) neither lingers nor gives the loop up.
    bool leave(std::unique_lock<std::mutex>& g);

    // Manual progress: spin-then-block until traffic, the engine's next deadline,
    // or max 100 ms. Call it when a pass did nothing, so two processes sharing
    // cores do not starve each other. In automatic mode: a short sleep.
    // True if it blocked (a check paced in passes is due after one: a pass
    // that blocked may have taken up to the 100 ms).
    bool idle(bool active);

    Time now() noexcept { return tr_->now(); }
    EngineStats engine_stats() const;
    TransportStats transport_stats() const;
    DeviceStats device_stats() const;
    // Planes (R-PLANE-1, R-PLANE-5): how many, and one's address and per-plane
    // counters. query_plane returns false for a plane the device does not have.
    size_t num_planes() const;
    bool query_plane(size_t plane, PlaneInfo& out) const;

    // Direct engine access for what the API does not wrap; the caller must hold
    // no assumption about thread safety in automatic mode (take lock() first).
    Engine& engine() noexcept { return eng_; }
    std::unique_lock<std::mutex> lock() const { return std::unique_lock<std::mutex>(mu_); }

private:
    friend class Connection;
    friend class CompletionChannel;
    size_t step_locked(Time now);
    // Runs after every post and pass; most raise no notification, and then it
    // costs the one test, not a call with its frame.
    void deliver_cq_events_locked() {
        if (eng_.cq_events_pending()) [[unlikely]] deliver_cq_events_now_locked();
    }
    void deliver_cq_events_now_locked();
    // Before every transmit (twice a pass with TxOrder::before_rx): most
    // passes have no event, and the array the body keeps costs a pass about
    // 90 instructions to initialise (doc/performance.md 7.3, round 27).
    void handle_events_locked() {
        if (eng_.events_pending()) [[unlikely]] handle_events_now_locked();
    }
    void handle_events_now_locked();
    void engine_thread();
    void kick() noexcept;
    template <class Wr, class Post>
    [[gnu::always_inline]] inline Status submit(const Wr* wrs, size_t n, size_t& posted, bool wake, Post post) noexcept;
    template <class Wr, class Post>
    [[gnu::noinline]] Status submit_locked(const Wr* wrs, size_t n, size_t& posted, bool wake, Post post) noexcept;
    [[noreturn]] void fail(const char* what, Status s) const;
    std::string failure_cause(uint32_t conn, uint32_t peer, uint64_t net_errors_before) const;

    DeviceConfig cfg_;
    std::unique_ptr<Transport> tr_;
    Engine eng_;
    mutable std::mutex mu_;
    std::vector<StreamSpec> accept_streams_;
    std::function<void(const ConnEvent&)> event_listener_;
    std::deque<ConnEvent> incoming_;
    std::vector<ConnEvent> failures_;
    std::deque<uint32_t> srq_events_;
    DeviceStats dst_{};
    Time pass_now_ = 0;  // the last pass's clock: idle() after work takes it (round 42)
    // Completion notification: channels, each CQ's channel (by CQ id - 1),
    // and per CQ the events get_event took and those acknowledged (under ev_mu_).
    std::vector<std::unique_ptr<CompletionChannel>> channels_;
    std::vector<CompletionChannel*> cq_channel_;
    mutable std::mutex ev_mu_;
    std::vector<uint64_t> events_got_, events_acked_;

    static constexpr size_t kRxBurst = 64, kTxBurst = 128;
    // Progress: the drive loop over the transport (one virtual call per burst),
    // of the policy the key pipeline selects: DriveLoop<Transport&, Engine>
    // (run to completion) or the Pipeline policy over the transport's stages,
    // behind one virtual call per pass (device.cpp).
    struct LoopHooks;
    struct Loop;
    template <class Port, class Policy>
    struct LoopOf;
    std::unique_ptr<Loop> make_loop();
    std::unique_ptr<PipelineStages> stages_;   // before loop_: the loop goes first, then the stages quiesce
    std::unique_ptr<Loop> loop_;
    size_t inject_faults(RxPacket* rx, size_t n) noexcept;
    uint64_t rng_ = 0;
    uint64_t loss_thr_ = 0, ce_thr_ = 0;

    std::atomic<bool> stop_{false};
    std::atomic<Time> driven_until_{0};  // the engine thread stands by until then (drive())
    std::atomic<Time> driving_since_{0};  // start of the callers' current driving run
    // leave_locked(): when the driving caller last returned to its
    // application (0: it came back since), and whether its last absence
    // outlasted the hand-off (both under mu_).
    Time left_at_ = 0;
    bool stays_away_ = false;
    bool lingers_ = false;  // the caller lingers at leave() (under mu_)
    void returned_locked(Time now) noexcept;
    std::mutex nap_mu_;                   // the engine thread's standby naps, cut short by stop_driving()
    std::condition_variable nap_cv_;
    std::atomic<bool> sleeping_{false};
    std::thread thr_;
};

// Builds a Device for cfg.driver (defined in drivers/open_device.cpp, library
// mroce_device). Starts the engine thread when cfg.progress is automatic.
// Throws Error naming the driver, address and port on failure.
std::unique_ptr<Device> open_device(const DeviceConfig& cfg);

}  // namespace mroce
