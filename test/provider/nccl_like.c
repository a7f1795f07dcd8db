/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 The mroce authors */
/*
 * A verbs client that reaches libibverbs the way NCCL's IB transport does
 * (src/misc/ibvsymbols.cc, src/transport/net_ib.cc), for the provider's
 * tests: it links no libibverbs; it dlopen()s $NCCL_IBVERBS_LIB, else
 * "libibverbs.so", else "libibverbs.so.1", and resolves every call with
 * dlvsym at the version NCCL asks for. One async-event thread blocked in
 * ibv_get_async_event per device, cancelled at the end. The dmabuf probe
 * with fd -1 must say EOPNOTSUPP. Data moves as NCCL moves it: the receiver
 * posts a receive with no SGE and RDMA_WRITEs a small clear-to-send record
 * into the sender's memory; the sender, polling that memory, posts a chain of
 * unsignaled RDMA_WRITEs ending in a signaled RDMA_WRITE_WITH_IMM carrying
 * the size; the receiver takes the immediate from its receive completion and
 * checks every byte. Then RDMA_READs, checked too.
 *
 * usage: nccl_like server PORT | nccl_like client HOST PORT     exit 0: all verified
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DIE(...) do { fprintf(stderr, "nccl_like: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

/* ---- the symbol table, as NCCL's ibvsymbols.cc builds it ---- */
static struct ibv_device** (*p_get_device_list)(int*);
static void (*p_free_device_list)(struct ibv_device**);
static const char* (*p_get_device_name)(struct ibv_device*);
static struct ibv_context* (*p_open_device)(struct ibv_device*);
static int (*p_close_device)(struct ibv_context*);
static int (*p_get_async_event)(struct ibv_context*, struct ibv_async_event*);
static void (*p_ack_async_event)(struct ibv_async_event*);
static int (*p_query_device)(struct ibv_context*, struct ibv_device_attr*);
static int (*p_query_port)(struct ibv_context*, uint8_t, struct ibv_port_attr*);
static int (*p_query_gid)(struct ibv_context*, uint8_t, int, union ibv_gid*);
static int (*p_query_qp)(struct ibv_qp*, struct ibv_qp_attr*, int, struct ibv_qp_init_attr*);
static struct ibv_pd* (*p_alloc_pd)(struct ibv_context*);
static int (*p_dealloc_pd)(struct ibv_pd*);
static struct ibv_mr* (*p_reg_mr)(struct ibv_pd*, void*, size_t, int);
static struct ibv_mr* (*p_reg_mr_iova2)(struct ibv_pd*, void*, size_t, uint64_t, unsigned int);
static struct ibv_mr* (*p_reg_dmabuf_mr)(struct ibv_pd*, uint64_t, size_t, uint64_t, int, int);
static int (*p_dereg_mr)(struct ibv_mr*);
static struct ibv_cq* (*p_create_cq)(struct ibv_context*, int, void*, struct ibv_comp_channel*, int);
static int (*p_destroy_cq)(struct ibv_cq*);
static struct ibv_qp* (*p_create_qp)(struct ibv_pd*, struct ibv_qp_init_attr*);
static int (*p_modify_qp)(struct ibv_qp*, struct ibv_qp_attr*, int);
static int (*p_destroy_qp)(struct ibv_qp*);
static int (*p_fork_init)(void);
static const char* (*p_event_type_str)(enum ibv_event_type);
static int (*p_query_ece)(struct ibv_qp*, struct ibv_ece*);
static int (*p_set_ece)(struct ibv_qp*, struct ibv_ece*);

static void* must(void* h, const char* name, const char* version) {
    void* f = dlvsym(h, name, version);
    if (!f) DIE("dlvsym(%s, %s) failed: %s", name, version, dlerror());
    return f;
}

