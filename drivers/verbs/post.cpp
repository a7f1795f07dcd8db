// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The verbs data path: ibv_post_send / ibv_post_recv / ibv_post_srq_recv,
// ibv_poll_cq, ibv_req_notify_cq (rdma-core's inline functions call them
// through context->ops) and the ibv_wr_* builders of ibv_qp_ex. Work
// requests are translated on the stack and handed to the engine in bursts
// under one device lock; ibv_sge is laid out as mroce::Sge, so scatter/gather
// lists pass through without a copy. No allocation per work request (the
// ibv_wr_* batch reuses its vectors' capacity).
#include <cstring>

#include "provider.hpp"

namespace mroce::verbs {

static_assert(sizeof(Sge) == sizeof(ibv_sge) && offsetof(Sge, addr) == offsetof(ibv_sge, addr) &&
                  offsetof(Sge, length) == offsetof(ibv_sge, length) && offsetof(Sge, lkey) == offsetof(ibv_sge, lkey),
              "ibv_sge and mroce::Sge must share a layout: lists are passed through");

namespace {

constexpr size_t kBurst = 32;

bool can_send(const Qp& q) noexcept {
    const ibv_qp_state s = q.attr.qp_state;
    return q.bound && (s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE || s == IBV_QPS_ERR);
}

// One ibv_send_wr as the engine's SendWr; an errno if verbs refuses it here.
int to_send_wr(const Qp& q, const ibv_send_wr& w, SendWr& o) noexcept {
    o = SendWr{};
    o.wr_id = w.wr_id;
    switch (w.opcode) {
    case IBV_WR_SEND: o.op = OpKind::send; break;
    case IBV_WR_SEND_WITH_IMM: o.op = OpKind::send_imm; break;
    case IBV_WR_RDMA_WRITE: o.op = OpKind::write; break;
    case IBV_WR_RDMA_WRITE_WITH_IMM: o.op = OpKind::write_imm; break;
    case IBV_WR_RDMA_READ: o.op = OpKind::read; break;
    case IBV_WR_ATOMIC_CMP_AND_SWP: o.op = OpKind::atomic_cas; break;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: o.op = OpKind::atomic_fadd; break;
    default: return EINVAL;  // LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO, ATOMIC_WRITE, DRIVER1 (doc/verbs.md)
    }
    if (w.num_sge < 0 || uint32_t(w.num_sge) > q.cap.max_send_sge) return EINVAL;
    o.signaled = q.sq_sig_all || (w.send_flags & IBV_SEND_SIGNALED);
    o.solicited = w.send_flags & IBV_SEND_SOLICITED;
    o.inline_data = w.send_flags & IBV_SEND_INLINE;
    if (o.inline_data) {
        size_t total = 0;
        for (int i = 0; i < w.num_sge; ++i) total += w.sg_list[i].length;
        if (total > q.cap.max_inline_data) return EINVAL;
    }
    o.sg_list = reinterpret_cast<const Sge*>(w.sg_list);
    o.num_sge = uint32_t(w.num_sge);
    if (o.op == OpKind::atomic_cas || o.op == OpKind::atomic_fadd) {
        o.remote_addr = w.wr.atomic.remote_addr;
        o.rkey = w.wr.atomic.rkey;
        o.compare_add = w.wr.atomic.compare_add;
        o.swap = w.wr.atomic.swap;
    } else if (o.op != OpKind::send && o.op != OpKind::send_imm) {
        o.remote_addr = w.wr.rdma.remote_addr;
        o.rkey = w.wr.rdma.rkey;
    }
    // Immediate data is opaque big-endian bytes end to end: carried as is.
    if (o.op == OpKind::send_imm || o.op == OpKind::write_imm) o.imm = w.imm_data;
    return 0;
}

int post_send_op(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
    Qp& q = *qp_of(ibqp);
    if (!can_send(q)) {
        *bad = wr;
        return EINVAL;
    }
    SendWr buf[kBurst];
    ibv_send_wr* src[kBurst];
    Device& d = *q.ctx->dev;
    while (wr) {
        size_t n = 0;
        int err = 0;
        for (; wr && n < kBurst; wr = wr->next) {
            if ((err = to_send_wr(q, *wr, buf[n])) != 0) break;
            src[n++] = wr;
        }
        size_t posted = 0;
        const Status s = n ? d.submit_sends(q.conn.id(), q.stream, buf, n, posted) : Status::ok;
        if (s != Status::ok) {
            *bad = src[posted];
            return errno_of(s);
        }
        if (err) {
            *bad = wr;
            return err;
        }
    }
    return 0;
}

RecvWr to_recv_wr(const ibv_recv_wr& w) noexcept {
    RecvWr r;
    r.wr_id = w.wr_id;
    r.sg_list = reinterpret_cast<const Sge*>(w.sg_list);
    r.num_sge = uint32_t(w.num_sge);
    return r;
}

// A receive chain before RTR: kept (its lists copied) until the stream exists.
int keep_early(Qp& q, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    for (; wr; wr = wr->next) {
        if (q.early.size() >= q.cap.max_recv_wr || wr->num_sge < 0 || uint32_t(wr->num_sge) > q.cap.max_recv_sge) {
            *bad = wr;
            return q.early.size() >= q.cap.max_recv_wr ? ENOMEM : EINVAL;
        }
        EarlyRecv e;
        e.wr_id = wr->wr_id;
        e.sge.assign(reinterpret_cast<const Sge*>(wr->sg_list), reinterpret_cast<const Sge*>(wr->sg_list) + wr->num_sge);
        q.early.push_back(std::move(e));
    }
    return 0;
}

// Posts a receive chain with submit (a stream's queue or an SRQ) in bursts.
template <class Submit>
int post_recv_chain(ibv_recv_wr* wr, ibv_recv_wr** bad, uint32_t max_sge, Submit submit) {
    RecvWr buf[kBurst];
    ibv_recv_wr* src[kBurst];
    while (wr) {
        size_t n = 0;
        int err = 0;
        for (; wr && n < kBurst; wr = wr->next) {
            if (wr->num_sge < 0 || uint32_t(wr->num_sge) > max_sge) {
                err = EINVAL;
                break;
            }
            buf[n] = to_recv_wr(*wr);
            src[n++] = wr;
        }
        size_t posted = 0;
        const Status s = n ? submit(buf, n, posted) : Status::ok;
        if (s != Status::ok) {
            *bad = src[posted];
            return errno_of(s);
        }
        if (err) {
            *bad = wr;
            return err;
        }
    }
    return 0;
}

int post_recv_op(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    Qp& q = *qp_of(ibqp);
    if (q.srq || q.attr.qp_state == IBV_QPS_RESET) {
        *bad = wr;
        return EINVAL;
    }
    if (!q.bound) return keep_early(q, wr, bad);
    Device& d = *q.ctx->dev;
    return post_recv_chain(wr, bad, q.cap.max_recv_sge, [&](const RecvWr* w, size_t n, size_t& posted) {
        return d.submit_recvs(q.conn.id(), q.stream, w, n, posted);
    });
}

int post_srq_recv_op(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    Srq& s = *srq_of(ibsrq);
    Device& d = *s.ctx->dev;
    return post_recv_chain(wr, bad, s.max_sge, [&](const RecvWr* w, size_t n, size_t& posted) {
        return d.submit_srq_recvs(s.id, w, n, posted);
    });
}

ibv_wc_status wc_status(WcStatus s) noexcept {
    switch (s) {
    case WcStatus::success: return IBV_WC_SUCCESS;
    case WcStatus::loc_len_err: return IBV_WC_LOC_LEN_ERR;
    case WcStatus::loc_prot_err: return IBV_WC_LOC_PROT_ERR;
    case WcStatus::rem_access_err: return IBV_WC_REM_ACCESS_ERR;
    case WcStatus::rem_inv_req_err: return IBV_WC_REM_INV_REQ_ERR;
    case WcStatus::rem_op_err: return IBV_WC_REM_OP_ERR;
    case WcStatus::wr_flush_err: return IBV_WC_WR_FLUSH_ERR;
    case WcStatus::transport_err: return IBV_WC_RETRY_EXC_ERR;  // the peer silent past conn_timeout
    case WcStatus::rnr_retry_exc_err: return IBV_WC_RNR_RETRY_EXC_ERR;
    }
    return IBV_WC_GENERAL_ERR;
}

ibv_wc_opcode wc_opcode(WcOpcode o) noexcept {
    switch (o) {
    case WcOpcode::send: return IBV_WC_SEND;
    case WcOpcode::write: return IBV_WC_RDMA_WRITE;
    case WcOpcode::read: return IBV_WC_RDMA_READ;
    case WcOpcode::atomic_cas: return IBV_WC_COMP_SWAP;
    case WcOpcode::atomic_fadd: return IBV_WC_FETCH_ADD;
    case WcOpcode::recv: return IBV_WC_RECV;
    case WcOpcode::recv_write_imm: return IBV_WC_RECV_RDMA_WITH_IMM;
    }
    return IBV_WC_SEND;
}

int poll_cq_op(ibv_cq* ibcq, int num, ibv_wc* wc) {
    Cq& c = *cq_of(ibcq);
    if (num <= 0) return num < 0 ? -EINVAL : 0;
    Device& d = *c.ctx->dev;
    OpenDevice& od = *c.ctx->od;
    Completion buf[kBurst];
    int got = 0;
    bool drove = false;
    auto g = d.lock();
    while (got < num) {
        const size_t n = d.engine().poll_cq(c.id, buf, std::min<size_t>(kBurst, size_t(num - got)));
        for (size_t i = 0; i < n; ++i) {
            const Completion& e = buf[i];
            ibv_wc& w = wc[got++];
            std::memset(&w, 0, sizeof w);
            w.wr_id = e.wr_id;
            w.status = wc_status(e.status);
            w.opcode = wc_opcode(e.opcode);
            w.byte_len = e.byte_len;
            if (e.has_imm) {
                w.imm_data = e.imm;
                w.wc_flags = IBV_WC_WITH_IMM;
            }
            auto it = od.qp_of_stream.find(uint64_t(e.conn) << 32 | e.stream);
            if (it != od.qp_of_stream.end()) {
                Qp& q = *it->second;
                w.qp_num = q.ibqp()->qp_num;
                w.src_qp = q.attr.dest_qp_num;
                w.slid = q.attr.ah_attr.dlid;
                // verbs: an error completion moves the QP to the error state.
                if (e.status != WcStatus::success && q.attr.qp_state != IBV_QPS_ERR) {
                    q.attr.qp_state = IBV_QPS_ERR;
                    q.ibqp()->state = IBV_QPS_ERR;
                }
            }
        }
        if (n == 0 && got == 0 && !drove) {
            // Nothing yet: the polling thread runs the transport itself (Device::drive).
            d.drive_locked();
            drove = true;
            continue;
        }
        if (n < kBurst) break;
    }
    // An application that waits outside verbs after this (ib_write_lat spins
    // on its buffer) has its answer placed here, or the engine thread back at
    // once (Device::leave).
    const bool release = got > 0 && d.leave(g);
    g.unlock();
    if (release) d.stop_driving();
    return got;
}

int req_notify_cq_op(ibv_cq* ibcq, int solicited_only) {
    Cq& c = *cq_of(ibcq);
    if (!ibcq->channel) return EINVAL;
    try {
        c.ctx->dev->req_notify_cq(c.id, solicited_only != 0);
    } catch (const std::exception& e) {
        say(std::string("ibv_req_notify_cq: ") + e.what());
        return EINVAL;
    }
    return 0;
}

// ---- ibv_wr_* (ibv_qp_ex): built into q.batch, posted by wr_complete ----

Qp& Q(ibv_qp_ex* x) { return *qp_of(x); }

SendWr& begin(ibv_qp_ex* x, OpKind op) {
    Qp& q = Q(x);
    q.batch.emplace_back();
    SendWr& w = q.batch.back();
    w.wr_id = x->wr_id;
    w.op = op;
    w.signaled = q.sq_sig_all || (x->wr_flags & IBV_SEND_SIGNALED);
    w.solicited = x->wr_flags & IBV_SEND_SOLICITED;
    // sg_list stays null until wr_complete: batch_sge may still grow.
    w.num_sge = 0;
    return w;
}

void wr_start(ibv_qp_ex* x) {
    Qp& q = Q(x);
    q.batch.clear();
    q.batch_sge.clear();
    q.batch_inline.clear();
    q.batch_err = 0;
}

void wr_abort(ibv_qp_ex* x) { wr_start(x); }

// An operation on remote memory: rkey and address first.
SendWr& begin_remote(ibv_qp_ex* x, OpKind op, uint32_t rkey, uint64_t addr) {
    SendWr& w = begin(x, op);
    w.rkey = rkey;
    w.remote_addr = addr;
    return w;
}

void wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) { begin_remote(x, OpKind::write, rkey, addr); }
void wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, __be32 imm) {
    begin_remote(x, OpKind::write_imm, rkey, addr).imm = imm;
}
void wr_rdma_read(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) { begin_remote(x, OpKind::read, rkey, addr); }
void wr_send(ibv_qp_ex* x) { begin(x, OpKind::send); }
void wr_send_imm(ibv_qp_ex* x, __be32 imm) { begin(x, OpKind::send_imm).imm = imm; }
void wr_atomic_cmp_swp(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
    SendWr& w = begin_remote(x, OpKind::atomic_cas, rkey, addr);
    w.compare_add = compare;
    w.swap = swap;
}
void wr_atomic_fetch_add(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t add) {
    begin_remote(x, OpKind::atomic_fadd, rkey, addr).compare_add = add;
}

