// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// A verbs client that loads and drives libibverbs the way NCCL's IB transport
// does (src/misc/ibvsymbols.cc, src/transport/net_ib.cc), for issue 20:
//   - the library: $NCCL_IBVERBS_LIB if set, else dlopen("libibverbs.so"),
//     then "libibverbs.so.1"; every symbol through dlvsym(..., "IBVERBS_1.1"),
//     ibv_reg_mr_iova2 at IBVERBS_1.8, ibv_reg_dmabuf_mr at IBVERBS_1.12 (probed
//     with fd -1: EOPNOTSUPP means "no dmabuf"), ibv_query_ece / ibv_set_ece at
//     IBVERBS_1.10 (optional). This binary links no libibverbs: a verbs call
//     that is not a function pointer from dlvsym (or one of rdma-core's inline
//     post/poll calls, which dispatch through the objects) fails to link.
//   - ibv_query_port into a buffer larger than rdma-core's struct (NCCL's own
//     copy of the struct is larger); port ACTIVE, a speed, Ethernet or IB.
//   - one async-event thread per device blocked in ibv_get_async_event,
//     cancelled at the end (pthread_cancel: the read is a cancellation point).
//   - the data path: the receiver writes a small "clear to send" record
//     (address, rkey, size, sequence) into the sender's memory with an inline
//     RDMA_WRITE; the sender waits for it in memory, then posts on every QP a
//     chain of unsignaled RDMA_WRITEs ending in a signaled RDMA_WRITE_WITH_IMM
//     (zero bytes on a QP whose share is empty, as NCCL does) into receives
//     posted with no SGE; then it reads the destination back with RDMA_READ.
// Roles: the server is the receiver, the client (given the server's host) the
// sender; they exchange lid/qpn/psn/gid/rkey/addr over TCP.
// Every destination byte and every immediate is checked, and so are the bytes
// after each message (untouched). Exit 0 only if everything verified.
//
// usage: nccl_like [-d DEV] [-p TCPPORT] [-n ITERS] [-q QPS] [-l] [-r] [SERVER]
//   -l  address the peer by LID (no GRH), as on an InfiniBand port
//   -r  require retransmissions (a run under injected loss): read through
//       mroce's extension API (mroce_query_conn, found with dlsym as a
//       program that also runs on other providers would)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mroce/verbs_ext.h"

#define IBVERBS_VERSION "IBVERBS_1.1"
#define MAX_QPS 4
#define FIFO_SLOTS 8
#define DST_SLOTS 2
#define MAX_MSG ((size_t)(1u << 20) + 64)
#define GUARD 64
#define DEADLINE_S 30

// NCCL's table of entry points (ncclIbvSymbols).
static struct {
  struct ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(struct ibv_device**);
  const char* (*get_device_name)(struct ibv_device*);
  struct ibv_context* (*open_device)(struct ibv_device*);
  int (*close_device)(struct ibv_context*);
  int (*get_async_event)(struct ibv_context*, struct ibv_async_event*);
  void (*ack_async_event)(struct ibv_async_event*);
  int (*query_device)(struct ibv_context*, struct ibv_device_attr*);
  int (*query_port)(struct ibv_context*, uint8_t, struct ibv_port_attr*);
  int (*query_gid)(struct ibv_context*, uint8_t, int, union ibv_gid*);
  int (*query_qp)(struct ibv_qp*, struct ibv_qp_attr*, int, struct ibv_qp_init_attr*);
  struct ibv_pd* (*alloc_pd)(struct ibv_context*);
  int (*dealloc_pd)(struct ibv_pd*);
  struct ibv_mr* (*reg_mr)(struct ibv_pd*, void*, size_t, int);
  struct ibv_mr* (*reg_mr_iova2)(struct ibv_pd*, void*, size_t, uint64_t, unsigned int);
  struct ibv_mr* (*reg_dmabuf_mr)(struct ibv_pd*, uint64_t, size_t, uint64_t, int, int);
  int (*dereg_mr)(struct ibv_mr*);
  struct ibv_cq* (*create_cq)(struct ibv_context*, int, void*, struct ibv_comp_channel*, int);
  int (*destroy_cq)(struct ibv_cq*);
  struct ibv_qp* (*create_qp)(struct ibv_pd*, struct ibv_qp_init_attr*);
  int (*modify_qp)(struct ibv_qp*, struct ibv_qp_attr*, int);
  int (*destroy_qp)(struct ibv_qp*);
  int (*fork_init)(void);
  const char* (*event_type_str)(enum ibv_event_type);
  int (*query_ece)(struct ibv_qp*, struct ibv_ece*);
  int (*set_ece)(struct ibv_qp*, struct ibv_ece*);
} ibv;

static const char* g_role = "?";

