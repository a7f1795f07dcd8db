// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Devices, contexts and their queries (doc/verbs.md "Devices and ports"):
// the device list that merges mroce's devices with the real library's,
// opening and closing, device/port/GID/P_Key queries and async events.
#include <arpa/inet.h>
#include <endian.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "exports.hpp"
#include "provider.hpp"
#include "real_verbs.hpp"

namespace mroce::verbs {

namespace {

// R-STREAM-11: about an RNIC's time to give up on a QP that no longer answers
// (timeout 14, 4.096 us * 2^14 = 67 ms, times retry_cnt 7).
constexpr Time kVerbsPeerGoneWait = 500'000'000;

// Marks an ibv_device as ours (its _ops slot is unused by libibverbs' callers).
ibv_context* ours_marker(ibv_device*, int) { return nullptr; }

std::vector<DeviceSlot*> load_slots() {
    std::vector<DeviceSlot*> v;
    Config cfg;
    try {
        cfg = load_config();
    } catch (const std::exception& e) {
        say(std::string("no mroce devices: ") + e.what());
        return v;
    }
    for (size_t i = 0; i < cfg.devices.size(); ++i) {
        const DeviceConfig& d = cfg.devices[i];
        if (d.driver != "udp") {
            say("device '" + d.name + "': driver " + d.driver + " is not offered through verbs (udp only); skipped");
            continue;
        }
        auto* s = new DeviceSlot;  // lives as long as the process
        s->cfg = d;
        s->cfg.progress = ProgressMode::automatic;  // verbs programs never call a progress function
        in_addr a{};
        inet_pton(AF_INET, d.address.c_str(), &a);
        s->ipv4 = ntohl(a.s_addr);
        s->plane_ipv4 = {s->ipv4};
        for (size_t k = 1; k < d.planes.size(); ++k) {
            in_addr pa{};
            inet_pton(AF_INET, d.planes[k].c_str(), &pa);
            s->plane_ipv4.push_back(ntohl(pa.s_addr));
        }
        s->udp_port = d.port;
        s->index = int(v.size());
        s->guid = 0x6d72000000000000ull | (uint64_t(s->ipv4) << 16) | d.port;
        ibv_device& ib = s->ibdev;
        ib._ops._dummy1 = ours_marker;
        ib.node_type = IBV_NODE_CA;
        ib.transport_type = IBV_TRANSPORT_IB;
        std::snprintf(ib.name, sizeof ib.name, "mroce%d", s->index);
        std::snprintf(ib.dev_name, sizeof ib.dev_name, "uverbs-mroce%d", s->index);
        std::snprintf(ib.dev_path, sizeof ib.dev_path, "/sys/class/infiniband_verbs/uverbs-mroce%d", s->index);
        std::snprintf(ib.ibdev_path, sizeof ib.ibdev_path, "/sys/class/infiniband/mroce%d", s->index);
        v.push_back(s);
    }
    return v;
}

// The real library's list behind each merged list we handed out.
std::mutex lists_mu;
std::map<ibv_device**, ibv_device**> real_lists;

DeviceSlot* slot_of(ibv_device* d) { return reinterpret_cast<DeviceSlot*>(d); }

uint8_t speed_for(uint32_t mbps) {
    // ibv_port_attr::active_speed for a 4X link of at most the device's inbound capacity.
    struct S {
        uint32_t lane_mbps;
        uint8_t code;
    };
    static constexpr S table[] = {{100000, 128}, {50000, 64}, {25000, 32}, {14000, 16}, {10000, 8}, {5000, 4}, {2500, 2}};
    for (const S& s : table)
        if (4ull * s.lane_mbps <= mbps) return s.code;
    return 1;
}

ibv_mtu mtu_for(uint32_t payload) {
    if (payload >= 4096) return IBV_MTU_4096;
    if (payload >= 2048) return IBV_MTU_2048;
    if (payload >= 1024) return IBV_MTU_1024;
    if (payload >= 512) return IBV_MTU_512;
    return IBV_MTU_256;
}

void fill_port(Context& c, ibv_port_attr& a) {
    std::memset(&a, 0, sizeof a);
    const DeviceConfig& cfg = c.dev->config();
    a.state = IBV_PORT_ACTIVE;
    a.max_mtu = IBV_MTU_4096;
    a.active_mtu = mtu_for(cfg.engine.max_payload);
    a.gid_tbl_len = int(c.slot->plane_ipv4.size());  // one RoCEv2 GID per plane
    a.port_cap_flags = 0;
    a.max_msg_sz = kMaxMessageSize;
    a.pkey_tbl_len = 1;
    a.lid = lid_of(c.slot->ipv4);
    a.sm_lid = 0;
    a.lmc = 0;
    a.max_vl_num = 1;
    a.subnet_timeout = 18;
    a.active_width = 2;  // 4X
    a.active_speed = speed_for(cfg.engine.rx_capacity_mbps);
    a.phys_state = 5;    // LinkUp
    a.link_layer = IBV_LINK_LAYER_ETHERNET;
}

int query_port_op(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len) {
    if (port != 1 || !attr) return EINVAL;
    ibv_port_attr a;
    fill_port(*ctx_of(ctx), a);
    // NCCL and newer rdma-core pass a larger struct than this rdma-core's.
    std::memset(attr, 0, len);
    std::memcpy(attr, &a, std::min(len, sizeof a));
    return 0;
}

void fill_device(Context& c, ibv_device_attr& a) {
    std::memset(&a, 0, sizeof a);
    const DeviceConfig& cfg = c.dev->config();
    std::snprintf(a.fw_ver, sizeof a.fw_ver, "mroce 0.1.0");
    a.node_guid = htobe64(c.slot->guid);
    a.sys_image_guid = htobe64(c.slot->guid);
    a.max_mr_size = uint64_t(1) << 40;
    a.page_size_cap = 0xfffff000;
    a.vendor_id = 0;
    a.vendor_part_id = cfg.verbs_part_id;
    a.hw_ver = 1;
    a.max_qp = 1 << 16;
    a.max_qp_wr = 65536;
    a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SRQ_RESIZE;
    a.device_cap_flags &= ~unsigned(IBV_DEVICE_SRQ_RESIZE);  // SRQ depth is fixed at creation
    a.max_sge = int(std::min(cfg.engine.max_send_sge, cfg.engine.max_recv_sge));
    a.max_sge_rd = int(cfg.engine.max_send_sge);
    a.max_cq = 1 << 16;
    a.max_cqe = 1 << 22;
    a.max_mr = 1 << 20;
    a.max_pd = 1 << 20;
    a.max_qp_rd_atom = 128;
    a.max_res_rd_atom = 1 << 16;
    a.max_qp_init_rd_atom = 128;
    a.atomic_cap = IBV_ATOMIC_HCA;
    a.max_srq = 1 << 16;
    a.max_srq_wr = 1 << 20;
    a.max_srq_sge = int(cfg.engine.max_recv_sge);
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 0;
    a.phys_port_cnt = 1;
}

int query_device_ex_op(ibv_context* ctx, const ibv_query_device_ex_input*, ibv_device_attr_ex* attr, size_t len) {
    if (!attr || len < sizeof(ibv_device_attr)) return EINVAL;
    ibv_device_attr_ex a{};
    fill_device(*ctx_of(ctx), a.orig_attr);
    a.phys_port_cnt_ex = 1;
    std::memset(attr, 0, len);
    std::memcpy(attr, &a, std::min(len, sizeof a));
    return 0;
}

// Before the device goes, its peers' last resends are answered: a peer whose
// ACK from this end was lost (the usual end of a verbs program on a lossy
// fabric: the responder's last ACK, then ibv_destroy_qp and ibv_close_device)
// resends within its RTO (1 ms floor on sockets, doubling), and a closed
// socket would leave its WR to fail after conn_timeout although the bytes
// landed (R-NAK-8 acknowledges the resend of a destroyed stream). The engine
// thread keeps running until nothing arrived for 20 ms, at most 200 ms.
void answer_last_resends(Device& d) {
    using clock = std::chrono::steady_clock;
    d.stop_driving();
    const auto start = clock::now();
    auto quiet_since = start;
    uint64_t seen = d.engine_stats().rx_packets;
    while (clock::now() - start < std::chrono::milliseconds(200)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const uint64_t rx = d.engine_stats().rx_packets;
        if (rx != seen) {
            seen = rx;
            quiet_since = clock::now();
        } else if (clock::now() - quiet_since >= std::chrono::milliseconds(20)) {
            return;
        }
    }
}

// MROCE_VERBS_STATS=1: one line of the device's counters on stderr when its
// last context closes (a verbs program has no other way to show them).
void report_stats(DeviceSlot& s) {
    const char* e = std::getenv("MROCE_VERBS_STATS");
    if (!e || !*e || std::strcmp(e, "0") == 0 || !s.open.dev) return;
    const EngineStats es = s.open.dev->engine_stats();
    const DeviceStats ds = s.open.dev->device_stats();
    uint64_t retransmits = 0, rx_dup = 0;
    {
        std::lock_guard<std::mutex> g(s.open.conn_mu);
        for (auto& [peer, conn] : s.open.conn_of_peer) {
            try {
                const ConnStats cs = conn.stats();
                retransmits += cs.retransmits;
                rx_dup += cs.duplicates;
            } catch (const std::exception&) {
            }
        }
    }
    std::fprintf(stderr,
                 "mroce-verbs: %s stats: tx_packets %llu rx_packets %llu retransmits %llu duplicates %llu "
                 "injected_drops %llu injected_ce %llu\n",
                 s.ibdev.name, (unsigned long long)es.tx_packets, (unsigned long long)es.rx_packets,
                 (unsigned long long)retransmits, (unsigned long long)rx_dup,
                 (unsigned long long)ds.injected_drops, (unsigned long long)ds.injected_ce);
    // R-PLANE-5: what each plane carried, where there are several.
    for (size_t k = 0; s.open.dev->num_planes() > 1 && k < s.open.dev->num_planes(); ++k) {
        PlaneInfo pi;
        if (!s.open.dev->query_plane(k, pi)) continue;
        std::fprintf(stderr, "mroce-verbs: %s plane %zu %s: tx_packets %llu rx_packets %llu\n", s.ibdev.name, k,
                     pi.address.c_str(), (unsigned long long)pi.tx_packets, (unsigned long long)pi.rx_packets);
    }
}

int compat_query_device(ibv_context* ctx, ibv_device_attr* attr) {
    fill_device(*ctx_of(ctx), *attr);
    return 0;
}

}  // namespace

std::vector<DeviceSlot*>& slots() {
    // Never destroyed: contexts may be open when the process exits, and the
    // slots must outlive every other static destructor that might close one.
    static auto* const s = new std::vector<DeviceSlot*>(load_slots());
    return *s;
}

bool is_ours(const ibv_device* d) noexcept { return d && d->_ops._dummy1 == ours_marker; }

void say(const std::string& what) {
    static std::mutex mu;
    static std::set<std::string> said;
    static const bool quiet = [] {
        const char* e = std::getenv("MROCE_VERBS_QUIET");
        return e && *e && std::strcmp(e, "0") != 0;
    }();
    std::lock_guard<std::mutex> g(mu);
    if (quiet || !said.insert(what).second) return;
    std::fprintf(stderr, "mroce-verbs: %s\n", what.c_str());
}

int errno_of(Status s) noexcept {
    switch (s) {
    case Status::ok: return 0;
    case Status::invalid_argument: return EINVAL;
    case Status::no_such_object: return EINVAL;
    case Status::queue_full: return ENOMEM;
    case Status::bad_state: return EINVAL;
    case Status::exists: return EEXIST;
    case Status::no_memory: return ENOMEM;
    case Status::message_too_long: return EMSGSIZE;
    }
    return EINVAL;
}

uint16_t lid_of(uint32_t ipv4) noexcept { return uint16_t(ipv4 & 0xffff); }

void gid_of(uint32_t ipv4, ibv_gid& g) noexcept {
    std::memset(&g, 0, sizeof g);
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    g.raw[12] = uint8_t(ipv4 >> 24);
    g.raw[13] = uint8_t(ipv4 >> 16);
    g.raw[14] = uint8_t(ipv4 >> 8);
    g.raw[15] = uint8_t(ipv4);
}

bool peer_ipv4(const DeviceSlot& local, const ibv_ah_attr& ah, uint32_t& out, std::string& why) {
    if (ah.is_global) {
        const uint8_t* r = ah.grh.dgid.raw;
        static constexpr uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (std::memcmp(r, mapped, 12) != 0) {
            why = "the destination GID is not an IPv4-mapped (RoCEv2 IPv4) GID";
            return false;
        }
        out = uint32_t(r[12]) << 24 | uint32_t(r[13]) << 16 | uint32_t(r[14]) << 8 | r[15];
        return true;
    }
    if (ah.dlid == 0 || ah.dlid >= 0xc000) {
        why = "destination LID " + std::to_string(ah.dlid) + " is not a unicast LID, and no GRH was given";
        return false;
    }
    out = (local.ipv4 & 0xffff0000u) | ah.dlid;
    return true;
}

// Under the device lock, in the progress path: a connection that failed or
// closed puts every QP on it in ERR with IBV_EVENT_QP_FATAL (their work
// completes with errors through the CQs); an SRQ below its limit raises
// IBV_EVENT_SRQ_LIMIT_REACHED and is disarmed, as verbs says.
void raise_async_events(OpenDevice& od, const ConnEvent& ev) {
    if (ev.kind == EventKind::srq_limit) {
        if (ev.srq < 1 || ev.srq > od.srq_of_id.size() || !od.srq_of_id[ev.srq - 1]) return;
        Srq& s = *od.srq_of_id[ev.srq - 1];
        s.limit = 0;
        ibv_async_event e{};
        e.element.srq = &s.srq;
        e.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
        push_async_event(*s.ctx, e);
        return;
    }
    for (auto& [key, q] : od.qp_of_stream) {
        if (uint32_t(key >> 32) != ev.conn || q->fatal_raised) continue;
        q->fatal_raised = true;
        q->attr.qp_state = IBV_QPS_ERR;
        q->ibqp()->state = IBV_QPS_ERR;
        ibv_async_event e{};
        e.element.qp = q->ibqp();
        e.event_type = IBV_EVENT_QP_FATAL;
        push_async_event(*q->ctx, e);
    }
}

void push_async_event(Context& c, const ibv_async_event& ev) {
    {
        std::lock_guard<std::mutex> g(c.async_mu);
        c.async_q.push_back(ev);
    }
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(c.async_fd, &one, sizeof one);
}

}  // namespace mroce::verbs

