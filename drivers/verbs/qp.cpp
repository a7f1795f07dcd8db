// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// RC queue pairs (doc/verbs.md "Queue pairs"): creation, the RESET -> INIT ->
// RTR -> RTS state machine with verbs' required attributes, ERR and back to
// RESET, ibv_query_qp, destroy. At RTR a QP becomes a stream of the one
// connection between its device and the peer's device (the connection is
// made by the first QP to that peer, shared by every later one): both ends
// name the stream by the QP number of the end with the lower IPv4 address,
// which both know from the exchanged QP numbers alone (doc/verbs.md).
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "exports.hpp"
#include "provider.hpp"
#include "real_verbs.hpp"

namespace mroce::verbs {

namespace {

constexpr uint64_t kSupportedSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                                       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

const char* qp_type_name(ibv_qp_type t) {
    switch (t) {
    case IBV_QPT_RC: return "RC";
    case IBV_QPT_UC: return "UC";
    case IBV_QPT_UD: return "UD";
    case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
    case IBV_QPT_XRC_SEND: return "XRC_SEND";
    case IBV_QPT_XRC_RECV: return "XRC_RECV";
    case IBV_QPT_DRIVER: return "DRIVER";
    }
    return "unknown";
}

ibv_qp* create_qp_ex_op(ibv_context* ctx, ibv_qp_init_attr_ex* a) {
    Context& c = *ctx_of(ctx);
    const EngineConfig& ec = c.dev->config().engine;
    if (a->qp_type != IBV_QPT_RC) {
        say(std::string("ibv_create_qp: QP type ") + qp_type_name(a->qp_type) +
            " is not supported: mroce offers RC queue pairs only (errno EOPNOTSUPP)");
        errno = EOPNOTSUPP;
        return nullptr;
    }
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || !a->send_cq || (!a->recv_cq && !a->srq)) {
        errno = EINVAL;
        return nullptr;
    }
    if (a->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
        say("ibv_create_qp_ex: only IBV_QP_INIT_ATTR_PD and IBV_QP_INIT_ATTR_SEND_OPS_FLAGS are supported (errno EOPNOTSUPP)");
        errno = EOPNOTSUPP;
        return nullptr;
    }
    if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~kSupportedSendOps)) {
        say("ibv_create_qp_ex: send_ops_flags asks for operations mroce does not offer (bind MW, local/send "
            "invalidate, TSO, atomic write) (errno EOPNOTSUPP)");
        errno = EOPNOTSUPP;
        return nullptr;
    }
    ibv_qp_cap& cap = a->cap;
    const char* bad = nullptr;
    if (cap.max_send_wr > 65536) bad = "max_send_wr above 65536";
    else if (!a->srq && cap.max_recv_wr > (1u << 20)) bad = "max_recv_wr above 1048576";
    else if (cap.max_send_sge > ec.max_send_sge) bad = "max_send_sge above the device's max_send_sge (config key)";
    else if (!a->srq && cap.max_recv_sge > ec.max_recv_sge) bad = "max_recv_sge above the device's max_recv_sge (config key)";
    else if (cap.max_inline_data > ec.max_inline) bad = "max_inline_data above the device's max_inline (config key)";
    if (bad) {
        say(std::string("ibv_create_qp: ") + bad + " (errno EINVAL)");
        errno = EINVAL;
        return nullptr;
    }
    auto* q = new (std::nothrow) Qp;
    if (!q) {
        errno = ENOMEM;
        return nullptr;
    }
    q->ctx = &c;
    q->pd = pd_of(a->pd);
    q->send_cq = cq_of(a->send_cq);
    q->recv_cq = cq_of(a->recv_cq ? a->recv_cq : a->send_cq);
    q->srq = a->srq ? srq_of(a->srq) : nullptr;
    q->sq_sig_all = a->sq_sig_all != 0;
    // What the QP holds is what was asked, with the floors verbs reports.
    cap.max_send_wr = std::max<uint32_t>(cap.max_send_wr, 1);
    cap.max_send_sge = std::max<uint32_t>(cap.max_send_sge, 1);
    if (a->srq) cap.max_recv_wr = cap.max_recv_sge = 0;
    else {
        cap.max_recv_wr = std::max<uint32_t>(cap.max_recv_wr, 1);
        cap.max_recv_sge = std::max<uint32_t>(cap.max_recv_sge, 1);
    }
    q->cap = cap;
    ibv_qp& b = *q->ibqp();
    b.context = ctx;
    b.qp_context = a->qp_context;
    b.pd = a->pd;
    b.send_cq = a->send_cq;
    b.recv_cq = a->recv_cq;
    b.srq = a->srq;
    b.qp_type = IBV_QPT_RC;
    b.state = IBV_QPS_RESET;
    pthread_mutex_init(&b.mutex, nullptr);
    pthread_cond_init(&b.cond, nullptr);
    q->attr.qp_state = IBV_QPS_RESET;
    q->attr.cap = cap;
    q->attr.port_num = 1;
    q->attr.path_mtu = IBV_MTU_4096;
    install_qp_ex(*q);
    q->qpx.comp_mask = 0;
    {
        auto g = c.dev->lock();
        OpenDevice& od = *c.od;
        uint32_t n;
        do {
            n = od.next_qpn++ & 0xffffff;
        } while (n < 2 || n > kMaxStreamId || od.qp_of_num.count(n));
        b.qp_num = b.handle = n;
        od.qp_of_num[n] = q;
    }
    return &b;
}

