// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The mroce protocol engine: one local endpoint (device) with its memory
// regions, connections, streams and completion queues. It has no clock and
// no I/O (doc/architecture.md): a driver calls rx_burst() with received
// datagrams, tx_burst() to take packets to send, and passes the time to both.
// Not thread-safe: one thread drives one Engine (the driver's lcore/poll loop).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mroce/cc.hpp"
#include "mroce/packet_io.hpp"
#include "mroce/wire.hpp"

namespace mroce {

enum Access : uint32_t {
    kAccessLocalWrite = 1u << 0,
    kAccessRemoteWrite = 1u << 1,
    kAccessRemoteRead = 1u << 2,
    kAccessRemoteAtomic = 1u << 3,
};

enum class Status : int {
    ok = 0,
    invalid_argument,   // a field of the request is out of its range
    no_such_object,     // unknown connection, stream, CQ, PD or key
    queue_full,         // send/receive queue or CQ at its depth
    bad_state,          // connection not established, or stream in error
    exists,             // stream id already created
    no_memory,
    message_too_long,   // a work request longer than kMaxMessageSize (R-SEG-5)
};
const char* to_string(Status s) noexcept;

enum class WcStatus : uint8_t {
    success = 0,
    loc_len_err,        // receive buffer too small for the SEND
    loc_prot_err,       // lkey invalid or range outside the local region
    rem_access_err,     // NAK: rkey invalid, PD mismatch, access denied, out of range
    rem_inv_req_err,    // NAK: invalid request / invalid stream
    rem_op_err,
    wr_flush_err,       // flushed because the stream entered the error state
    transport_err,      // connection lost (peer silent past conn_timeout)
    rnr_retry_exc_err,  // receiver not ready after rnr_retry retries (R-NAK-10)
};
const char* to_string(WcStatus s) noexcept;

enum class WcOpcode : uint8_t { send, write, read, atomic_cas, atomic_fadd, recv, recv_write_imm };

struct Completion {
    uint64_t wr_id = 0;
    uint32_t conn = 0;
    uint32_t stream = 0;
    uint32_t byte_len = 0;
    uint32_t imm = 0;
    WcStatus status = WcStatus::success;
    WcOpcode opcode = WcOpcode::send;
    bool has_imm = false;
};

enum class OpKind : uint8_t { send, send_imm, write, write_imm, read, atomic_cas, atomic_fadd };

// One entry of a scatter/gather list (verbs ibv_sge): length bytes at addr,
// inside the region of lkey (R-SGE-1).
struct Sge {
    uint64_t addr = 0;
    uint32_t length = 0;
    uint32_t lkey = 0;
};
// The most entries a list may have (EngineConfig::max_send_sge, max_recv_sge).
inline constexpr uint32_t kMaxSge = 32;
// The most bytes EngineConfig::max_inline may give an inline send.
inline constexpr uint32_t kMaxInline = 4096;

// R-SEG-5: the longest message a send WR may carry (verbs' max_msg_sz).
inline constexpr uint32_t kMaxMessageSize = 1u << 31;

struct SendWr {
    uint64_t wr_id = 0;
    OpKind op = OpKind::write;
    uint64_t local_addr = 0;    // virtual address inside the lkey's region
    uint32_t length = 0;        // atomics: must be 8 (the 8-byte result lands at local_addr)
    uint32_t lkey = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;
    uint64_t compare_add = 0;   // CAS: compare value; FADD: addend
    uint64_t swap = 0;          // CAS: swap value
    bool signaled = true;       // false: success completes silently (errors always complete)
    bool solicited = false;
    // verbs IBV_SEND_INLINE (R-INLINE-1): a SEND, SEND_IMM, WRITE or
    // WRITE_IMM of at most config().max_inline bytes whose bytes post_send
    // copies (no lkey is checked): the buffer may be reused as soon as
    // post_send returns.
    bool inline_data = false;
    // Scatter/gather list (R-SGE-1), read during post_send only: num_sge > 0
    // gathers the message from sg_list[0, num_sge) in order (READ: scatters
    // the response into it), at most config().max_send_sge entries, and
    // local_addr, length and lkey are ignored (length becomes the entries'
    // sum). 0: the one buffer local_addr, length, lkey. Atomics: one 8-byte buffer.
    const Sge* sg_list = nullptr;
    uint32_t num_sge = 0;
};

struct RecvWr {
    uint64_t wr_id = 0;
    uint64_t addr = 0;
    uint32_t length = 0;
    uint32_t lkey = 0;
    // As SendWr: num_sge > 0 (at most config().max_recv_sge) receives a SEND
    // into sg_list[0, num_sge), entry after entry, instead of addr, length, lkey.
    const Sge* sg_list = nullptr;
    uint32_t num_sge = 0;
};

struct MrInfo {
    uint32_t lkey = 0;
    uint32_t rkey = 0;
    uint32_t pd = 0;
    uint32_t access = 0;
    uint8_t* addr = nullptr;
    uint64_t length = 0;
};

enum class ConnState : uint8_t { idle, connecting, established, closing, closed, error };
const char* to_string(ConnState s) noexcept;

// A CQ's armed notification that fired (R-NOTIFY-2): events completions
// raised since the drive loop last took them (one per arming).
struct CqEvent {
    uint32_t cq = 0;
    uint32_t events = 0;
};

// srq_limit: a shared receive queue armed with a limit fell below it
// (R-SRQ-5; verbs IBV_EVENT_SRQ_LIMIT_REACHED): conn and peer are 0, srq names it.
enum class EventKind : uint8_t { incoming, established, closed, error, srq_limit };
struct ConnEvent {
    EventKind kind = EventKind::established;
    uint32_t conn = 0;
    uint32_t peer = 0;
    uint32_t srq = 0;
};

// A stream's own attributes (verbs ibv_qp_init_attr / ibv_qp_attr); 0 is the
// engine's default for every field but the three objects (R-STREAM-9).
struct StreamAttr {
    uint32_t pd = 0;
    uint32_t send_cq = 0;
    uint32_t recv_cq = 0;
    uint32_t send_depth = 0;          // outstanding send WRs (max_send_wr), 1..65536; 0: EngineConfig::stream_depth
    uint32_t recv_depth = 0;          // posted receives (max_recv_wr), 1..2^20; 0: EngineConfig::recv_depth
    uint32_t max_rd_atomic = 0;       // READ/atomic outstanding as requester (R-STREAM-10); 0: no limit
    uint32_t max_dest_rd_atomic = 0;  // READ/atomic held as responder (R-STREAM-10); 0: no limit
    uint32_t srq = 0;                 // receives come from this shared receive queue (R-SRQ-1); 0: its own
};
// Stream ids are 24 bits, all ones excluded (as verbs QPNs; R-STREAM-11).
inline constexpr uint32_t kMaxStreamId = 0xfffffe;

enum class PathStateKind : uint8_t { active, failed };

struct PathStats {
    PathStateKind state = PathStateKind::active;
    uint16_t entropy = 0;
    uint8_t plane = 0;           // R-PLANE-2: path i % the connection's planes
    double cwnd = 0;
    uint32_t inflight = 0;
    Time srtt = 0;
    Time rttvar = 0;
    Time rto = 0;
    Time min_rtt = 0;           // least RTT sample the window cap sees (R-HINT-7); 0: none yet
    uint64_t tx_packets = 0;
    uint64_t tx_bytes = 0;
    uint64_t retransmits = 0;   // packets of this path declared lost and resent (on any path)
    uint64_t losses = 0;        // SACK gaps detected on this path (R-SACK-4)
    uint64_t timeouts = 0;
    uint64_t spurious_timeouts = 0;  // timeouts a late ACK proved spurious, window restored (R-TIMER-7)
    uint64_t tail_probes = 0;   // tail-loss probes sent on this path (R-TIMER-8)
    uint64_t silences = 0;      // times the path fell silent while its siblings were acked (R-TIMER-9)
    uint32_t reorder_mult = 1;  // R-TIMER-9's reordering multiplier now: 1, 2, 4 or 8
    uint64_t redundant = 0;     // redundant copies of unacknowledged CSNs sent on this path (R-TIMER-10)
    uint64_t ce_marks = 0;      // CE echoed for this path
    uint64_t rerouted = 0;      // times its entropy was changed (R-SCHED-5)
    uint64_t rx_packets = 0;    // data packets received on the peer's path with this index
    uint64_t rx_ce = 0;
};

// Why a connection entered ERROR (ConnStats::error_cause).
enum class ConnErrorCause : uint8_t {
    none,
    connect_unanswered,  // no CONNECT_ACK within conn_timeout (R-CONN-5)
    peer_silent,         // ESTABLISHED, nothing received for conn_timeout with work outstanding (R-CONN-6)
};
const char* to_string(ConnErrorCause c) noexcept;

struct ConnStats {
    ConnState state = ConnState::idle;
    ConnErrorCause error_cause = ConnErrorCause::none;
    uint32_t connect_attempts = 0;  // CONNECT_REQs sent (first and repeats)
    uint8_t connect_planes = 1;     // planes the CONNECT_REQs rotated over (R-PLANE-6)
    Time silent_for = 0;            // at the error: time since the peer was last heard (0: never heard)
    uint32_t peer = 0;
    uint32_t remote_conn = 0;
    uint16_t num_paths = 0;
    uint8_t planes = 1;           // planes the connection's paths are spread over (R-PLANE-2)
    uint32_t rate_hint_kbps = 0;  // last hint received from the peer (0: none)
    uint64_t tx_data_packets = 0;
    uint64_t tx_payload_bytes = 0;
    uint64_t rx_data_packets = 0;
    uint64_t rx_payload_bytes = 0;
    uint64_t retransmits = 0;
    uint64_t redundant = 0;       // redundant copies sent: of resends, and idle-time copies (R-TIMER-10)
    uint64_t ack_copies = 0;      // ACKs showing a hole sent a second time on another route (R-TIMER-10)
    uint64_t duplicates = 0;      // received CSNs already seen (R-CSN-3)
    uint64_t naks_sent = 0;
    uint64_t naks_received = 0;
    uint64_t rnr_drops = 0;       // packets refused as receiver-not-ready: receive not posted, stream not created (R-NAK-10)
    uint64_t rnr_naks_received = 0;  // RNR NAKs that set one of our packets aside for a retry (R-NAK-10)
    uint64_t tx_packed_messages = 0;  // WRITEs sent as entries of WRITE_PACK packets, first transmission (R-PACK-3)
    bool packing = false;             // the peer accepts WRITE_PACK and this device packs toward it (R-PACK-2)
};

// Counted drops of packets the engine could not attribute or accept (R-ERR-*).
struct EngineStats {
    uint64_t rx_packets = 0;
    uint64_t tx_packets = 0;
    uint64_t rx_decode_errors = 0;   // any wire::DecodeError
    uint64_t rx_truncated = 0;
    uint64_t rx_bad_version = 0;
    uint64_t rx_bad_type = 0;
    uint64_t rx_oversized = 0;
    uint64_t rx_inconsistent = 0;
    uint64_t rx_split_header = 0;    // two-span datagram whose header is not all in the first span (driver bug)
    uint64_t rx_unknown_conn = 0;    // dst_conn not ours, or src/peer mismatch
    uint64_t rx_bad_path = 0;        // path_id beyond the connection's paths
    uint64_t rx_stale = 0;           // CSN/PSN outside the acceptable window
    uint64_t cq_overflows = 0;
    uint64_t connects_refused = 0;
    uint64_t connects_crossed = 0;   // CONNECT_REQs of a crossed simultaneous connect, dropped (R-CONN-14)
    uint64_t place_jobs = 0;         // payload copies handed to the placement stage (deferred placement)
    uint64_t rx_place_full = 0;      // data dropped unacked: place_depth records outstanding
    uint64_t cc_feedback = 0;        // window records handed to the CC stage (offload_cc)
    uint64_t cc_feedback_full = 0;   // records dropped: cc_depth not taken (R-CC-8)
    uint64_t cc_views_stale = 0;     // views for a path incarnation that is gone, ignored
    uint64_t probes_sent = 0;        // PROBEs of failed paths (R-PATH-11)
    uint64_t keepalives_sent = 0;    // keepalive PROBEs (R-CONN-15)
    uint64_t probes_deferred = 0;    // probes and keepalives postponed by the device's probe_rate (R-PATH-14)
};

// TEST ONLY (the conformance suite's broken IUT, doc/conformance.md section 5):
// one deliberate protocol violation at a time, so the suite shows that it
// fails exactly the tests citing the rule broken. Every hook sits off the
// per-packet path (a loss, a duplicate, a refusal, a registration, the ACK
// of a WRITE_PACK).
enum class TestMutation : uint8_t {
    none = 0,
    go_back_n,       // R-SACK-4: a SACK-detected loss resends every in-flight packet from the hole on
    no_rkey_bounds,  // R-MEM-3 item 4: regions are range-checked as if 64 KiB longer (kMutationSlack)
    no_dup_filter,   // R-CSN-3, R-ATOMIC-2: a duplicate CSN of an atomic is executed again
    ack_refused,     // R-ACK-8, R-NAK-1: a refused (NAKed) packet is acknowledged as well
    pack_acks_first,  // R-PACK-4: a WRITE_PACK's ACK acknowledges its first message only, not all k
};
// no_rkey_bounds: how far past its end a region accepts remote access.
inline constexpr uint64_t kMutationSlack = 64 * 1024;

struct EngineConfig {
    uint16_t max_payload = 4096;     // segment size (R-SEG-1)
    uint16_t num_paths = 4;          // paths per connection this side sends on
    uint32_t stream_depth = 256;     // outstanding messages per stream and direction
    uint32_t recv_depth = 1024;      // posted receives per stream
    // Reserved per send-queue / receive-queue slot of every stream, as a verbs
    // QP's max_send_sge, max_recv_sge and max_inline_data (R-SGE-1, R-INLINE-1).
    uint32_t max_send_sge = 4;       // 1..kMaxSge entries per send WR's list
    uint32_t max_recv_sge = 4;       // 1..kMaxSge entries per receive's list
    uint32_t max_inline = 256;       // 0..kMaxInline bytes of an inline send (and of a list gathered by copy)
    uint32_t csn_window = 4096;      // CSNs in flight per connection (power of two)
    uint32_t rx_capacity_mbps = 100000;  // this endpoint's inbound capacity (R-HINT-3)
    bool rate_hints = true;          // send fair-share hints and obey received ones
    bool accept_incoming = true;     // create connections for CONNECT_REQ
    Time initial_rto = 1'000'000;    // 1 ms before any RTT sample
    Time min_rto = 100'000;
    Time max_rto = 100'000'000;
    uint32_t fail_after_timeouts = 3;    // consecutive RTOs that retire a path (R-PATH-9)
    bool path_silence = true;            // R-TIMER-9
    // R-TIMER-10: every resend goes with a copy on another path, and a
    // connection with window room but nothing new to send sends its
    // unacknowledged CSNs once more on another path, newest first, so a
    // lost tail is repaired before its loss is known. Off by default.
    bool tail_redundancy = false;
    // R-PACK-2: advertise that this device accepts WRITE_PACK packets, and
    // pack small WRITEs toward peers that advertise it (R-PACK-3). Never
    // advertised with deferred_placement (a packed packet is placed inline).
    bool pack_writes = true;
    Time probe_interval = 1'000'000;     // first re-probe of a failed path after this (R-PATH-11)
    Time probe_max_interval = 100'000'000;  // unanswered probes back off, doubling, up to this (R-PATH-11)
    // R-PATH-14: PROBEs (path probes and keepalives) this device sends per
    // second at most, whatever the number of connections and failed paths;
    // bursts of up to a tenth of a second's worth.
    uint32_t probe_rate = 5000;
    // R-CONN-15: a connection that has heard nothing from its peer for this
    // long sends a keepalive PROBE (so an idle but live peer is heard); 0:
    // conn_timeout / 4.
    Time keepalive_interval = 0;
    Time conn_timeout = 2'000'000'000;   // peer silent this long with work outstanding: error
    // R-NAK-10: a packet the peer refused as receiver-not-ready is sent again
    // after rnr_delay, at most rnr_retry times (verbs' rnr_retry: 7 = forever).
    Time rnr_delay = 100'000;
    uint8_t rnr_retry = 7;
    // R-STREAM-11: a WR the peer refused because it destroyed its end of the
    // stream (NAK invalid_stream) fails after this long, not at once; 0: at
    // once. The verbs provider waits as an RNIC's retries would.
    Time peer_gone_wait = 0;
    Time connect_retry = 10'000'000;     // CONNECT_REQ resend interval
    Time hint_interval = 0;              // fair-share update period; 0 = 4 * min_rto
    Time ack_delay = 0;                  // hold acks at most this long (0: ack every rx burst)
    CcConfig cc{};
    uint32_t reroute_after_marks = 0;    // 0 = off; rounds with marks before changing entropy
    // R-PLANE-1: this device's planes, announced in every CONNECT_* when
    // there are two or more (one plane, or none given: no plane block, the
    // v1 handshake unchanged). A connection uses min(ours, peer's) planes;
    // path i is on plane i % that (R-PLANE-2), and TxPacket::plane says
    // which plane a packet leaves on.
    uint8_t num_planes = 0;
    std::array<wire::PlaneAddr, wire::kMaxPlanes> planes{};
    // Pipeline arrangement (doc/architecture.md 4.2): rx_burst validates and
    // deduplicates but leaves payload copies to a placement stage (PlaceJob,
    // take_place_jobs / placed). false: run to completion, copies inline.
    bool deferred_placement = false;
    uint32_t place_depth = 1024;         // received packets awaiting placement (power of two)
    // Deferred placement: payloads up to this many bytes are still copied
    // inline (a ring transit costs more than such a copy); their acks keep
    // arrival order behind pending copies all the same.
    uint32_t place_inline_max = 256;
    // Pipeline arrangement of congestion control (R-CC-8, architecture 4.2):
    // the engine queues CcFeedback records (take_cc_feedback) for a CcCore
    // on another stage and schedules on the CcViews it publishes
    // (cc_update). false: the engine runs its own CcCore inline.
    bool offload_cc = false;
    uint32_t cc_depth = 4096;            // feedback records held for the driver (power of two)
    // Test only (R-WRAP-1): msg_seq, recv_seq and the counters of every
    // send, receive and completion queue and placement/CC ring start here
    // instead of 0, so a test runs them across their 32-bit wrap. Both ends
    // of a connection must use the same value (R-STREAM-1 numbers from 0).
    uint32_t test_seq_base = 0;
    // Test only: a deliberately broken engine (TestMutation); none in every real use.
    TestMutation test_mutation = TestMutation::none;
};

class Engine {
public:
    explicit Engine(const EngineConfig& cfg = {});
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const EngineConfig& config() const noexcept;