using namespace mroce;
using namespace mroce::verbs;

// ---------------------------------------------------------------------------
// Exported (exports.map gives each its rdma-core version).

extern "C" {

MROCE_EXPORT ibv_device** (ibv_get_device_list)(int* num_devices) {
    int n_real = 0;
    ibv_device** real_list = nullptr;
    if (auto f = MROCE_REAL(ibv_get_device_list, "IBVERBS_1.1")) real_list = f(&n_real);
    if (!real_list) n_real = 0;
    auto& ours = slots();
    auto** list = static_cast<ibv_device**>(std::calloc(size_t(n_real) + ours.size() + 1, sizeof(ibv_device*)));
    if (!list) {
        if (real_list) MROCE_REAL(ibv_free_device_list, "IBVERBS_1.1")(real_list);
        errno = ENOMEM;
        return nullptr;
    }
    int n = 0;
    for (int i = 0; i < n_real; ++i) list[n++] = real_list[i];
    for (DeviceSlot* s : ours) list[n++] = &s->ibdev;
    if (real_list) {
        std::lock_guard<std::mutex> g(lists_mu);
        real_lists[list] = real_list;
    }
    if (num_devices) *num_devices = n;
    return list;
}

MROCE_EXPORT void ibv_free_device_list(ibv_device** list) {
    if (!list) return;
    ibv_device** real_list = nullptr;
    {
        std::lock_guard<std::mutex> g(lists_mu);
        auto it = real_lists.find(list);
        if (it != real_lists.end()) {
            real_list = it->second;
            real_lists.erase(it);
        }
    }
    if (real_list) MROCE_REAL(ibv_free_device_list, "IBVERBS_1.1")(real_list);
    std::free(list);
}

MROCE_EXPORT const char* ibv_get_device_name(ibv_device* d) {
    if (is_ours(d)) return d->name;
    auto f = MROCE_REAL(ibv_get_device_name, "IBVERBS_1.1");
    return f ? f(d) : nullptr;
}

MROCE_EXPORT __be64 ibv_get_device_guid(ibv_device* d) {
    if (is_ours(d)) return htobe64(slot_of(d)->guid);
    auto f = MROCE_REAL(ibv_get_device_guid, "IBVERBS_1.1");
    return f ? f(d) : 0;
}

MROCE_EXPORT int ibv_get_device_index(ibv_device* d) {
    // Above any kernel index: a real device's index never collides with ours.
    if (is_ours(d)) return 0x10000 + slot_of(d)->index;
    auto f = MROCE_REAL(ibv_get_device_index, "IBVERBS_1.9");
    return f ? f(d) : -1;
}

MROCE_EXPORT ibv_context* ibv_open_device(ibv_device* d) {
    if (!is_ours(d)) {
        auto f = MROCE_REAL(ibv_open_device, "IBVERBS_1.1");
        return f ? f(d) : nullptr;
    }
    DeviceSlot& s = *slot_of(d);
    auto* c = new (std::nothrow) Context;
    if (!c) {
        errno = ENOMEM;
        return nullptr;
    }
    {
        std::lock_guard<std::mutex> g(s.mu);
        if (s.open.refs == 0) {
            try {
                // R-STREAM-11: a peer QP destroyed under a SEND fails it only
                // after the time an RNIC's retries would take (doc/verbs.md).
                DeviceConfig dc = s.cfg;
                if (!dc.engine.peer_gone_wait) dc.engine.peer_gone_wait = kVerbsPeerGoneWait;
                s.open.dev = open_device(dc);
            } catch (const std::exception& e) {
                say(std::string("ibv_open_device ") + d->name + ": " + e.what());
                delete c;
                errno = ENODEV;
                return nullptr;
            }
            // QP numbers: 24 bits, never 0 or 1 (special in IB), spread per process.
            s.open.next_qpn = 0x100 + (uint32_t(::getpid()) & 0xffff) * 0x40;
            OpenDevice* od = &s.open;
            s.open.dev->set_event_listener([od](const ConnEvent& ev) { raise_async_events(*od, ev); });
        }
        ++s.open.refs;
    }
    c->slot = &s;
    c->od = &s.open;
    c->dev = s.open.dev.get();
    c->async_fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
    verbs_context& v = c->vctx;
    v.sz = sizeof(verbs_context);
    v.query_port = query_port_op;
    v.query_device_ex = query_device_ex_op;
    ibv_context& ctx = v.context;
    ctx.device = d;
    ctx.cmd_fd = -1;
    ctx.async_fd = c->async_fd;
    ctx.num_comp_vectors = 1;
    pthread_mutex_init(&ctx.mutex, nullptr);
    ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx.ops._compat_query_device = compat_query_device;
    install_data_path(*c);
    install_qp_create(*c);
    return &ctx;
}

MROCE_EXPORT int ibv_close_device(ibv_context* ctx) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_close_device, "IBVERBS_1.1");
        return f ? f(ctx) : ENOSYS;
    }
    Context* c = ctx_of(ctx);
    DeviceSlot& s = *c->slot;
    {
        std::lock_guard<std::mutex> g(s.mu);
        if (--s.open.refs == 0) {
            answer_last_resends(*s.open.dev);
            report_stats(s);
            s.open.dev.reset();  // stops the engine thread, closes the sockets
            s.open.qp_of_stream.clear();
            s.open.qp_of_num.clear();
            s.open.cq_of_id.clear();
            s.open.srq_of_id.clear();
            std::lock_guard<std::mutex> c(s.open.conn_mu);
            s.open.conn_of_peer.clear();  // its Connections named the device just closed
        }
    }
    if (c->async_fd >= 0) ::close(c->async_fd);
    pthread_mutex_destroy(&ctx->mutex);
    delete c;
    return 0;
}