bool has(int mask, int bits) { return (mask & bits) == bits; }

// The connection every QP between this device and the peer's is a stream
// of: made by the first, reused by the others while it lives.
Connection connection_to(Context& c, uint32_t peer, const char* ip) {
    OpenDevice& od = *c.od;
    std::lock_guard<std::mutex> g(od.conn_mu);
    auto it = od.conn_of_peer.find(peer);
    if (it != od.conn_of_peer.end()) {
        const ConnState st = it->second.state();
        if (st == ConnState::established || st == ConnState::connecting) return it->second;
        od.conn_of_peer.erase(it);  // failed or closed: its QPs are in error; new ones get a new connection
    }
    Connection conn = c.dev->connect(ip, c.slot->udp_port);
    od.conn_of_peer[peer] = conn;
    return conn;
}

// The stream behind the QP, at RTR: connection to the peer's device, the
// stream with the QP's attributes, the receives posted in INIT.
int bind_stream(Qp& q, const ibv_qp_attr& a) {
    Context& c = *q.ctx;
    uint32_t peer = 0;
    std::string why;
    if (!peer_ipv4(*c.slot, a.ah_attr, peer, why)) {
        say("ibv_modify_qp to RTR: " + why + " (errno EINVAL)");
        return EINVAL;
    }
    const std::vector<uint32_t>& own = c.slot->plane_ipv4;
    if (std::find(own.begin(), own.end(), peer) != own.end()) {
        say("ibv_modify_qp to RTR: the peer is this device itself; a QP connected to its own device is not "
            "supported (errno EINVAL)");
        return EINVAL;
    }
    in_addr ia{htonl(peer)};
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &ia, ip, sizeof ip);
    // The stream id is the QPN of the end whose address is the lower, so both
    // ends name the same one. "Address": the GID each end gave the other
    // (the source GID index here, the destination GID there); with one GID
    // per plane, two ends that connect through plane 1 compare their plane-1
    // addresses, never a plane-0 address with a plane-1 one.
    const uint32_t local = a.ah_attr.is_global && a.ah_attr.grh.sgid_index < own.size()
                               ? own[a.ah_attr.grh.sgid_index]
                               : c.slot->ipv4;
    const uint32_t stream = local < peer ? q.ibqp()->qp_num : a.dest_qp_num;
    if (stream > kMaxStreamId) {
        say("ibv_modify_qp to RTR: dest_qp_num " + std::to_string(a.dest_qp_num) + " is not a 24-bit QP number");
        return EINVAL;
    }
    try {
        Connection conn = connection_to(c, peer, ip);
        StreamSpec sp;
        sp.id = stream;
        sp.pd = q.pd->id;
        sp.send_cq = q.send_cq->id;
        sp.recv_cq = q.recv_cq->id;
        sp.send_depth = q.cap.max_send_wr;
        sp.recv_depth = q.srq ? 0 : q.cap.max_recv_wr;
        sp.max_dest_rd_atomic = a.max_dest_rd_atomic;
        sp.srq = q.srq ? q.srq->id : 0;
        conn.create_stream(sp);
        q.conn = conn;
        q.stream = stream;
        q.bound = true;
        {
            auto g = c.dev->lock();
            c.od->qp_of_stream[uint64_t(conn.id()) << 32 | stream] = &q;
        }
    } catch (const std::exception& e) {
        say(std::string("ibv_modify_qp to RTR (peer ") + ip + "): " + e.what());
        return ECONNREFUSED;
    }
    for (const EarlyRecv& e : q.early) {
        RecvWr r;
        r.wr_id = e.wr_id;
        r.sg_list = e.sge.data();
        r.num_sge = uint32_t(e.sge.size());
        size_t posted = 0;
        if (c.dev->submit_recvs(q.conn.id(), q.stream, &r, 1, posted) != Status::ok) {
            say("ibv_modify_qp to RTR: a receive posted in INIT was refused by the stream");
            return EINVAL;
        }
    }
    q.early.clear();
    return 0;
}