// C11 aligned_alloc wants the size to be a multiple of the alignment
// (glibc tolerates other sizes, ASan does not): round it up.
static void* alloc_aligned(size_t align, size_t size) {
  return aligned_alloc(align, (size + align - 1) / align * align);
}

static void die(const char* what) {
  fprintf(stderr, "nccl_like %s: FAIL: %s (errno %d: %s)\n", g_role, what, errno, strerror(errno));
  exit(1);
}

static void* load_verbs(void) {
  const char* env = getenv("NCCL_IBVERBS_LIB");
  void* h = NULL;
  if (env && *env) {
    h = dlopen(env, RTLD_NOW);
    if (!h) fprintf(stderr, "nccl_like %s: dlopen(%s): %s\n", g_role, env, dlerror());
  } else {
    h = dlopen("libibverbs.so", RTLD_NOW);
    if (!h) h = dlopen("libibverbs.so.1", RTLD_NOW);
  }
  if (!h) die("cannot open libibverbs.so[.1]");
  Dl_info info;
  void* any = dlvsym(h, "ibv_get_device_list", IBVERBS_VERSION);
  if (any && dladdr(any, &info)) printf("%s: verbs from %s\n", g_role, info.dli_fname);

#define LOAD(field, name)                                                                  \
  do {                                                                                     \
    *(void**)&ibv.field = dlvsym(h, name, IBVERBS_VERSION);                                \
    if (!ibv.field) {                                                                      \
      fprintf(stderr, "nccl_like %s: dlvsym(%s, %s): %s\n", g_role, name, IBVERBS_VERSION, \
              dlerror());                                                                  \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)
#define LOAD_VERSION(field, name, version) (*(void**)&ibv.field = dlvsym(h, name, version))
  LOAD(get_device_list, "ibv_get_device_list");
  LOAD(free_device_list, "ibv_free_device_list");
  LOAD(get_device_name, "ibv_get_device_name");
  LOAD(open_device, "ibv_open_device");
  LOAD(close_device, "ibv_close_device");
  LOAD(get_async_event, "ibv_get_async_event");
  LOAD(ack_async_event, "ibv_ack_async_event");
  LOAD(query_device, "ibv_query_device");
  LOAD(query_port, "ibv_query_port");
  LOAD(query_gid, "ibv_query_gid");
  LOAD(query_qp, "ibv_query_qp");
  LOAD(alloc_pd, "ibv_alloc_pd");
  LOAD(dealloc_pd, "ibv_dealloc_pd");
  LOAD(reg_mr, "ibv_reg_mr");
  LOAD_VERSION(reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8");
  LOAD_VERSION(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
  LOAD(dereg_mr, "ibv_dereg_mr");
  LOAD(create_cq, "ibv_create_cq");
  LOAD(destroy_cq, "ibv_destroy_cq");
  LOAD(create_qp, "ibv_create_qp");
  LOAD(modify_qp, "ibv_modify_qp");
  LOAD(destroy_qp, "ibv_destroy_qp");
  LOAD(fork_init, "ibv_fork_init");
  LOAD(event_type_str, "ibv_event_type_str");
  LOAD_VERSION(query_ece, "ibv_query_ece", "IBVERBS_1.10");
  LOAD_VERSION(set_ece, "ibv_set_ece", "IBVERBS_1.10");
  // The provider must offer what NCCL cherry-picks (it is rdma-core 44's ABI).
  if (!ibv.reg_mr_iova2 || !ibv.reg_dmabuf_mr) die("ibv_reg_mr_iova2@IBVERBS_1.8 or ibv_reg_dmabuf_mr@IBVERBS_1.12 missing");
  return h;
}

// ---- the async-event thread (NCCL's ncclIbAsyncThreadMain) ----
static atomic_int g_async_fatal;
static atomic_int g_async_running;

static void* async_thread(void* arg) {
  struct ibv_context* ctx = arg;
  atomic_store(&g_async_running, 1);
  for (;;) {
    struct ibv_async_event ev;
    if (ibv.get_async_event(ctx, &ev) != 0) break;
    const char* s = ibv.event_type_str(ev.event_type);
    fprintf(stderr, "nccl_like %s: async event: %s\n", g_role, s ? s : "?");
    if (ev.event_type != IBV_EVENT_COMM_EST) atomic_store(&g_async_fatal, 1);
    ibv.ack_async_event(&ev);
  }
  return NULL;
}

// ---- out of band (TCP) ----
static void put_all(int fd, const void* p, size_t n) {
  const char* c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w <= 0) die("TCP write");
    c += w, n -= (size_t)w;
  }
}
static void get_all(int fd, void* p, size_t n) {
  char* c = p;
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) die("TCP read (peer gone?)");
    c += r, n -= (size_t)r;
  }
}