    // --- memory (R-MEM-*) ---
    uint32_t alloc_pd();
    Status register_mr(uint32_t pd, void* addr, uint64_t length, uint32_t access, MrInfo& out);
    Status deregister_mr(uint32_t lkey);

    // --- completion queues ---
    Status create_cq(uint32_t depth, uint32_t& cq_out);
    // Returns completions in the order they were generated (stream order per stream, R-CMPL-*).
    size_t poll_cq(uint32_t cq, Completion* out, size_t max);
    // verbs ibv_req_notify_cq (R-NOTIFY-1): arms the CQ for one notification,
    // raised by the next completion it receives (solicited_only: the next
    // receive completion of a solicited message, or the next error
    // completion). Completions already in the CQ raise nothing.
    Status req_notify_cq(uint32_t cq, bool solicited_only);
    // Notifications raised since the last call, one record per CQ (R-NOTIFY-2):
    // the drive loop takes them after every pass and signals the CQs'
    // completion channels. The engine itself writes no file descriptor.
    size_t take_cq_events(CqEvent* out, size_t max);
    // Whether take_cq_events has anything: the API asks after every post
    // (inline: out of line it was a call per post, doc/performance.md 7.3, round 32).
    bool cq_events_pending() const noexcept { return !notified_->empty(); }
    // Whether poll_events has anything: the API asks before every transmit.
    bool events_pending() const noexcept;