void unbind_stream(Qp& q) {
    if (!q.bound) return;
    Context& c = *q.ctx;
    {
        auto g = c.dev->lock();
        c.od->qp_of_stream.erase(uint64_t(q.conn.id()) << 32 | q.stream);
    }
    try {
        q.conn.destroy_stream(q.stream);
    } catch (const std::exception&) {
        // The connection is gone already (released after an error): nothing left to free.
    }
    q.bound = false;
}

void set_state(Qp& q, ibv_qp_state s) {
    q.attr.qp_state = s;
    q.ibqp()->state = s;
}

int modify(Qp& q, ibv_qp_attr* a, int mask) {
    const ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? a->cur_qp_state : q.attr.qp_state;
    const ibv_qp_state to = (mask & IBV_QP_STATE) ? a->qp_state : cur;
    const char* missing = nullptr;
    if (to == IBV_QPS_RESET) {
        unbind_stream(q);
        q.early.clear();
        set_state(q, IBV_QPS_RESET);
        return 0;
    }
    if (to == IBV_QPS_ERR) {
        if (q.bound) {
            try {
                q.conn.set_stream_error(q.stream);
            } catch (const std::exception&) {
            }
        }
        set_state(q, IBV_QPS_ERR);
        return 0;
    }
    if (cur == IBV_QPS_RESET && to == IBV_QPS_INIT) {
        if (!has(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
            missing = "RESET->INIT needs IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS";
    } else if (cur == IBV_QPS_INIT && to == IBV_QPS_INIT) {
    } else if (cur == IBV_QPS_INIT && to == IBV_QPS_RTR) {
        if (!has(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
            missing = "INIT->RTR needs IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | "
                      "IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER";
    } else if (cur == IBV_QPS_RTR && to == IBV_QPS_RTS) {
        if (!has(mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_MAX_QP_RD_ATOMIC))
            missing = "RTR->RTS needs IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | "
                      "IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC";
    } else if (cur == IBV_QPS_RTS && to == IBV_QPS_RTS) {
    } else {
        say(std::string("ibv_modify_qp: transition ") + std::to_string(cur) + " -> " + std::to_string(to) +
            " is not supported (RESET->INIT->RTR->RTS, RTS->RTS, any->ERR, any->RESET) (errno EINVAL)");
        return EINVAL;
    }
    if (missing) {
        say(std::string("ibv_modify_qp: ") + missing + " (errno EINVAL)");
        return EINVAL;
    }
    if ((mask & IBV_QP_PORT) && a->port_num != 1) return EINVAL;
    if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0) return EINVAL;
    if (to == IBV_QPS_RTR && !q.bound) {
        if (const int e = bind_stream(q, *a)) return e;
    }
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && q.bound) {
        try {
            q.conn.set_max_rd_atomic(q.stream, a->max_rd_atomic);
        } catch (const std::exception& e) {
            say(std::string("ibv_modify_qp: ") + e.what());
            return EINVAL;
        }
    }
    // Keep what was set, for ibv_query_qp (the transport's own timers, retry
    // counts and segment size are the device's: doc/verbs.md).
    ibv_qp_attr& s = q.attr;
    if (mask & IBV_QP_ACCESS_FLAGS) s.qp_access_flags = a->qp_access_flags;
    if (mask & IBV_QP_PKEY_INDEX) s.pkey_index = a->pkey_index;
    if (mask & IBV_QP_PORT) s.port_num = a->port_num;
    if (mask & IBV_QP_AV) s.ah_attr = a->ah_attr;
    if (mask & IBV_QP_PATH_MTU) s.path_mtu = a->path_mtu;
    if (mask & IBV_QP_DEST_QPN) s.dest_qp_num = a->dest_qp_num;
    if (mask & IBV_QP_RQ_PSN) s.rq_psn = a->rq_psn;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s.max_dest_rd_atomic = a->max_dest_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) s.min_rnr_timer = a->min_rnr_timer;
    if (mask & IBV_QP_SQ_PSN) s.sq_psn = a->sq_psn;
    if (mask & IBV_QP_TIMEOUT) s.timeout = a->timeout;
    if (mask & IBV_QP_RETRY_CNT) s.retry_cnt = a->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) s.rnr_retry = a->rnr_retry;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) s.max_rd_atomic = a->max_rd_atomic;
    set_state(q, to);
    return 0;
}

}  // namespace