static int tcp_connect(const char* host, int port) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  if (getaddrinfo(host, ps, &hints, &res) != 0) die("getaddrinfo");
  for (int tries = 0; tries < 200; tries++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    close(fd);
    usleep(50 * 1000);
  }
  die("connect to the server");
  return -1;
}

static int tcp_accept(int port) {
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  if (ls < 0) die("socket");
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(ls, (struct sockaddr*)&a, sizeof a) != 0 || listen(ls, 1) != 0) die("bind/listen");
  int fd = accept(ls, NULL, NULL);
  if (fd < 0) die("accept");
  close(ls);
  return fd;
}

// What each side tells the other (NCCL's ncclIbConnectionMetadata).
struct qp_info {
  uint32_t qpn, psn;
  struct ibv_ece ece;
  uint32_t ece_ok;
};
struct meta {
  struct qp_info qp[MAX_QPS];
  uint32_t nqps;
  uint16_t lid;
  uint8_t gid[16];
  uint32_t mtu;
  uint64_t addr;  // receiver: its destination slots; sender: its CTS fifo
  uint32_t rkey;
};

// The "clear to send" record the receiver writes into the sender's fifo
// (NCCL's ncclIbSendFifo): where to write, how much, and a sequence number
// the sender polls in memory.
struct cts {
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;
  uint64_t seq;
};

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// The byte at offset off of message iter: not periodic in any power of two.
static uint8_t pattern(uint32_t iter, size_t off) {
  return (uint8_t)((off * 131u) ^ (off >> 9) ^ (iter * 29u + 7u));
}

static uint32_t imm_of(uint32_t iter, uint32_t qp, uint32_t size) {
  return (size * 2654435761u) ^ (iter << 20) ^ (qp << 28) ^ 0x5a5a5a5au;
}

// Sizes that are not round, one message per iteration.
static const uint32_t kSizes[] = {1, 4097, (1u << 20) + 3, 65536 + 5, 7, 8191, 300001, 2};

// Each QP's share of a message: the first QPs take ceil, the rest the
// remainder, possibly zero bytes (NCCL then still posts the WRITE_WITH_IMM).
static void share(uint32_t size, int nqps, int q, uint32_t* off, uint32_t* len) {
  uint32_t per = (size + (uint32_t)nqps - 1) / (uint32_t)nqps;
  uint32_t o = per * (uint32_t)q;
  *off = o < size ? o : size;
  uint32_t end = o + per < size ? o + per : size;
  *len = end - *off;
}

struct side {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp[MAX_QPS];
  int nqps;
  uint8_t port;
  int gid_index;
  enum ibv_mtu mtu;
  uint16_t lid;
  union ibv_gid gid;
  int link_eth;
};

static int poll_one(struct side* s, struct ibv_wc* wc) {
  int n = ibv_poll_cq(s->cq, 1, wc);
  if (n < 0) die("ibv_poll_cq");
  if (n == 1 && wc->status != IBV_WC_SUCCESS) {
    fprintf(stderr, "nccl_like %s: FAIL: completion wr_id %llu status %d opcode %d\n", g_role,
            (unsigned long long)wc->wr_id, wc->status, wc->opcode);
    exit(1);
  }
  return n;
}

static void check_deadline(double t0, const char* what) {
  if (now_s() - t0 > DEADLINE_S) {
    fprintf(stderr, "nccl_like %s: FAIL: timed out waiting for %s\n", g_role, what);
    exit(1);
  }
  if (atomic_load(&g_async_fatal)) {
    fprintf(stderr, "nccl_like %s: FAIL: fatal async event while waiting for %s\n", g_role, what);
    exit(1);
  }
}

// Waits for the send completions with the n wr_ids in want (QPs sharing the
// CQ complete in any order between them); any other completion is an error.
static void wait_sends(struct side* s, const uint64_t* want, int n, enum ibv_wc_opcode op) {
  int left = n;
  uint32_t seen = 0;
  double t0 = now_s();
  while (left) {
    struct ibv_wc wc;
    if (!poll_one(s, &wc)) {
      check_deadline(t0, "a send completion");
      continue;
    }
    int k = 0;
    while (k < n && (want[k] != wc.wr_id || (seen >> k & 1))) k++;
    if (k == n || wc.opcode != op) {
      fprintf(stderr, "nccl_like %s: FAIL: unexpected completion wr_id %#llx opcode %d (expected opcode %d)\n", g_role,
              (unsigned long long)wc.wr_id, wc.opcode, op);
      exit(1);
    }
    seen |= 1u << k;
    left--;
  }
}

