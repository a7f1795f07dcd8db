// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Protection domains, memory regions, completion queues and channels, shared
// receive queues (doc/verbs.md), and every other public libibverbs call:
// those mroce has no meaning for fail on mroce's objects with a documented
// errno, and go to the real library for a real device's.
#include <fcntl.h>
#include <poll.h>

#include <cstring>

#include "exports.hpp"
#include "provider.hpp"
#include "real_verbs.hpp"

namespace mroce::verbs {

namespace {

uint32_t access_of(unsigned int a) {
    uint32_t r = 0;
    if (a & IBV_ACCESS_LOCAL_WRITE) r |= kAccessLocalWrite;
    if (a & IBV_ACCESS_REMOTE_WRITE) r |= kAccessRemoteWrite;
    if (a & IBV_ACCESS_REMOTE_READ) r |= kAccessRemoteRead;
    if (a & IBV_ACCESS_REMOTE_ATOMIC) r |= kAccessRemoteAtomic;
    return r;
}

// Access flags mroce honours, and those that change nothing here (memory is
// the process's own, always resident): anything else is refused.
constexpr unsigned kAccessKnown = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE;

ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
    Context& c = *ctx_of(pd->context);
    if (iova != reinterpret_cast<uintptr_t>(addr)) {
        say("ibv_reg_mr_iova: an iova other than the buffer's address is not supported (remote addresses are "
            "virtual addresses) (errno EOPNOTSUPP)");
        errno = EOPNOTSUPP;
        return nullptr;
    }
    if (access & ~kAccessKnown) {
        say("ibv_reg_mr: access flags " + std::to_string(access & ~kAccessKnown) +
            " (memory windows, zero-based, on-demand paging, ...) are not supported (errno EOPNOTSUPP)");
        errno = EOPNOTSUPP;
        return nullptr;
    }
    auto* m = new (std::nothrow) Mr;
    if (!m) {
        errno = ENOMEM;
        return nullptr;
    }
    try {
        m->reg = c.dev->register_mr(pd_of(pd)->id, addr, length, access_of(access));
    } catch (const std::exception& e) {
        say(std::string("ibv_reg_mr: ") + e.what());
        delete m;
        errno = EINVAL;
        return nullptr;
    }
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.handle = m->reg.lkey;
    m->mr.lkey = m->reg.lkey;
    m->mr.rkey = m->reg.rkey;
    return &m->mr;
}

void bind_cq_id(OpenDevice& od, uint32_t id, Cq* cq) {
    if (od.cq_of_id.size() < id) od.cq_of_id.resize(id, nullptr);
    od.cq_of_id[id - 1] = cq;
}

}  // namespace

}  // namespace mroce::verbs

using namespace mroce;
using namespace mroce::verbs;

// Declared by rdma-core's headers other than verbs.h (or not at all): the
// real library's exports that the provider passes through.
extern "C" {
struct ib_user_path_rec;
struct ibv_kern_path_rec;
struct ib_uverbs_qp_attr;
struct ib_uverbs_ah_attr;
}

extern "C" {

// ---- protection domains ----

MROCE_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_alloc_pd, "IBVERBS_1.1");
        return f ? f(ctx) : nullptr;
    }
    auto* p = new (std::nothrow) Pd;
    if (!p) {
        errno = ENOMEM;
        return nullptr;
    }
    try {
        p->id = ctx_of(ctx)->dev->alloc_pd();
    } catch (const std::exception& e) {
        say(std::string("ibv_alloc_pd: ") + e.what());
        delete p;
        errno = ENOMEM;
        return nullptr;
    }
    p->pd.context = ctx;
    p->pd.handle = p->id;
    return &p->pd;
}

MROCE_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_dealloc_pd, "IBVERBS_1.1");
        return f ? f(pd) : ENOSYS;
    }
    delete pd_of(pd);  // the engine's PD ids are names only; nothing to free there
    return 0;
}

// ---- memory regions ----

MROCE_EXPORT ibv_mr* (ibv_reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_reg_mr, "IBVERBS_1.1");
        return f ? f(pd, addr, length, access) : nullptr;
    }
    return reg_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr), unsigned(access));
}

MROCE_EXPORT ibv_mr* (ibv_reg_mr_iova)(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_reg_mr_iova, "IBVERBS_1.7");
        return f ? f(pd, addr, length, iova, access) : nullptr;
    }
    return reg_mr(pd, addr, length, iova, unsigned(access));
}

