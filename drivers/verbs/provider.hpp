// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The libibverbs provider's object model (doc/verbs.md, doc/architecture.md 8).
//
// Every verbs object handed to the application is rdma-core's real struct
// (ibv_device, verbs_context + ibv_context, ibv_pd, ibv_mr, ibv_cq, ibv_qp_ex,
// ibv_srq, ibv_comp_channel) as the first member of a provider struct, so
// rdma-core's inline dispatch (context->ops.post_send, qp_ex->wr_*, ...) and
// our exported functions both work on it, and a cast gets ours back.
//
// One mroce::Device per configured device and process, opened by the first
// ibv_open_device and shared by every context on it; it runs an engine thread
// (verbs programs never call a progress function) and its mutex serializes
// the provider with that thread. Each RC QP is a stream of the one engine
// connection between its device and the peer's (unified connections).
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "mroce/api.hpp"

namespace mroce::verbs {

struct Context;
struct Cq;
struct Qp;
struct Srq;

// What one configured device is while a process has it open.
struct OpenDevice {
    std::unique_ptr<Device> dev;
    int refs = 0;
    uint32_t next_qpn = 0;
    // Under dev->lock(): the QP of each (connection, stream) for completions,
    // and the objects engine ids name in events.
    std::unordered_map<uint64_t, Qp*> qp_of_stream;
    std::unordered_map<uint32_t, Qp*> qp_of_num;
    std::vector<Cq*> cq_of_id;    // engine CQ id - 1
    std::vector<Srq*> srq_of_id;  // engine SRQ id - 1
    // The one connection to each peer device (by IPv4), which every QP
    // between the two devices is a stream of; under conn_mu, which is held
    // while a connect waits (never the device lock, which the engine needs).
    std::mutex conn_mu;
    std::unordered_map<uint32_t, Connection> conn_of_peer;
};

// One configured device: the ibv_device handed out and what opening it needs.
struct DeviceSlot {
    ibv_device ibdev{};  // first: an ibv_device* of ours is a DeviceSlot*
    DeviceConfig cfg;
    uint32_t ipv4 = 0;   // host order
    // One per plane (R-PLANE-1), host order: GID index k is plane k's
    // address; [0] == ipv4.
    std::vector<uint32_t> plane_ipv4;
    uint16_t udp_port = 0;
    uint64_t guid = 0;   // host order
    int index = 0;
    std::mutex mu;       // guards open
    OpenDevice open;
};

struct Context {
    verbs_context vctx{};  // first; vctx.context (its last member) is the ibv_context handed out
    DeviceSlot* slot = nullptr;
    Device* dev = nullptr;
    OpenDevice* od = nullptr;
    int async_fd = -1;  // eventfd (semaphore): async events waiting
    std::mutex async_mu;
    std::vector<ibv_async_event> async_q;
};

struct Pd {
    ibv_pd pd{};
    uint32_t id = 0;
};

struct Mr {
    ibv_mr mr{};
    MemoryRegion reg;
};

struct Channel {
    ibv_comp_channel ch{};
    CompletionChannel* cc = nullptr;
};

struct Cq {
    ibv_cq cq{};
    Context* ctx = nullptr;
    uint32_t id = 0;  // engine CQ
};

struct Srq {
    ibv_srq srq{};
    Context* ctx = nullptr;
    uint32_t id = 0;
    uint32_t max_wr = 0, max_sge = 0, limit = 0;
};

// A receive posted in INIT, before the QP has a stream: handed to the engine at RTR.
struct EarlyRecv {
    uint64_t wr_id = 0;
    std::vector<Sge> sge;
};

struct Qp {
    ibv_qp_ex qpx{};  // qpx.qp_base is the ibv_qp handed out
    Context* ctx = nullptr;
    Pd* pd = nullptr;
    Cq* send_cq = nullptr;
    Cq* recv_cq = nullptr;
    Srq* srq = nullptr;
    ibv_qp_cap cap{};
    bool sq_sig_all = false;
    // Attributes as modify_qp set them (ibv_query_qp returns them).
    ibv_qp_attr attr{};
    // The engine stream, from RTR on.
    Connection conn;
    uint32_t stream = 0;
    bool bound = false;
    bool fatal_raised = false;  // IBV_EVENT_QP_FATAL given for its connection's failure
    std::vector<EarlyRecv> early;
    // ibv_wr_* between wr_start and wr_complete.
    std::vector<SendWr> batch;
    std::vector<Sge> batch_sge;       // the batch's lists, in order
    std::vector<uint8_t> batch_inline;  // inline payloads, copied when set
    int batch_err = 0;
    ibv_qp* ibqp() noexcept { return &qpx.qp_base; }
};

// Each provider struct starts with its verbs struct, so a pointer to that is
// a pointer to ours (the objects are ours: is_ours() was checked).
inline Context* ctx_of(ibv_context* c) noexcept {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
}
inline Qp* qp_of(ibv_qp* q) noexcept { return reinterpret_cast<Qp*>(q); }
inline Qp* qp_of(ibv_qp_ex* q) noexcept { return reinterpret_cast<Qp*>(q); }
inline Cq* cq_of(ibv_cq* c) noexcept { return reinterpret_cast<Cq*>(c); }
inline Srq* srq_of(ibv_srq* s) noexcept { return reinterpret_cast<Srq*>(s); }
inline Pd* pd_of(ibv_pd* p) noexcept { return reinterpret_cast<Pd*>(p); }
inline Mr* mr_of(ibv_mr* m) noexcept { return reinterpret_cast<Mr*>(m); }
inline Channel* channel_of(ibv_comp_channel* c) noexcept { return reinterpret_cast<Channel*>(c); }

// The process's mroce devices, from the configuration ($MROCE_CONFIG or the
// built-in defaults), loaded once. Errors loading it are reported once on
// stderr and leave no mroce devices.
std::vector<DeviceSlot*>& slots();
bool is_ours(const ibv_device* d) noexcept;
inline bool is_ours(const ibv_context* c) noexcept { return c && is_ours(c->device); }

// The engine-visible data path (post.cpp): installed into each context's ops.
void install_data_path(Context& c);
void install_qp_ex(Qp& q);
// ibv_create_qp_ex (qp.cpp), through the context's verbs_context.
void install_qp_create(Context& c);
// Queues an async event on the context (any thread).
void push_async_event(Context& c, const ibv_async_event& ev);
// The device's connection and SRQ events as verbs async events (device.cpp).
void raise_async_events(OpenDevice& od, const ConnEvent& ev);

// Errors: verbs calls return errno values; the provider says why once per
// cause on stderr (MROCE_VERBS_QUIET=1 silences it).
void say(const std::string& what);
int errno_of(Status s) noexcept;

// IPv4 (host order) of a peer named by an address handle: the IPv4-mapped
// GID when global, else the LID within the local /16 (doc/verbs.md).
bool peer_ipv4(const DeviceSlot& local, const ibv_ah_attr& ah, uint32_t& out, std::string& why);
uint16_t lid_of(uint32_t ipv4) noexcept;
void gid_of(uint32_t ipv4, ibv_gid& out) noexcept;

}  // namespace mroce::verbs