MROCE_EXPORT int ibv_query_device(ibv_context* ctx, ibv_device_attr* attr) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_query_device, "IBVERBS_1.1");
        return f ? f(ctx, attr) : ENOSYS;
    }
    if (!attr) return EINVAL;
    fill_device(*ctx_of(ctx), *attr);
    return 0;
}

// The exported (non-inline) ibv_query_port takes the old, shorter struct.
MROCE_EXPORT int (ibv_query_port)(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* attr) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_query_port, "IBVERBS_1.1");
        return f ? f(ctx, port, attr) : ENOSYS;
    }
    // Old binaries pass the struct as it was before flags and port_cap_flags2.
    return query_port_op(ctx, port, reinterpret_cast<ibv_port_attr*>(attr), offsetof(ibv_port_attr, port_cap_flags2));
}

MROCE_EXPORT int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_query_gid, "IBVERBS_1.1");
        return f ? f(ctx, port, index, gid) : ENOSYS;
    }
    const DeviceSlot& s = *ctx_of(ctx)->slot;
    if (port != 1 || index < 0 || size_t(index) >= s.plane_ipv4.size() || !gid) return -1;
    gid_of(s.plane_ipv4[size_t(index)], *gid);
    return 0;
}

MROCE_EXPORT int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* entry,
                                   uint32_t flags, size_t entry_size) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(_ibv_query_gid_ex, "IBVERBS_1.11");
        return f ? f(ctx, port, index, entry, flags, entry_size) : ENOSYS;
    }
    if (port != 1 || flags || !entry || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
    const DeviceSlot& s = *ctx_of(ctx)->slot;
    if (index >= s.plane_ipv4.size()) return ENODATA;
    std::memset(entry, 0, entry_size);
    gid_of(s.plane_ipv4[index], entry->gid);
    entry->gid_index = index;
    entry->port_num = 1;
    entry->gid_type = IBV_GID_TYPE_ROCE_V2;
    entry->ndev_ifindex = 0;
    return 0;
}