MROCE_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_reg_mr_iova2, "IBVERBS_1.8");
        return f ? f(pd, addr, length, iova, access) : nullptr;
    }
    return reg_mr(pd, addr, length, iova, access);
}

MROCE_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_reg_dmabuf_mr, "IBVERBS_1.12");
        return f ? f(pd, offset, length, iova, fd, access) : nullptr;
    }
    errno = EOPNOTSUPP;  // NCCL probes with fd -1 and takes EOPNOTSUPP as "no dmabuf"
    return nullptr;
}

MROCE_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
    if (!mr || !is_ours(mr->context)) {
        auto f = MROCE_REAL(ibv_rereg_mr, "IBVERBS_1.1");
        return f ? f(mr, flags, pd, addr, length, access) : IBV_REREG_MR_ERR_INPUT;
    }
    say("ibv_rereg_mr is not supported: deregister and register again");
    errno = EOPNOTSUPP;
    return IBV_REREG_MR_ERR_INPUT;
}

MROCE_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
    if (!mr || !is_ours(mr->context)) {
        auto f = MROCE_REAL(ibv_dereg_mr, "IBVERBS_1.1");
        return f ? f(mr) : ENOSYS;
    }
    Mr* m = mr_of(mr);
    try {
        ctx_of(mr->context)->dev->deregister_mr(m->reg);
    } catch (const TimeoutError& e) {   // the NIC still reads it: try again later
        say(std::string("ibv_dereg_mr: ") + e.what());
        return EBUSY;
    } catch (const std::exception& e) {
        say(std::string("ibv_dereg_mr: ") + e.what());
        return EINVAL;
    }
    delete m;
    return 0;
}

// ---- completion channels and queues ----

MROCE_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_create_comp_channel, "IBVERBS_1.0");
        return f ? f(ctx) : nullptr;
    }
    auto* ch = new (std::nothrow) Channel;
    if (!ch) {
        errno = ENOMEM;
        return nullptr;
    }
    try {
        ch->cc = &ctx_of(ctx)->dev->create_comp_channel();
    } catch (const std::exception& e) {
        say(std::string("ibv_create_comp_channel: ") + e.what());
        delete ch;
        errno = EMFILE;
        return nullptr;
    }
    ch->ch.context = ctx;
    ch->ch.fd = ch->cc->fd();
    // Blocking, as rdma-core's channel fd: O_NONBLOCK is the program's to set
    // (ibv_get_cq_event then answers EAGAIN).
    const int fl = ::fcntl(ch->ch.fd, F_GETFL);
    if (fl >= 0) (void)::fcntl(ch->ch.fd, F_SETFL, fl & ~O_NONBLOCK);
    ch->ch.refcnt = 0;
    return &ch->ch;
}

MROCE_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
    if (!ch || !is_ours(ch->context)) {
        auto f = MROCE_REAL(ibv_destroy_comp_channel, "IBVERBS_1.0");
        return f ? f(ch) : ENOSYS;
    }
    if (ch->refcnt) return EBUSY;
    // The device's CompletionChannel lives as long as the device.
    delete channel_of(ch);
    return 0;
}

MROCE_EXPORT ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                                   int comp_vector) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_create_cq, "IBVERBS_1.1");
        return f ? f(ctx, cqe, cq_context, channel, comp_vector) : nullptr;
    }
    Context& c = *ctx_of(ctx);
    if (cqe < 1 || cqe > (1 << 22) || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors ||
        (channel && channel->context != ctx)) {
        errno = EINVAL;
        return nullptr;
    }
    auto* q = new (std::nothrow) Cq;
    if (!q) {
        errno = ENOMEM;
        return nullptr;
    }
    try {
        q->id = c.dev->create_cq(uint32_t(cqe), channel ? channel_of(channel)->cc : nullptr);
    } catch (const std::exception& e) {
        say(std::string("ibv_create_cq: ") + e.what());
        delete q;
        errno = ENOMEM;
        return nullptr;
    }
    q->ctx = &c;
    ibv_cq& b = q->cq;
    b.context = ctx;
    b.channel = channel;
    b.cq_context = cq_context;
    b.handle = q->id;
    b.cqe = cqe;
    pthread_mutex_init(&b.mutex, nullptr);
    pthread_cond_init(&b.cond, nullptr);
    if (channel) ++channel->refcnt;
    {
        auto g = c.dev->lock();
        bind_cq_id(*c.od, q->id, q);
    }
    return &b;
}