static void open_side(struct side* s, const char* devname, int nqps) {
  int n = 0;
  struct ibv_device** list = ibv.get_device_list(&n);
  if (!list) die("ibv_get_device_list");
  struct ibv_device* dev = NULL;
  for (int i = 0; i < n; i++)
    if (strcmp(ibv.get_device_name(list[i]), devname) == 0) dev = list[i];
  if (!dev) {
    errno = ENODEV;
    die("no such device");
  }
  s->ctx = ibv.open_device(dev);
  ibv.free_device_list(list);
  if (!s->ctx) die("ibv_open_device");

  struct ibv_device_attr da;
  if (ibv.query_device(s->ctx, &da)) die("ibv_query_device");
  if (da.phys_port_cnt < 1) die("no port");
  s->port = 1;
  // NCCL's copy of ibv_port_attr is larger than rdma-core 44's: the provider
  // must write only what it knows and leave the rest alone.
  union {
    struct ibv_port_attr a;
    unsigned char raw[sizeof(struct ibv_port_attr) + 64];
  } pa;
  memset(&pa, 0xa5, sizeof pa);
  if (ibv.query_port(s->ctx, s->port, &pa.a)) die("ibv_query_port");
  for (size_t i = sizeof(struct ibv_port_attr); i < sizeof pa.raw; i++)
    if (pa.raw[i] != 0xa5) {
      errno = EOVERFLOW;
      die("ibv_query_port wrote past rdma-core's struct ibv_port_attr");
    }
  if (pa.a.state != IBV_PORT_ACTIVE) die("port not ACTIVE");
  if (pa.a.link_layer != IBV_LINK_LAYER_ETHERNET && pa.a.link_layer != IBV_LINK_LAYER_INFINIBAND)
    die("link layer neither Ethernet nor InfiniBand");
  if (pa.a.active_speed == 0 || pa.a.active_width == 0) die("no port speed");
  s->link_eth = pa.a.link_layer == IBV_LINK_LAYER_ETHERNET;
  s->mtu = pa.a.active_mtu;
  s->lid = pa.a.lid;
  const char* gi = getenv("NCCL_IB_GID_INDEX");
  s->gid_index = gi ? atoi(gi) : 0;
  if (ibv.query_gid(s->ctx, s->port, s->gid_index, &s->gid)) die("ibv_query_gid");
  char gs[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, s->gid.raw, gs, sizeof gs);
  printf("%s: %s port %u ACTIVE, %s, mtu %d, lid %u, gid[%d] %s, speed %u width %u\n", g_role, devname, s->port,
         s->link_eth ? "Ethernet" : "InfiniBand", 128 << s->mtu, s->lid, s->gid_index, gs, pa.a.active_speed,
         pa.a.active_width);

  s->pd = ibv.alloc_pd(s->ctx);
  if (!s->pd) die("ibv_alloc_pd");

  // NCCL's dmabuf probe: fd -1 fails with EOPNOTSUPP/EPROTONOSUPPORT where
  // dmabuf is unsupported (EBADF where it is).
  errno = 0;
  struct ibv_mr* dm = ibv.reg_dmabuf_mr(s->pd, 0, 0, 0, -1, 0);
  if (dm || errno != EOPNOTSUPP) die("ibv_reg_dmabuf_mr(fd -1): expected NULL with EOPNOTSUPP");

  s->cq = ibv.create_cq(s->ctx, 2 * 128 * nqps, NULL, NULL, 0);
  if (!s->cq) die("ibv_create_cq");
  s->nqps = nqps;
  for (int q = 0; q < nqps; q++) {
    struct ibv_qp_init_attr ia = {
        .send_cq = s->cq,
        .recv_cq = s->cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 128, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1,
                .max_inline_data = sizeof(struct cts)},
    };
    s->qp[q] = ibv.create_qp(s->pd, &ia);
    if (!s->qp[q]) die("ibv_create_qp");
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = s->port,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
    if (ibv.modify_qp(s->qp[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      die("ibv_modify_qp INIT");
  }
}

// NCCL registers with ibv_reg_mr_iova2 (iova = address) and relaxed ordering
// when the library has it.
static struct ibv_mr* reg(struct side* s, void* p, size_t n) {
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  struct ibv_mr* mr = ibv.reg_mr_iova2(s->pd, p, n, (uint64_t)(uintptr_t)p,
                                       (unsigned)(access | IBV_ACCESS_RELAXED_ORDERING));
  if (!mr) die("ibv_reg_mr_iova2");
  return mr;
}

static void fill_meta(struct side* s, struct meta* m, uint64_t addr, uint32_t rkey) {
  memset(m, 0, sizeof *m);
  for (int q = 0; q < s->nqps; q++) {
    m->qp[q].qpn = s->qp[q]->qp_num;
    m->qp[q].psn = (uint32_t)(lrand48() & 0xffffff);
    if (ibv.query_ece) {
      int r = ibv.query_ece(s->qp[q], &m->qp[q].ece);
      if (r == 0) m->qp[q].ece_ok = 1;
      else if (r != EOPNOTSUPP) die("ibv_query_ece: neither success nor EOPNOTSUPP");
    }
  }
  m->nqps = (uint32_t)s->nqps;
  m->lid = s->lid;
  memcpy(m->gid, s->gid.raw, 16);
  m->mtu = s->mtu;
  m->addr = addr;
  m->rkey = rkey;
}

static void connect_qps(struct side* s, const struct meta* me, const struct meta* peer, int by_lid) {
  for (int q = 0; q < s->nqps; q++) {
    if (ibv.set_ece && peer->qp[q].ece_ok) {
      struct ibv_ece e = peer->qp[q].ece;
      int r = ibv.set_ece(s->qp[q], &e);
      if (r != 0 && r != EOPNOTSUPP) die("ibv_set_ece");
    }
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = s->mtu < (enum ibv_mtu)peer->mtu ? s->mtu : (enum ibv_mtu)peer->mtu,
        .dest_qp_num = peer->qp[q].qpn,
        .rq_psn = peer->qp[q].psn,
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
    };
    if (by_lid) {
      a.ah_attr.is_global = 0;
      a.ah_attr.dlid = peer->lid;
    } else {
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
      a.ah_attr.grh.flow_label = 0;
      a.ah_attr.grh.sgid_index = (uint8_t)s->gid_index;
      a.ah_attr.grh.hop_limit = 255;
      a.ah_attr.grh.traffic_class = 0;
    }
    a.ah_attr.sl = 0;
    a.ah_attr.src_path_bits = 0;
    a.ah_attr.port_num = s->port;
    if (ibv.modify_qp(s->qp[q], &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      die("ibv_modify_qp RTR");
    struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .timeout = 18, .retry_cnt = 7, .rnr_retry = 7,
                            .sq_psn = me->qp[q].psn, .max_rd_atomic = 1};
    if (ibv.modify_qp(s->qp[q], &r,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC))
      die("ibv_modify_qp RTS");
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qi;
    if (ibv.query_qp(s->qp[q], &qa, IBV_QP_STATE, &qi)) die("ibv_query_qp");
    if (qa.qp_state != IBV_QPS_RTS) {
      errno = EPROTO;
      die("ibv_query_qp: QP not in RTS after the transition");
    }
  }
}

// ---- the receiver (server) ----
static int run_receiver(struct side* s, int fd, const struct meta* me, const struct meta* peer, int iters) {
  (void)me;
  const size_t slot = MAX_MSG + GUARD;
  uint8_t* dst = alloc_aligned(4096, DST_SLOTS * slot);
  struct cts* rec = alloc_aligned(64, sizeof(struct cts));
  if (!dst || !rec) die("alloc");
  memset(dst, 0, DST_SLOTS * slot);
  struct ibv_mr* dmr = reg(s, dst, DST_SLOTS * slot);
  struct ibv_mr* rmr = reg(s, rec, sizeof *rec);
  // The sender reads dst back: it needs the key, which goes in the exchange.
  put_all(fd, &dmr->rkey, sizeof dmr->rkey);
  uint64_t daddr = (uint64_t)(uintptr_t)dst;
  put_all(fd, &daddr, sizeof daddr);

  uint64_t bytes = 0;
  for (int it = 0; it < iters; it++) {
    const uint32_t size = kSizes[(size_t)it % (sizeof kSizes / sizeof kSizes[0])];
    uint8_t* d = dst + (size_t)(it % DST_SLOTS) * slot;
    memset(d, 0, size + GUARD);
    // One receive per QP, no SGE: WRITE_WITH_IMM consumes it for the immediate.
    for (int q = 0; q < s->nqps; q++) {
      struct ibv_recv_wr wr = {.wr_id = ((uint64_t)it << 8) | (uint64_t)q, .sg_list = NULL, .num_sge = 0}, *bad;
      if (ibv_post_recv(s->qp[q], &wr, &bad)) die("ibv_post_recv (num_sge 0)");
    }
    // Clear to send: an inline RDMA_WRITE of the record into the sender's fifo
    // slot, unsignaled except every fourth (the send queue is reclaimed by the
    // signaled ones).
    rec->addr = (uint64_t)(uintptr_t)d;
    rec->rkey = dmr->rkey;
    rec->size = size;
    rec->seq = (uint64_t)it + 1;
    const int signaled = (it % 4) == 3;
    struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)rec, .length = sizeof *rec, .lkey = rmr->lkey};
    struct ibv_send_wr wr = {.wr_id = 0xc75000000ull + (uint64_t)it, .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE,
                             .send_flags = IBV_SEND_INLINE | (signaled ? IBV_SEND_SIGNALED : 0)},
                       *bad;
    wr.wr.rdma.remote_addr = peer->addr + (uint64_t)(it % FIFO_SLOTS) * sizeof(struct cts);
    wr.wr.rdma.rkey = peer->rkey;
    if (ibv_post_send(s->qp[0], &wr, &bad)) die("ibv_post_send (CTS)");

    // The message is complete when every QP's receive completed with its immediate.
    int got = 0, cts_done = !signaled;
    double t0 = now_s();
    while (got < s->nqps || !cts_done) {
      struct ibv_wc wc;
      if (!poll_one(s, &wc)) {
        check_deadline(t0, "the message's WRITE_WITH_IMM");
        continue;
      }
      if (wc.wr_id == wr.wr_id) {
        if (wc.opcode != IBV_WC_RDMA_WRITE) die("CTS completion with the wrong opcode");
        cts_done = 1;
        continue;
      }
      const int q = (int)(wc.wr_id & 0xff);
      if ((wc.wr_id >> 8) != (uint64_t)it || q >= s->nqps) {
        fprintf(stderr, "nccl_like receiver: FAIL: unexpected completion wr_id %llx\n", (unsigned long long)wc.wr_id);
        return 1;
      }
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM)) {
        fprintf(stderr, "nccl_like receiver: FAIL: iteration %d qp %d: opcode %d flags %#x, expected RECV_RDMA_WITH_IMM\n",
                it, q, wc.opcode, wc.wc_flags);
        return 1;
      }
      const uint32_t want = imm_of((uint32_t)it, (uint32_t)q, size);
      if (ntohl(wc.imm_data) != want) {
        fprintf(stderr, "nccl_like receiver: FAIL: iteration %d qp %d: immediate %#x, expected %#x\n", it, q,
                ntohl(wc.imm_data), want);
        return 1;
      }
      if (wc.qp_num != s->qp[q]->qp_num) {
        fprintf(stderr, "nccl_like receiver: FAIL: completion names qp %#x, posted on %#x\n", wc.qp_num,
                s->qp[q]->qp_num);
        return 1;
      }
      got++;
    }
    for (size_t i = 0; i < size; i++)
      if (d[i] != pattern((uint32_t)it, i)) {
        fprintf(stderr, "nccl_like receiver: FAIL: iteration %d (%u B): byte %zu is %#x, expected %#x\n", it, size, i,
                d[i], pattern((uint32_t)it, i));
        return 1;
      }
    for (size_t i = size; i < size + GUARD; i++)
      if (d[i] != 0) {
        fprintf(stderr, "nccl_like receiver: FAIL: iteration %d (%u B): byte %zu after the message written (%#x)\n",
                it, size, i, d[i]);
        return 1;
      }
    bytes += size;
  }
  // Wait until the sender has read the last messages back before tearing down.
  uint32_t done = 0;
  get_all(fd, &done, sizeof done);
  ibv.dereg_mr(dmr);
  ibv.dereg_mr(rmr);
  free(dst);
  free(rec);
  printf("receiver: PASS: %d messages, %llu bytes verified with their immediates on %d QP(s)\n", iters,
         (unsigned long long)bytes, s->nqps);
  return done == 0x600d ? 0 : 1;
}