static void load_verbs(void) {
    const char* lib = getenv("NCCL_IBVERBS_LIB");
    void* h = NULL;
    if (lib && *lib) h = dlopen(lib, RTLD_NOW);
    else {
        h = dlopen("libibverbs.so", RTLD_NOW);
        if (!h) h = dlopen("libibverbs.so.1", RTLD_NOW);
    }
    if (!h) DIE("cannot load libibverbs: %s", dlerror());
#define V11(f, n) *(void**)&f = must(h, n, "IBVERBS_1.1")
    V11(p_get_device_list, "ibv_get_device_list");
    V11(p_free_device_list, "ibv_free_device_list");
    V11(p_get_device_name, "ibv_get_device_name");
    V11(p_open_device, "ibv_open_device");
    V11(p_close_device, "ibv_close_device");
    V11(p_get_async_event, "ibv_get_async_event");
    V11(p_ack_async_event, "ibv_ack_async_event");
    V11(p_query_device, "ibv_query_device");
    V11(p_query_port, "ibv_query_port");
    V11(p_query_gid, "ibv_query_gid");
    V11(p_query_qp, "ibv_query_qp");
    V11(p_alloc_pd, "ibv_alloc_pd");
    V11(p_dealloc_pd, "ibv_dealloc_pd");
    V11(p_reg_mr, "ibv_reg_mr");
    V11(p_dereg_mr, "ibv_dereg_mr");
    V11(p_create_cq, "ibv_create_cq");
    V11(p_destroy_cq, "ibv_destroy_cq");
    V11(p_create_qp, "ibv_create_qp");
    V11(p_modify_qp, "ibv_modify_qp");
    V11(p_destroy_qp, "ibv_destroy_qp");
    V11(p_fork_init, "ibv_fork_init");
    V11(p_event_type_str, "ibv_event_type_str");
    /* Optional in NCCL: absent in older rdma-core. */
    *(void**)&p_reg_mr_iova2 = dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8");
    *(void**)&p_reg_dmabuf_mr = dlvsym(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
    *(void**)&p_query_ece = dlvsym(h, "ibv_query_ece", "IBVERBS_1.10");
    *(void**)&p_set_ece = dlvsym(h, "ibv_set_ece", "IBVERBS_1.10");
}

/* ---- NCCL's async-event thread ---- */
static void* async_thread(void* arg) {
    struct ibv_context* ctx = arg;
    for (;;) {
        struct ibv_async_event ev;
        if (p_get_async_event(ctx, &ev) != 0) break;
        fprintf(stderr, "nccl_like: async event %s\n", p_event_type_str(ev.event_type));
        p_ack_async_event(&ev);
    }
    return NULL;
}

/* ---- out of band ---- */
static void xfer(int fd, void* p, size_t n, int out) {
    char* c = p;
    while (n) {
        ssize_t r = out ? write(fd, c, n) : read(fd, c, n);
        if (r <= 0) DIE("out-of-band %s failed", out ? "write" : "read");
        c += r, n -= (size_t)r;
    }
}

struct info {
    uint32_t qpn;
    uint16_t lid;
    union ibv_gid gid;
    uint64_t data_addr, cts_addr;
    uint32_t data_rkey, cts_rkey;
};

/* The clear-to-send record (NCCL's fifo entry): where and how much. */
struct cts {
    uint64_t addr;
    uint32_t size;
    uint32_t rkey;
    uint32_t seq;  /* written last by the RDMA_WRITE as a whole; 0: not yet */
    uint32_t pad;
};

#define DATA (4u << 20)
static const uint32_t sizes[] = {1, 4097, (1u << 20) + 3, 65536, 0, 7};
#define NITER (sizeof sizes / sizeof *sizes)

static uint8_t pat(uint64_t i, uint32_t it) { return (uint8_t)(i * 29 + it * 101 + (i >> 11)); }

static void post_send1(struct ibv_qp* qp, struct ibv_send_wr* w) {
    struct ibv_send_wr* bad = NULL;
    int e = ibv_post_send(qp, w, &bad); /* inline in verbs.h: qp->context->ops.post_send */
    if (e) DIE("ibv_post_send: %s", strerror(e));
}

static void wait_wc(struct ibv_cq* cq, struct ibv_wc* wc) {
    for (long spins = 0;; ++spins) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n < 0) DIE("ibv_poll_cq failed");
        if (n == 1) {
            if (wc->status != IBV_WC_SUCCESS) DIE("completion wr_id %llu: status %d", (unsigned long long)wc->wr_id, wc->status);
            return;
        }
        if (spins > 2000000000L) DIE("no completion");
    }
}