MROCE_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
    if (!cq || !is_ours(cq->context)) {
        auto f = MROCE_REAL(ibv_resize_cq, "IBVERBS_1.1");
        return f ? f(cq, cqe) : ENOSYS;
    }
    if (cqe >= 1 && cqe <= cq->cqe) return 0;  // it already holds that many
    say("ibv_resize_cq: growing a CQ is not supported; create it with the depth needed (errno EOPNOTSUPP)");
    return EOPNOTSUPP;
}

MROCE_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
    if (!cq || !is_ours(cq->context)) {
        auto f = MROCE_REAL(ibv_destroy_cq, "IBVERBS_1.1");
        return f ? f(cq) : ENOSYS;
    }
    Cq* q = cq_of(cq);
    Context& c = *q->ctx;
    {
        auto g = c.dev->lock();
        for (const auto& [num, qp] : c.od->qp_of_num)
            if (qp->send_cq == q || qp->recv_cq == q) return EBUSY;
        bind_cq_id(*c.od, q->id, nullptr);
    }
    // The engine keeps the CQ's slot until the device closes (doc/verbs.md).
    if (cq->channel) --cq->channel->refcnt;
    pthread_mutex_destroy(&cq->mutex);
    pthread_cond_destroy(&cq->cond);
    delete q;
    return 0;
}

MROCE_EXPORT int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context) {
    if (!ch || !is_ours(ch->context)) {
        auto f = MROCE_REAL(ibv_get_cq_event, "IBVERBS_1.1");
        return f ? f(ch, cq, cq_context) : -1;
    }
    Context& c = *ctx_of(ch->context);
    c.dev->stop_driving();  // this thread blocks: the engine thread takes the loop now
    for (;;) {
        uint32_t id = 0;
        if (!channel_of(ch)->cc->get_event(id, 0)) {
            // As rdma-core's read() of the channel: O_NONBLOCK on its fd
            // (programs that epoll it set that) gives -1 with EAGAIN ...
            const int fl = ::fcntl(ch->fd, F_GETFL);
            if (fl >= 0 && (fl & O_NONBLOCK)) {
                errno = EAGAIN;
                return -1;
            }
            // ... and a signal ends the wait with -1 (qperf stops its test
            // from a SIGALRM handler this way).
            pollfd p{ch->fd, POLLIN, 0};
            if (::poll(&p, 1, -1) < 0 && errno == EINTR) return -1;
            continue;
        }
        Cq* q = nullptr;
        {
            auto g = c.dev->lock();
            if (id >= 1 && id <= c.od->cq_of_id.size()) q = c.od->cq_of_id[id - 1];
        }
        if (!q) continue;  // its CQ was destroyed meanwhile
        *cq = &q->cq;
        *cq_context = q->cq.cq_context;
        return 0;
    }
}

MROCE_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
    if (!cq || !is_ours(cq->context)) {
        if (auto f = MROCE_REAL(ibv_ack_cq_events, "IBVERBS_1.1")) f(cq, nevents);
        return;
    }
    try {
        cq_of(cq)->ctx->dev->ack_cq_events(cq_of(cq)->id, nevents);
    } catch (const std::exception& e) {
        say(std::string("ibv_ack_cq_events: ") + e.what());
    }
}

// ---- shared receive queues ----

MROCE_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_create_srq, "IBVERBS_1.1");
        return f ? f(pd, attr) : nullptr;
    }
    Context& c = *ctx_of(pd->context);
    const uint32_t max_sge = c.dev->config().engine.max_recv_sge;
    if (!attr || attr->attr.max_wr < 1 || attr->attr.max_wr > (1u << 20) || attr->attr.max_sge > max_sge ||
        attr->attr.srq_limit > attr->attr.max_wr) {
        errno = EINVAL;
        return nullptr;
    }
    auto* s = new (std::nothrow) Srq;
    if (!s) {
        errno = ENOMEM;
        return nullptr;
    }
    try {
        s->id = c.dev->create_srq(pd_of(pd)->id, attr->attr.max_wr);
        if (attr->attr.srq_limit) c.dev->arm_srq_limit(s->id, attr->attr.srq_limit);
    } catch (const std::exception& e) {
        say(std::string("ibv_create_srq: ") + e.what());
        delete s;
        errno = ENOMEM;
        return nullptr;
    }
    s->ctx = &c;
    s->max_wr = attr->attr.max_wr;
    s->max_sge = std::max<uint32_t>(attr->attr.max_sge, 1);
    s->limit = attr->attr.srq_limit;
    attr->attr.max_sge = s->max_sge;
    s->srq.context = pd->context;
    s->srq.srq_context = attr->srq_context;
    s->srq.pd = pd;
    s->srq.handle = s->id;
    pthread_mutex_init(&s->srq.mutex, nullptr);
    pthread_cond_init(&s->srq.cond, nullptr);
    {
        auto g = c.dev->lock();
        if (c.od->srq_of_id.size() < s->id) c.od->srq_of_id.resize(s->id, nullptr);
        c.od->srq_of_id[s->id - 1] = s;
    }
    return &s->srq;
}