    // --- connections and streams (R-CONN-*, R-STREAM-*) ---
    // Starts an active open toward the driver's peer handle; returns the local connection id.
    // R-CONN-14: if the peer connects to this end at the same moment, the two
    // attempts become one connection: this id is ESTABLISHED by the peer's
    // CONNECT_REQ or by the answer to ours (event established either way). A
    // connection the peer opened and this end accepted, not yet returned by a
    // connect(), is returned instead of opening a second one.
    //
    // peer_planes (R-PLANE-6): how many of the peer's planes the driver can
    // already address for this handle (the application gave the peer's
    // address on planes 0..peer_planes-1). The CONNECT_REQ and each repeat
    // rotate over min(own planes, peer_planes) planes, so the connection is
    // set up while any of them is up; 1 (default): every attempt on plane 0.
    Status connect(uint32_t peer, uint32_t& conn_out, uint8_t peer_planes = 1);
    Status disconnect(uint32_t conn);
    // R-CONN-13: the application is done with a CLOSED or ERROR connection
    // (its flushed completions are in the CQs): its state and streams are
    // freed, its id no longer answers (conn_stats: no_such_object; late
    // packets: rx_unknown_conn) and its slot may carry a later connection
    // under another id. bad_state in any other state.
    Status release_conn(uint32_t conn);
    // Connections that exist (any state, not yet released).
    size_t conn_count() const noexcept;
    ConnState conn_state(uint32_t conn) const;
    // Streams must exist with the same id on both sides before traffic for them arrives.
    // Ids are 0..kMaxStreamId; exists: the id is live on the connection (R-STREAM-1, R-STREAM-9).
    Status create_stream(uint32_t conn, uint32_t stream_id, const StreamAttr& attr);
    Status create_stream(uint32_t conn, uint32_t stream_id, uint32_t pd, uint32_t send_cq, uint32_t recv_cq);
    // R-STREAM-12 (verbs modify_qp to IBV_QPS_ERR): everything outstanding on
    // the stream completes with wr_flush_err, in order; later posts too.
    Status set_stream_error(uint32_t conn, uint32_t stream_id);
    // verbs modify_qp(IBV_QP_MAX_QP_RD_ATOMIC), which comes at RTS, after the
    // stream exists: StreamAttr::max_rd_atomic from now on (0: no limit).
    Status set_stream_max_rd_atomic(uint32_t conn, uint32_t stream_id, uint32_t max_rd_atomic);
    // R-STREAM-11 (verbs destroy_qp): the stream's state is freed without
    // completions; the id may be created again at once (a new incarnation,
    // which the old one's late packets cannot reach).
    Status destroy_stream(uint32_t conn, uint32_t stream_id);
    Status post_send(uint32_t conn, uint32_t stream_id, const SendWr& wr);
    // wrs[0, n) in order, as post_send each, stopping at the first one refused:
    // its Status (ok: all were posted) and in `posted` how many were. A verbs
    // WR list: the connection and stream are looked up once for the list.
    Status post_sends(uint32_t conn, uint32_t stream_id, const SendWr* wrs, size_t n, size_t& posted);
    Status post_recv(uint32_t conn, uint32_t stream_id, const RecvWr& wr);
    size_t poll_events(ConnEvent* out, size_t max);