MROCE_EXPORT ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries, size_t max_entries,
                                          uint32_t flags, size_t entry_size) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(_ibv_query_gid_table, "IBVERBS_1.11");
        return f ? f(ctx, entries, max_entries, flags, entry_size) : -ENOSYS;
    }
    if (flags || !entries || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
    const size_t n = ctx_of(ctx)->slot->plane_ipv4.size();
    if (max_entries < n) return -EINVAL;
    auto* out = reinterpret_cast<uint8_t*>(entries);
    for (size_t k = 0; k < n; ++k)
        if (const int r = _ibv_query_gid_ex(ctx, 1, uint32_t(k), reinterpret_cast<ibv_gid_entry*>(out + k * entry_size),
                                            0, entry_size))
            return -r;
    return ssize_t(n);
}

// rdma-core's private query (ibv_devinfo and perftest call it): its enum
// says 0 = IB/RoCE v1, 1 = RoCE v2.
MROCE_EXPORT int ibv_query_gid_type(ibv_context* ctx, uint8_t port, unsigned int index, int* type) {
    if (!is_ours(ctx)) {
        using F = int (*)(ibv_context*, uint8_t, unsigned int, int*);
        auto f = real::fn<F>("ibv_query_gid_type", "IBVERBS_PRIVATE_34");
        return f ? f(ctx, port, index, type) : ENOSYS;
    }
    if (port != 1 || index >= ctx_of(ctx)->slot->plane_ipv4.size() || !type) return EINVAL;
    *type = 1;
    return 0;
}