MROCE_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
    if (!srq || !is_ours(srq->context)) {
        auto f = MROCE_REAL(ibv_modify_srq, "IBVERBS_1.1");
        return f ? f(srq, attr, mask) : ENOSYS;
    }
    Srq& s = *srq_of(srq);
    if (mask & IBV_SRQ_MAX_WR) {
        say("ibv_modify_srq: resizing an SRQ is not supported (errno EINVAL)");
        return EINVAL;
    }
    if (mask & IBV_SRQ_LIMIT) {
        if (attr->srq_limit > s.max_wr) return EINVAL;
        try {
            s.ctx->dev->arm_srq_limit(s.id, attr->srq_limit);
        } catch (const std::exception& e) {
            say(std::string("ibv_modify_srq: ") + e.what());
            return EINVAL;
        }
        s.limit = attr->srq_limit;
    }
    return 0;
}

MROCE_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
    if (!srq || !is_ours(srq->context)) {
        auto f = MROCE_REAL(ibv_query_srq, "IBVERBS_1.1");
        return f ? f(srq, attr) : ENOSYS;
    }
    const Srq& s = *srq_of(srq);
    attr->max_wr = s.max_wr;
    attr->max_sge = s.max_sge;
    attr->srq_limit = s.limit;
    return 0;
}

MROCE_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
    if (!srq || !is_ours(srq->context)) {
        auto f = MROCE_REAL(ibv_destroy_srq, "IBVERBS_1.1");
        return f ? f(srq) : ENOSYS;
    }
    Srq* s = srq_of(srq);
    try {
        s->ctx->dev->destroy_srq(s->id);
    } catch (const std::exception& e) {
        say(std::string("ibv_destroy_srq: ") + e.what());
        return EBUSY;
    }
    {
        auto g = s->ctx->dev->lock();
        s->ctx->od->srq_of_id[s->id - 1] = nullptr;
    }
    pthread_mutex_destroy(&srq->mutex);
    pthread_cond_destroy(&srq->cond);
    delete s;
    return 0;
}

// ---- what mroce has no meaning for (UD address handles, multicast, ECE, imports) ----

MROCE_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_create_ah, "IBVERBS_1.1");
        return f ? f(pd, attr) : nullptr;
    }
    say("ibv_create_ah: address handles serve UD QPs, which mroce does not offer (errno EOPNOTSUPP)");
    errno = EOPNOTSUPP;
    return nullptr;
}

MROCE_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
    auto f = MROCE_REAL(ibv_destroy_ah, "IBVERBS_1.1");
    return f ? f(ah) : ENOSYS;  // mroce never hands out an ibv_ah
}

MROCE_EXPORT int ibv_init_ah_from_wc(ibv_context* ctx, uint8_t port, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* ah) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_init_ah_from_wc, "IBVERBS_1.1");
        return f ? f(ctx, port, wc, grh, ah) : ENOSYS;
    }
    return EOPNOTSUPP;
}

MROCE_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_create_ah_from_wc, "IBVERBS_1.1");
        return f ? f(pd, wc, grh, port) : nullptr;
    }
    errno = EOPNOTSUPP;
    return nullptr;
}

MROCE_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context* ctx, ibv_ah_attr* attr, uint8_t eth_mac[6], uint16_t* vid) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_resolve_eth_l2_from_gid, "IBVERBS_1.1");
        return f ? f(ctx, attr, eth_mac, vid) : ENOSYS;
    }
    return EOPNOTSUPP;
}

MROCE_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_attach_mcast, "IBVERBS_1.1");
        return f ? f(qp, gid, lid) : ENOSYS;
    }
    return EOPNOTSUPP;
}