    // --- shared receive queues (R-SRQ-*) ---
    // depth: 1..2^20 posted entries. Any stream of any connection may use it (StreamAttr::srq).
    Status create_srq(uint32_t pd, uint32_t depth, uint32_t& srq_out);
    // queue_full: depth entries posted or bound to messages not yet complete.
    Status post_srq_recv(uint32_t srq, const RecvWr& wr);
    // Arms the limit event (verbs IBV_SRQ_LIMIT): one srq_limit event when the
    // entries posted and not yet taken drop below limit, then disarmed. 0 disarms.
    Status arm_srq_limit(uint32_t srq, uint32_t limit);
    // Entries posted and not yet taken by a message.
    Status srq_posted(uint32_t srq, uint32_t& out) const;
    // bad_state while a stream uses it.
    Status destroy_srq(uint32_t srq);

    // --- I/O (driver side) ---
    void rx_burst(const RxPacket* pkts, size_t n, Time now);
    // How many datagrams rx_burst took so far that may have made anything but
    // a data ACK sendable: every one but a whole WRITE placed at once (a
    // control packet, an ACK or NAK, any other data). The drive loop's
    // TxOrder::before_rx transmits right after a receive only if this moved:
    // a ping-pong's lone WRITE goes to its application without an empty
    // transmit (doc/performance.md 7.3, round 33).
    uint64_t rx_may_send() const noexcept { return *rx_may_send_; }
    size_t tx_burst(TxPacket* out, size_t max, Time now);
    // acks false: the same, but data ACKs stay pending for a later tx_burst
    // (the drive loop's TxOrder::before_rx: they leave right behind the
    // owner's answer to what they acknowledge, issue 24).
    size_t tx_burst(TxPacket* out, size_t max, Time now, bool acks);
    // Earliest time at which tx_burst has something to do without new input
    // (pacing release, ack delay, RTO, probe). UINT64_MAX: nothing pending.
    Time next_deadline(Time now) const;
    // True when tx_burst would produce a packet right now.
    bool tx_pending(Time now) const;