// ---- the sender (client) ----
static int run_sender(struct side* s, int fd, struct cts* fifo, const struct meta* peer, int iters) {
  (void)peer;
  uint8_t* src = alloc_aligned(4096, MAX_MSG);
  uint8_t* back = alloc_aligned(4096, MAX_MSG + GUARD);
  if (!src || !back) die("alloc");
  struct ibv_mr* smr = reg(s, src, MAX_MSG);
  struct ibv_mr* bmr = reg(s, back, MAX_MSG + GUARD);
  uint32_t drkey;
  uint64_t daddr;
  get_all(fd, &drkey, sizeof drkey);
  get_all(fd, &daddr, sizeof daddr);
  double t_start = now_s();
  uint64_t bytes = 0;
  for (int it = 0; it < iters; it++) {
    const uint32_t size = kSizes[(size_t)it % (sizeof kSizes / sizeof kSizes[0])];
    for (size_t i = 0; i < size; i++) src[i] = pattern((uint32_t)it, i);
    // Wait for the receiver's record in memory (nothing in the CQ says it came).
    volatile struct cts* c = &fifo[it % FIFO_SLOTS];
    double t0 = now_s();
    while (c->seq != (uint64_t)it + 1) {
      struct ibv_wc wc;
      if (poll_one(s, &wc)) die("a completion nobody asked for while waiting for CTS");
      check_deadline(t0, "the receiver's clear-to-send record");
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    const struct cts got = {.addr = c->addr, .rkey = c->rkey, .size = c->size, .seq = c->seq};
    if (got.size != size || got.rkey != drkey || got.addr < daddr) die("CTS record does not match the iteration");
    // Per QP: its share in chunks of unequal lengths, all unsignaled RDMA_WRITE
    // but the last, a signaled RDMA_WRITE_WITH_IMM, posted as one chain.
    for (int q = 0; q < s->nqps; q++) {
      uint32_t off, len;
      share(size, s->nqps, q, &off, &len);
      struct ibv_sge sges[4];
      struct ibv_send_wr wrs[4], *bad;
      uint32_t cuts[5] = {0, len / 5, len / 2, len - len / 7, len};
      int n = 0;
      for (int k = 0; k < 4; k++) {
        uint32_t a = cuts[k], b = cuts[k + 1];
        if (b == a && k != 3) continue;  // empty chunks dropped, the last (with IMM) kept
        sges[n] = (struct ibv_sge){.addr = (uint64_t)(uintptr_t)(src + off + a), .length = b - a, .lkey = smr->lkey};
        // A zero-byte write carries no SGE at all (NCCL's empty share).
        wrs[n] = (struct ibv_send_wr){.wr_id = ((uint64_t)it << 8) | (uint64_t)q, .sg_list = b > a ? &sges[n] : NULL,
                                      .num_sge = b > a ? 1 : 0, .opcode = IBV_WR_RDMA_WRITE};
        wrs[n].wr.rdma.remote_addr = got.addr + off + a;
        wrs[n].wr.rdma.rkey = got.rkey;
        if (n) wrs[n - 1].next = &wrs[n];
        n++;
      }
      wrs[n - 1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      wrs[n - 1].imm_data = htonl(imm_of((uint32_t)it, (uint32_t)q, size));
      wrs[n - 1].send_flags = IBV_SEND_SIGNALED;
      if (ibv_post_send(s->qp[q], &wrs[0], &bad)) die("ibv_post_send (WRITE chain)");
    }
    uint64_t ids[MAX_QPS];
    for (int q = 0; q < s->nqps; q++) ids[q] = ((uint64_t)it << 8) | (uint64_t)q;
    wait_sends(s, ids, s->nqps, IBV_WC_RDMA_WRITE);
    // Read the destination back (message and the guard after it) and compare.
    memset(back, 0xee, size + GUARD);
    struct ibv_sge rs = {.addr = (uint64_t)(uintptr_t)back, .length = size + GUARD, .lkey = bmr->lkey};
    struct ibv_send_wr rd = {.wr_id = 0xeadull << 32 | (uint64_t)it, .sg_list = &rs, .num_sge = 1,
                             .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    rd.wr.rdma.remote_addr = got.addr;
    rd.wr.rdma.rkey = got.rkey;
    if (ibv_post_send(s->qp[s->nqps - 1], &rd, &bad)) die("ibv_post_send (RDMA_READ)");
    wait_sends(s, &rd.wr_id, 1, IBV_WC_RDMA_READ);
    for (size_t i = 0; i < size + GUARD; i++) {
      const uint8_t want = i < size ? pattern((uint32_t)it, i) : 0;
      if (back[i] != want) {
        fprintf(stderr, "nccl_like sender: FAIL: iteration %d (%u B): RDMA_READ byte %zu is %#x, expected %#x\n", it,
                size, i, back[i], want);
        return 1;
      }
    }
    bytes += size;
  }
  const double dt = now_s() - t_start;
  uint32_t done = 0x600d;
  put_all(fd, &done, sizeof done);
  ibv.dereg_mr(smr);
  ibv.dereg_mr(bmr);
  free(src);
  free(back);
  printf("sender: PASS: %d messages, %llu bytes written and read back on %d QP(s) in %.3f s (%.1f MB/s)\n", iters,
         (unsigned long long)bytes, s->nqps, dt, (double)bytes / dt / 1e6);
  return 0;
}

// The connection's counters through the extension API, when the library is
// mroce's; returns the retransmissions this end made.
static long report_conn(void* lib, struct side* s) {
  int (*query_conn)(struct ibv_qp*, struct mroce_conn_info*);
  *(void**)&query_conn = dlsym(lib, "mroce_query_conn");
  if (!query_conn) {
    printf("%s: not an mroce library (no mroce_query_conn)\n", g_role);
    return -1;
  }
  long retx = 0;
  for (int q = 0; q < s->nqps; q++) {
    struct mroce_conn_info ci;
    int r = query_conn(s->qp[q], &ci);
    if (r) {
      errno = r;
      die("mroce_query_conn");
    }
    printf("%s: qp %d: connection %u stream %u to %s, %u paths, tx %llu packets, retransmits %llu, duplicates %llu\n",
           g_role, q, ci.conn_id, ci.stream_id, ci.peer, ci.num_paths, (unsigned long long)ci.tx_data_packets,
           (unsigned long long)ci.retransmits, (unsigned long long)ci.duplicates);
    retx = (long)ci.retransmits;  // per connection: every QP of it reports the same
  }
  return retx;
}

int main(int argc, char** argv) {
  const char* dev = "mroce0";
  const char* host = NULL;
  int port = 18620, iters = 24, nqps = 2, by_lid = 0, need_retx = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-d") && i + 1 < argc) dev = argv[++i];
    else if (!strcmp(argv[i], "-p") && i + 1 < argc) port = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-q") && i + 1 < argc) nqps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-l")) by_lid = 1;
    else if (!strcmp(argv[i], "-r")) need_retx = 1;
    else if (argv[i][0] != '-' && !host) host = argv[i];
    else {
      fprintf(stderr, "usage: nccl_like [-d DEV] [-p TCPPORT] [-n ITERS] [-q QPS(1..%d)] [-l] [-r] [SERVER]\n", MAX_QPS);
      return 2;
    }
  }
  if (nqps < 1 || nqps > MAX_QPS || iters < 1) {
    fprintf(stderr, "nccl_like: -q must be 1..%d and -n at least 1\n", MAX_QPS);
    return 2;
  }
  g_role = host ? "sender" : "receiver";
  srand48((long)getpid());

  void* lib = load_verbs();
  struct side s = {0};
  open_side(&s, dev, nqps);

  pthread_t async;
  if (pthread_create(&async, NULL, async_thread, s.ctx)) die("pthread_create");

  // The sender's CTS fifo is remote-writable; the receiver has none.
  struct cts* fifo = alloc_aligned(64, FIFO_SLOTS * sizeof(struct cts));
  if (!fifo) die("alloc");
  memset(fifo, 0, FIFO_SLOTS * sizeof(struct cts));
  struct ibv_mr* fmr = host ? reg(&s, fifo, FIFO_SLOTS * sizeof(struct cts)) : NULL;

  struct meta me, peer;
  fill_meta(&s, &me, (uint64_t)(uintptr_t)fifo, fmr ? fmr->rkey : 0);
  int fd = host ? tcp_connect(host, port) : tcp_accept(port);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  put_all(fd, &me, sizeof me);
  get_all(fd, &peer, sizeof peer);
  if (peer.nqps != me.nqps) {
    fprintf(stderr, "nccl_like %s: FAIL: the peer has %u QPs, this end %u: give both the same -q\n", g_role,
            peer.nqps, me.nqps);
    return 1;
  }
  if (!s.link_eth && !by_lid) {
    fprintf(stderr, "nccl_like %s: InfiniBand link layer: addressing by LID\n", g_role);
    by_lid = 1;
  }
  connect_qps(&s, &me, &peer, by_lid);
  // Both ends in RTS before the first CTS (NCCL's connect handshake).
  char b = 1;
  put_all(fd, &b, 1);
  get_all(fd, &b, 1);

  int rc = host ? run_sender(&s, fd, fifo, &peer, iters) : run_receiver(&s, fd, &me, &peer, iters);
  if (host) {
    // Let the receiver finish its teardown handshake before our QPs go.
    uint8_t bye = 0;
    (void)!read(fd, &bye, 1);
  } else {
    uint8_t bye = 1;
    put_all(fd, &bye, 1);
  }
  close(fd);
  const long retx = report_conn(lib, &s);
  if (need_retx && host && retx <= 0) {
    fprintf(stderr, "nccl_like sender: FAIL: -r: no retransmission under injected loss (%ld)\n", retx);
    rc = 1;
  }
  if (atomic_load(&g_async_fatal)) {
    fprintf(stderr, "nccl_like %s: FAIL: a fatal async event came during the run\n", g_role);
    rc = 1;
  }

  for (int q = 0; q < s.nqps; q++)
    if (ibv.destroy_qp(s.qp[q])) die("ibv_destroy_qp");
  if (fmr && ibv.dereg_mr(fmr)) die("ibv_dereg_mr");
  if (ibv.destroy_cq(s.cq)) die("ibv_destroy_cq");
  if (ibv.dealloc_pd(s.pd)) die("ibv_dealloc_pd");
  // NCCL ends its async thread with pthread_cancel while it blocks in
  // ibv_get_async_event.
  while (!atomic_load(&g_async_running)) usleep(1000);
  pthread_cancel(async);
  pthread_join(async, NULL);
  if (ibv.close_device(s.ctx)) die("ibv_close_device");
  free(fifo);  // NCCL never dlcloses the library
  return rc;
}