// The last WR built, or nullptr (a setter without a WR is a builder error).
SendWr* last(ibv_qp_ex* x) {
    Qp& q = Q(x);
    if (q.batch.empty()) {
        q.batch_err = EINVAL;
        return nullptr;
    }
    return &q.batch.back();
}

void wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
    if (SendWr* w = last(x)) {
        w->lkey = lkey;
        w->local_addr = addr;
        w->length = length;
        w->num_sge = 0;
    }
}

void wr_set_sge_list(ibv_qp_ex* x, size_t n, const ibv_sge* list) {
    SendWr* w = last(x);
    if (!w) return;
    Qp& q = Q(x);
    if (n > q.cap.max_send_sge) {
        q.batch_err = EINVAL;
        return;
    }
    // The entries' offset in batch_sge rides in local_addr until wr_complete.
    w->local_addr = q.batch_sge.size();
    w->num_sge = uint32_t(n);
    q.batch_sge.insert(q.batch_sge.end(), reinterpret_cast<const Sge*>(list), reinterpret_cast<const Sge*>(list) + n);
}

// Inline data is copied now: verbs lets the caller reuse its buffer as soon
// as the setter returns, and the WR is posted only at wr_complete.
void set_inline(ibv_qp_ex* x, size_t n, const ibv_data_buf* bufs) {
    SendWr* w = last(x);
    if (!w) return;
    Qp& q = Q(x);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += bufs[i].length;
    if (total > q.cap.max_inline_data) {
        q.batch_err = EINVAL;
        return;
    }
    w->inline_data = true;
    w->num_sge = 0;
    w->local_addr = q.batch_inline.size();  // offset, resolved at wr_complete
    w->length = uint32_t(total);
    for (size_t i = 0; i < n; ++i) {
        const auto* p = static_cast<const uint8_t*>(bufs[i].addr);
        q.batch_inline.insert(q.batch_inline.end(), p, p + bufs[i].length);
    }
}
void wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t length) {
    const ibv_data_buf b{addr, length};
    set_inline(x, 1, &b);
}
void wr_set_inline_data_list(ibv_qp_ex* x, size_t n, const ibv_data_buf* bufs) { set_inline(x, n, bufs); }