MROCE_EXPORT int ibv_query_pkey(ibv_context* ctx, uint8_t port, int index, __be16* pkey) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_query_pkey, "IBVERBS_1.1");
        return f ? f(ctx, port, index, pkey) : ENOSYS;
    }
    if (port != 1 || index != 0 || !pkey) return -1;
    *pkey = htobe16(0xffff);
    return 0;
}

MROCE_EXPORT int ibv_get_pkey_index(ibv_context* ctx, uint8_t port, __be16 pkey) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_get_pkey_index, "IBVERBS_1.5");
        return f ? f(ctx, port, pkey) : -1;
    }
    return (port == 1 && (be16toh(pkey) & 0x7fff) == 0x7fff) ? 0 : -1;
}

MROCE_EXPORT int ibv_get_async_event(ibv_context* ctx, ibv_async_event* ev) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_get_async_event, "IBVERBS_1.1");
        return f ? f(ctx, ev) : -1;
    }
    Context* c = ctx_of(ctx);
    // Blocks in read(2), a cancellation point (NCCL cancels its async
    // thread); a signal ends it with -1, as rdma-core's read of async_fd does.
    uint64_t v = 0;
    if (::read(c->async_fd, &v, sizeof v) != ssize_t(sizeof v)) return -1;
    std::lock_guard<std::mutex> g(c->async_mu);
    *ev = c->async_q.front();
    c->async_q.erase(c->async_q.begin());
    return 0;
}

MROCE_EXPORT void ibv_ack_async_event(ibv_async_event* ev) {
    // Objects are never freed while an event names them (destroy does not wait on acks).
    if (!ev) return;
    ibv_context* ctx = nullptr;
    switch (ev->event_type) {
    case IBV_EVENT_CQ_ERR: ctx = ev->element.cq ? ev->element.cq->context : nullptr; break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: ctx = ev->element.qp ? ev->element.qp->context : nullptr; break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: ctx = ev->element.srq ? ev->element.srq->context : nullptr; break;
    default: break;
    }
    // Port and device events carry no object; mroce raises none, and the
    // real library's acks of them count nothing, so only objects are told apart.
    if (!ctx || !is_ours(ctx))
        if (auto f = MROCE_REAL(ibv_ack_async_event, "IBVERBS_1.1")) f(ev);
}

}  // extern "C"