void install_qp_create(Context& c) { c.vctx.create_qp_ex = create_qp_ex_op; }

}  // namespace mroce::verbs

using namespace mroce;
using namespace mroce::verbs;

extern "C" {

MROCE_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_create_qp, "IBVERBS_1.1");
        return f ? f(pd, attr) : nullptr;
    }
    ibv_qp_init_attr_ex ax{};
    ax.qp_context = attr->qp_context;
    ax.send_cq = attr->send_cq;
    ax.recv_cq = attr->recv_cq;
    ax.srq = attr->srq;
    ax.cap = attr->cap;
    ax.qp_type = attr->qp_type;
    ax.sq_sig_all = attr->sq_sig_all;
    ax.comp_mask = IBV_QP_INIT_ATTR_PD;
    ax.pd = pd;
    ibv_qp* q = pd->context == nullptr ? nullptr : ctx_of(pd->context)->vctx.create_qp_ex(pd->context, &ax);
    if (q) attr->cap = ax.cap;
    return q;
}

MROCE_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_qp_to_qp_ex, "IBVERBS_1.6");
        return f ? f(qp) : nullptr;
    }
    return &qp_of(qp)->qpx;
}

MROCE_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_modify_qp, "IBVERBS_1.1");
        return f ? f(qp, attr, mask) : ENOSYS;
    }
    return modify(*qp_of(qp), attr, mask);
}

MROCE_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_query_qp, "IBVERBS_1.1");
        return f ? f(qp, attr, mask, init) : ENOSYS;
    }
    Qp& q = *qp_of(qp);
    if (attr) {
        *attr = q.attr;
        attr->cap = q.cap;
    }
    if (init) {
        std::memset(init, 0, sizeof *init);
        init->qp_context = qp->qp_context;
        init->send_cq = qp->send_cq;
        init->recv_cq = qp->recv_cq;
        init->srq = qp->srq;
        init->cap = q.cap;
        init->qp_type = IBV_QPT_RC;
        init->sq_sig_all = q.sq_sig_all;
    }
    return 0;
}

// mroce places every packet as it lands: data is never guaranteed in order.
MROCE_EXPORT int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, uint32_t flags) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_query_qp_data_in_order, "IBVERBS_1.14");
        return f ? f(qp, op, flags) : 0;
    }
    return 0;
}

MROCE_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_destroy_qp, "IBVERBS_1.1");
        return f ? f(qp) : ENOSYS;
    }
    Qp* q = qp_of(qp);
    unbind_stream(*q);
    {
        auto g = q->ctx->dev->lock();
        q->ctx->od->qp_of_num.erase(qp->qp_num);
    }
    pthread_mutex_destroy(&qp->mutex);
    pthread_cond_destroy(&qp->cond);
    delete q;
    return 0;
}

}  // extern "C"