int wr_complete(ibv_qp_ex* x) {
    Qp& q = Q(x);
    int err = q.batch_err;
    if (!err && !can_send(q)) err = EINVAL;
    if (!err && !q.batch.empty()) {
        for (SendWr& w : q.batch) {
            if (w.inline_data) w.local_addr = reinterpret_cast<uintptr_t>(q.batch_inline.data() + w.local_addr);
            else if (w.num_sge) w.sg_list = q.batch_sge.data() + w.local_addr;
        }
        size_t posted = 0;
        const Status s = q.ctx->dev->submit_sends(q.conn.id(), q.stream, q.batch.data(), q.batch.size(), posted);
        err = errno_of(s);
    }
    q.batch.clear();
    q.batch_sge.clear();
    q.batch_inline.clear();
    q.batch_err = 0;
    return err;
}

// What verbs offers and mroce does not (doc/verbs.md): the batch fails at wr_complete.
void unsupported(ibv_qp_ex* x) { Q(x).batch_err = EOPNOTSUPP; }
void wr_bind_mw(ibv_qp_ex* x, ibv_mw*, uint32_t, const ibv_mw_bind_info*) { unsupported(x); }
void wr_local_inv(ibv_qp_ex* x, uint32_t) { unsupported(x); }
void wr_send_inv(ibv_qp_ex* x, uint32_t) { unsupported(x); }
void wr_send_tso(ibv_qp_ex* x, void*, uint16_t, uint16_t) { unsupported(x); }
void wr_set_ud_addr(ibv_qp_ex* x, ibv_ah*, uint32_t, uint32_t) { unsupported(x); }
void wr_set_xrc_srqn(ibv_qp_ex* x, uint32_t) { unsupported(x); }
void wr_atomic_write(ibv_qp_ex* x, uint32_t, uint64_t, const void*) { unsupported(x); }

}  // namespace