MROCE_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_detach_mcast, "IBVERBS_1.1");
        return f ? f(qp, gid, lid) : ENOSYS;
    }
    return EOPNOTSUPP;
}

MROCE_EXPORT int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_query_ece, "IBVERBS_1.10");
        return f ? f(qp, ece) : EOPNOTSUPP;
    }
    return EOPNOTSUPP;
}

MROCE_EXPORT int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) {
    if (!qp || !is_ours(qp->context)) {
        auto f = MROCE_REAL(ibv_set_ece, "IBVERBS_1.10");
        return f ? f(qp, ece) : EOPNOTSUPP;
    }
    return EOPNOTSUPP;
}

MROCE_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
    auto f = MROCE_REAL(ibv_import_device, "IBVERBS_1.10");
    return f ? f(cmd_fd) : nullptr;  // mroce contexts have no command fd to share
}

MROCE_EXPORT ibv_pd* ibv_import_pd(ibv_context* ctx, uint32_t handle) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_import_pd, "IBVERBS_1.10");
        return f ? f(ctx, handle) : nullptr;
    }
    errno = EOPNOTSUPP;
    return nullptr;
}

MROCE_EXPORT void ibv_unimport_pd(ibv_pd* pd) {
    if (pd && !is_ours(pd->context))
        if (auto f = MROCE_REAL(ibv_unimport_pd, "IBVERBS_1.10")) f(pd);
}

MROCE_EXPORT ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t handle) {
    if (!pd || !is_ours(pd->context)) {
        auto f = MROCE_REAL(ibv_import_mr, "IBVERBS_1.10");
        return f ? f(pd, handle) : nullptr;
    }
    errno = EOPNOTSUPP;
    return nullptr;
}

MROCE_EXPORT void ibv_unimport_mr(ibv_mr* mr) {
    if (mr && !is_ours(mr->context))
        if (auto f = MROCE_REAL(ibv_unimport_mr, "IBVERBS_1.10")) f(mr);
}

MROCE_EXPORT ibv_dm* ibv_import_dm(ibv_context* ctx, uint32_t handle) {
    if (!is_ours(ctx)) {
        auto f = MROCE_REAL(ibv_import_dm, "IBVERBS_1.13");
        return f ? f(ctx, handle) : nullptr;
    }
    errno = EOPNOTSUPP;
    return nullptr;
}

MROCE_EXPORT void ibv_unimport_dm(ibv_dm* dm) {
    if (auto f = MROCE_REAL(ibv_unimport_dm, "IBVERBS_1.13")) f(dm);  // mroce never hands out an ibv_dm
}

// ---- process-wide calls with no device: the real library's when it is there ----

MROCE_EXPORT int ibv_fork_init(void) {
    auto f = MROCE_REAL(ibv_fork_init, "IBVERBS_1.1");
    return f ? f() : 0;  // mroce's memory is ordinary process memory: fork needs nothing
}

MROCE_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
    auto f = MROCE_REAL(ibv_is_fork_initialized, "IBVERBS_1.13");
    return f ? f() : IBV_FORK_UNNEEDED;
}

MROCE_EXPORT int ibv_dontfork_range(void* base, size_t size) {
    auto f = MROCE_REAL(ibv_dontfork_range, "IBVERBS_1.1");
    return f ? f(base, size) : 0;
}

MROCE_EXPORT int ibv_dofork_range(void* base, size_t size) {
    auto f = MROCE_REAL(ibv_dofork_range, "IBVERBS_1.1");
    return f ? f(base, size) : 0;
}

MROCE_EXPORT int ibv_rate_to_mult(ibv_rate rate) {
    auto f = MROCE_REAL(ibv_rate_to_mult, "IBVERBS_1.0");
    return f ? f(rate) : -1;
}

MROCE_EXPORT ibv_rate mult_to_ibv_rate(int mult) {
    auto f = MROCE_REAL(mult_to_ibv_rate, "IBVERBS_1.0");
    return f ? f(mult) : IBV_RATE_MAX;
}

MROCE_EXPORT int ibv_rate_to_mbps(ibv_rate rate) {
    auto f = MROCE_REAL(ibv_rate_to_mbps, "IBVERBS_1.1");
    return f ? f(rate) : -1;
}

MROCE_EXPORT ibv_rate mbps_to_ibv_rate(int mbps) {
    auto f = MROCE_REAL(mbps_to_ibv_rate, "IBVERBS_1.1");
    return f ? f(mbps) : IBV_RATE_MAX;
}

}  // extern "C"