    // --- deferred placement (EngineConfig::deferred_placement) ---
    // Payload copies from earlier rx_bursts, in arrival order. Drivers take
    // them after every rx_burst (a job points into that burst's datagrams)
    // and keep those datagrams until the job is placed.
    size_t take_place_jobs(PlaceJob* out, size_t max);
    // The copies named by tokens are done (any order). Acks, byte counts and
    // completions that waited for them happen here, in arrival order.
    void placed(const uint32_t* tokens, size_t n, Time now);
    // Received packets whose processing waits for a placement (0: drained).
    size_t place_outstanding() const noexcept;

    // --- congestion-control core on its own stage (EngineConfig::offload_cc) ---
    // Window feedback (per ACK, timeout, handshake window, path revival), in
    // order. Drivers take it after every rx_burst and tx_burst and pass it,
    // in that order, to one CcCore built from config().cc; up to cc_depth
    // records wait here, beyond that they are dropped and counted.
    size_t take_cc_feedback(CcFeedback* out, size_t max);
    // Views that CcCore published (any batching, in its output order).
    void cc_update(const CcView* views, size_t n);
    size_t cc_feedback_waiting() const noexcept;

    // --- statistics ---
    const EngineStats& stats() const noexcept;
    Status conn_stats(uint32_t conn, ConnStats& out) const;
    Status path_stats(uint32_t conn, uint16_t path, PathStats& out) const;
    // Test support: what the engine keeps incrementally against a fresh
    // computation from the state it summarizes (each path's kept scheduler
    // step, each connection's count of packets out and failed paths, and
    // with inline CC each path's view, written in place, against the one
    // the CC core works out from its window). Returns how many disagree
    // (0: all agree).
    size_t self_check() const;

    // Bytes of state: per connection (without streams) and per stream (without its queues).
    static size_t conn_state_bytes();
    static size_t stream_state_bytes();

    struct Impl;
private:
    std::unique_ptr<Impl> impl_;
    const std::vector<uint32_t>* notified_;  // impl_'s list of CQs with events (R-NOTIFY-2)
    const uint64_t* rx_may_send_;            // impl_'s count (rx_may_send)
};

}  // namespace mroce