int main(int argc, char** argv) {
    int server = argc == 3 && strcmp(argv[1], "server") == 0;
    if (!server && !(argc == 4 && strcmp(argv[1], "client") == 0)) DIE("usage: nccl_like server PORT | nccl_like client HOST PORT");
    load_verbs();
    if (p_fork_init()) DIE("ibv_fork_init failed");

    int n = 0;
    struct ibv_device** list = p_get_device_list(&n);
    struct ibv_device* dev = NULL;
    const char* want = getenv("NCCL_IB_HCA");
    for (int i = 0; i < n; ++i)
        if (want ? strcmp(p_get_device_name(list[i]), want) == 0 : strncmp(p_get_device_name(list[i]), "mroce", 5) == 0)
            dev = list[i];
    if (!dev) DIE("no mroce device among %d", n);
    struct ibv_context* ctx = p_open_device(dev);
    if (!ctx) DIE("ibv_open_device failed");
    p_free_device_list(list);
    pthread_t async;
    pthread_create(&async, NULL, async_thread, ctx);

    struct ibv_device_attr da;
    if (p_query_device(ctx, &da)) DIE("ibv_query_device");
    /* NCCL's struct may be larger than the library's: give room, as a newer header would. */
    union { struct ibv_port_attr a; char room[256]; } pa;
    memset(&pa, 0xa5, sizeof pa);
    if (p_query_port(ctx, 1, &pa.a)) DIE("ibv_query_port");
    if (pa.a.state != IBV_PORT_ACTIVE) DIE("port not active");
    if (pa.a.link_layer != IBV_LINK_LAYER_ETHERNET && pa.a.link_layer != IBV_LINK_LAYER_INFINIBAND) DIE("link layer");
    if (pa.a.active_speed == 0 || pa.a.active_width == 0) DIE("no speed in the port attributes");
    const char* gidx_env = getenv("NCCL_IB_GID_INDEX");
    int gidx = gidx_env ? atoi(gidx_env) : 0;
    union ibv_gid gid;
    if (p_query_gid(ctx, 1, gidx, &gid)) DIE("ibv_query_gid %d", gidx);

    struct ibv_pd* pd = p_alloc_pd(ctx);
    if (!pd) DIE("ibv_alloc_pd");
    if (p_reg_dmabuf_mr) {
        errno = 0;
        struct ibv_mr* m = p_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
        if (m || (errno != EOPNOTSUPP && errno != EPROTONOSUPPORT)) DIE("dmabuf probe: expected EOPNOTSUPP, got %s", strerror(errno));
    }
    uint8_t* data = aligned_alloc(4096, DATA);
    struct cts* cts = aligned_alloc(4096, 4096);
    uint8_t* rd = aligned_alloc(4096, DATA);
    memset(data, 0, DATA);
    memset(cts, 0, 4096);
    memset(rd, 0, DATA);
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING;
    struct ibv_mr *dmr, *cmr, *rmr;
    if (p_reg_mr_iova2) {
        dmr = p_reg_mr_iova2(pd, data, DATA, (uintptr_t)data, access);
        cmr = p_reg_mr_iova2(pd, cts, 4096, (uintptr_t)cts, access);
        rmr = p_reg_mr_iova2(pd, rd, DATA, (uintptr_t)rd, access);
    } else {
        dmr = p_reg_mr(pd, data, DATA, access);
        cmr = p_reg_mr(pd, cts, 4096, access);
        rmr = p_reg_mr(pd, rd, DATA, access);
    }
    if (!dmr || !cmr || !rmr) DIE("ibv_reg_mr: %s", strerror(errno));

    struct ibv_cq* cq = p_create_cq(ctx, 1000, NULL, NULL, 0);
    if (!cq) DIE("ibv_create_cq");
    struct ibv_qp_init_attr qa;
    memset(&qa, 0, sizeof qa);
    qa.send_cq = qa.recv_cq = cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = 2 * 64;
    qa.cap.max_recv_wr = 64;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = 64;
    struct ibv_qp* qp = p_create_qp(pd, &qa);
    if (!qp) DIE("ibv_create_qp: %s", strerror(errno));
    if (p_query_ece) {
        struct ibv_ece ece;
        (void)p_query_ece(qp, &ece); /* NCCL tolerates EOPNOTSUPP */
    }

    /* Out of band: server listens, client connects; both send their info. */
    int fd;
    if (server) {
        int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])), .sin_addr.s_addr = htonl(INADDR_ANY)};
        if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 1)) DIE("listen");
        fd = accept(l, NULL, NULL);
        close(l);
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
        inet_pton(AF_INET, argv[2], &a.sin_addr);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        for (int t = 0; connect(fd, (struct sockaddr*)&a, sizeof a) != 0; ++t) {
            if (t > 100) DIE("connect");
            usleep(50000);
        }
    }
    struct info me = {qp->qp_num, pa.a.lid, gid, (uintptr_t)data, (uintptr_t)cts, dmr->rkey, cmr->rkey}, peer;
    xfer(fd, &me, sizeof me, 1);
    xfer(fd, &peer, sizeof peer, 0);

    struct ibv_qp_attr at;
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (p_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) DIE("INIT");
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_RTR;
    at.path_mtu = pa.a.active_mtu;
    at.dest_qp_num = peer.qpn;
    at.max_dest_rd_atomic = 1;
    at.min_rnr_timer = 12;
    at.ah_attr.is_global = 1; /* RoCE: NCCL addresses by GID */
    at.ah_attr.grh.dgid = peer.gid;
    at.ah_attr.grh.sgid_index = (uint8_t)gidx;
    at.ah_attr.grh.hop_limit = 255;
    at.ah_attr.port_num = 1;
    if (p_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        DIE("RTR");
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_RTS;
    at.timeout = 20;
    at.retry_cnt = 7;
    at.rnr_retry = 7;
    at.max_rd_atomic = 1;
    if (p_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
        DIE("RTS");
    struct ibv_qp_attr qq;
    struct ibv_qp_init_attr qi;
    if (p_query_qp(qp, &qq, IBV_QP_STATE, &qi) || qq.qp_state != IBV_QPS_RTS) DIE("ibv_query_qp: not RTS");
    char sync = 's';
    xfer(fd, &sync, 1, 1);
    xfer(fd, &sync, 1, 0);

    int bad = 0;
    for (uint32_t it = 0; it < NITER; ++it) {
        const uint32_t size = sizes[it];
        const uint32_t seq = it + 1;
        struct ibv_wc wc;
        if (server) { /* receiver */
            const uint64_t off = (uint64_t)(it % 3) * 4096 + 5;
            memset(data + off, 0, size);
            struct ibv_recv_wr rw, *rbad = NULL;
            memset(&rw, 0, sizeof rw);
            rw.wr_id = seq; /* no SGE: a WRITE_WITH_IMM consumes it for its immediate only */
            if (ibv_post_recv(qp, &rw, &rbad)) DIE("ibv_post_recv");
            struct cts rec = {(uintptr_t)data + off, size, dmr->rkey, seq, 0};
            struct ibv_sge s = {(uintptr_t)&rec, sizeof rec, 0};
            struct ibv_send_wr w;
            memset(&w, 0, sizeof w);
            w.wr_id = 1000 + seq;
            w.opcode = IBV_WR_RDMA_WRITE;
            w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
            w.sg_list = &s;
            w.num_sge = 1;
            w.wr.rdma.remote_addr = peer.cts_addr + (uint64_t)(it % 8) * sizeof(struct cts);
            w.wr.rdma.rkey = peer.cts_rkey;
            post_send1(qp, &w);
            int got_recv = 0, got_send = 0;
            while (!got_recv || !got_send) {
                wait_wc(cq, &wc);
                if (wc.opcode == IBV_WC_RDMA_WRITE) got_send = 1;
                else if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
                    got_recv = 1;
                    if (wc.wr_id != seq || !(wc.wc_flags & IBV_WC_WITH_IMM) || ntohl(wc.imm_data) != size) {
                        fprintf(stderr, "nccl_like: receive %u: wr_id %llu imm %u (want %u)\n", seq,
                                (unsigned long long)wc.wr_id, ntohl(wc.imm_data), size);
                        bad = 1;
                    }
                } else DIE("unexpected completion opcode %d", wc.opcode);
            }
            for (uint64_t i = 0; i < size; ++i)
                if (data[off + i] != pat(i, it)) {
                    fprintf(stderr, "nccl_like: message %u (%u B): byte %llu differs\n", seq, size, (unsigned long long)i);
                    bad = 1;
                    break;
                }
        } else { /* sender: waits for the receiver's record in its own memory */
            volatile struct cts* rec = &cts[it % 8];
            for (long spins = 0; rec->seq != seq; ++spins)
                if (spins > 4000000000L) DIE("no clear-to-send %u", seq);
            __sync_synchronize();
            if (rec->size != size) DIE("clear-to-send %u: size %u", seq, rec->size);
            for (uint64_t i = 0; i < size; ++i) data[i] = pat(i, it);
            /* Chunks of at most 300000 B as unsignaled WRITEs; the last one (or, for odd
               messages, a zero-length WRITE after them) carries the immediate, signaled. */
            struct ibv_send_wr w[16];
            struct ibv_sge s[16];
            int k = 0;
            const uint32_t chunk = 300000;
            for (uint32_t o = 0; o < size || k == 0; o += chunk) {
                uint32_t len = size - o < chunk ? size - o : chunk;
                memset(&w[k], 0, sizeof w[k]);
                s[k] = (struct ibv_sge){(uintptr_t)data + o, len, dmr->lkey};
                w[k].wr_id = 2000 + seq;
                w[k].opcode = IBV_WR_RDMA_WRITE;
                w[k].sg_list = len ? &s[k] : NULL;
                w[k].num_sge = len ? 1 : 0;
                w[k].wr.rdma.remote_addr = rec->addr + o;
                w[k].wr.rdma.rkey = rec->rkey;
                if (k) w[k - 1].next = &w[k];
                ++k;
                if (size == 0) break;
            }
            if (it % 2) { /* a separate zero-length WRITE_WITH_IMM */
                memset(&w[k], 0, sizeof w[k]);
                w[k].wr_id = 2000 + seq;
                w[k].opcode = IBV_WR_RDMA_WRITE;
                w[k].wr.rdma.remote_addr = rec->addr;
                w[k].wr.rdma.rkey = rec->rkey;
                w[k - 1].next = &w[k];
                ++k;
            }
            w[k - 1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            w[k - 1].imm_data = htonl(size);
            w[k - 1].send_flags = IBV_SEND_SIGNALED;
            post_send1(qp, &w[0]);
            wait_wc(cq, &wc);
            if (wc.wr_id != 2000 + seq || wc.opcode != IBV_WC_RDMA_WRITE) DIE("send completion %u", seq);
        }
    }
    /* RDMA_READ of what the receiver (server) holds: the last message's bytes, from the client. */
    if (!server) {
        const uint32_t it = NITER - 1, size = (1u << 20) + 3;
        xfer(fd, &sync, 1, 0); /* the server filled data[] with pat(., 77) */
        struct ibv_sge s = {(uintptr_t)rd, size, rmr->lkey};
        struct ibv_send_wr w, *wbad = NULL;
        memset(&w, 0, sizeof w);
        w.wr_id = 3000;
        w.opcode = IBV_WR_RDMA_READ;
        w.send_flags = IBV_SEND_SIGNALED;
        w.sg_list = &s;
        w.num_sge = 1;
        w.wr.rdma.remote_addr = peer.data_addr;
        w.wr.rdma.rkey = peer.data_rkey;
        if (ibv_post_send(qp, &w, &wbad)) DIE("post READ");
        struct ibv_wc wc;
        wait_wc(cq, &wc);
        if (wc.opcode != IBV_WC_RDMA_READ || wc.byte_len != size) DIE("READ completion");
        for (uint64_t i = 0; i < size; ++i)
            if (rd[i] != pat(i, 77)) {
                fprintf(stderr, "nccl_like: READ byte %llu differs\n", (unsigned long long)i);
                bad = 1;
                break;
            }
        (void)it;
    } else {
        for (uint64_t i = 0; i < (1u << 20) + 3; ++i) data[i] = pat(i, 77);
        xfer(fd, &sync, 1, 1);
    }
    xfer(fd, &bad, sizeof bad, 1); /* both verdicts on both sides */
    int peer_bad = 0;
    xfer(fd, &peer_bad, sizeof peer_bad, 0);
    close(fd);

    pthread_cancel(async); /* as NCCL does at finalize */
    pthread_join(async, NULL);
    if (p_destroy_qp(qp) || p_destroy_cq(cq) || p_dereg_mr(dmr) || p_dereg_mr(cmr) || p_dereg_mr(rmr) ||
        p_dealloc_pd(pd) || p_close_device(ctx))
        DIE("teardown");
    printf("nccl_like %s: %zu messages (%s), READ: %s\n", server ? "server" : "client", (size_t)NITER,
           bad ? "BAD" : "verified", bad || peer_bad ? "BAD" : "verified");
    return bad || peer_bad;
}