void install_data_path(Context& c) {
    ibv_context_ops& o = c.vctx.context.ops;
    o.post_send = post_send_op;
    o.post_recv = post_recv_op;
    o.post_srq_recv = post_srq_recv_op;
    o.poll_cq = poll_cq_op;
    o.req_notify_cq = req_notify_cq_op;
}

void install_qp_ex(Qp& q) {
    ibv_qp_ex& x = q.qpx;
    x.wr_start = wr_start;
    x.wr_complete = wr_complete;
    x.wr_abort = wr_abort;
    x.wr_rdma_write = wr_rdma_write;
    x.wr_rdma_write_imm = wr_rdma_write_imm;
    x.wr_rdma_read = wr_rdma_read;
    x.wr_send = wr_send;
    x.wr_send_imm = wr_send_imm;
    x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    x.wr_atomic_fetch_add = wr_atomic_fetch_add;
    x.wr_set_sge = wr_set_sge;
    x.wr_set_sge_list = wr_set_sge_list;
    x.wr_set_inline_data = wr_set_inline_data;
    x.wr_set_inline_data_list = wr_set_inline_data_list;
    x.wr_bind_mw = wr_bind_mw;
    x.wr_local_inv = wr_local_inv;
    x.wr_send_inv = wr_send_inv;
    x.wr_send_tso = wr_send_tso;
    x.wr_set_ud_addr = wr_set_ud_addr;
    x.wr_set_xrc_srqn = wr_set_xrc_srqn;
    x.wr_atomic_write = wr_atomic_write;
}

}  // namespace mroce::verbs
