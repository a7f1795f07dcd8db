// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The verbs provider's semantics (doc/verbs.md), through the public verbs
// API exactly as an application calls it, against a peer process: this
// binary run again with --peer SCENARIO and its own configuration (another
// loopback address), connected by a socketpair for the out-of-band exchange
// real programs do over TCP. What the programs under test/verbs do not
// reach: every opcode through ibv_wr_* with lists and inline data reused at
// once, receives posted in INIT, QPs sharing one connection, flushes, CQ
// events, SRQ limit events, a dead peer's QP_FATAL, and the errors verbs
// promises for what mroce does not offer.
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <stdexcept>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mroce/verbs_ext.h"

namespace {

// Setup steps shared by the test cases and the peer process (which has no
// Catch session): a failure throws, which Catch reports and the peer prints.
#define MUST(c)                                                                                  \
    do {                                                                                         \
        if (!(c)) throw std::runtime_error(std::string(__FILE__ ":") + std::to_string(__LINE__) + \
                                           ": " #c " failed (errno " + std::to_string(errno) + ")"); \
    } while (0)

constexpr size_t kBuf = 1 << 20;
constexpr int kPeerFd = 3;  // the socketpair end a peer inherits
std::string g_self;
uint16_t g_port = 0;

// ---- the out-of-band channel ----
void put(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n) {
        const ssize_t w = ::write(fd, c, n);
        if (w <= 0) throw std::runtime_error("oob write failed");
        c += w, n -= size_t(w);
    }
}
void get(int fd, void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n) {
        const ssize_t r = ::read(fd, c, n);
        if (r <= 0) throw std::runtime_error("oob read failed (peer gone)");
        c += r, n -= size_t(r);
    }
}
template <class T>
void put(int fd, const T& v) { put(fd, &v, sizeof v); }
template <class T>
T get(int fd) {
    T v;
    get(fd, &v, sizeof v);
    return v;
}

struct Endpoint {
    uint32_t qpn = 0;
    uint16_t lid = 0;
    ibv_gid gid{};
    uint64_t addr = 0;
    uint32_t rkey = 0;
};

uint8_t pattern(uint64_t i, uint8_t seed) { return uint8_t(i * 131 + seed * 7 + (i >> 9)); }

std::string write_config(const char* addr) {
    char path[] = "/tmp/mroce-verbs-test-XXXXXX";
    const int fd = ::mkstemp(path);
    std::string text = "[engine]\nconn_timeout_ms = 400\n[device d]\naddress = " + std::string(addr) +
                       "\nport = " + std::to_string(g_port) + "\npath_port_base = " + std::to_string(g_port + 1) +
                       "\n";
    put(fd, text.data(), text.size());
    ::close(fd);
    return path;
}

// One side: device, PD, CQ, a registered buffer, its QPs.
struct Side {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_comp_channel* ch = nullptr;
    ibv_cq* cq = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
    ibv_mr* mr = nullptr;

    explicit Side(bool channel = false, uint8_t seed = 1) {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        MUST(list);
        for (int i = 0; i < n; ++i)
            if (mroce_is_mroce_device(list[i])) {
                ctx = ibv_open_device(list[i]);
                break;
            }
        ibv_free_device_list(list);
        MUST(ctx);
        pd = ibv_alloc_pd(ctx);
        MUST(pd);
        if (channel) MUST((ch = ibv_create_comp_channel(ctx)));
        cq = ibv_create_cq(ctx, 257, this, ch, 0);
        MUST(cq);
        for (size_t i = 0; i < kBuf; ++i) buf[i] = pattern(i, seed);
        mr = ibv_reg_mr(pd, buf.data(), kBuf,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                            IBV_ACCESS_REMOTE_ATOMIC);
        MUST(mr);
    }
    ~Side() {
        if (mr) ibv_dereg_mr(mr);
        if (cq) ibv_destroy_cq(cq);
        if (ch) ibv_destroy_comp_channel(ch);
        if (pd) ibv_dealloc_pd(pd);
        if (ctx) ibv_close_device(ctx);
    }
    ibv_qp* qp(ibv_srq* srq = nullptr, uint32_t send_wr = 37, uint32_t recv_wr = 23) {
        ibv_qp_init_attr_ex a{};
        a.send_cq = cq;
        a.recv_cq = cq;
        a.srq = srq;
        a.cap.max_send_wr = send_wr;
        a.cap.max_recv_wr = recv_wr;
        a.cap.max_send_sge = 3;
        a.cap.max_recv_sge = 3;
        a.cap.max_inline_data = 64;
        a.qp_type = IBV_QPT_RC;
        a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        a.pd = pd;
        a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                           IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                           IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
        ibv_qp* q = ibv_create_qp_ex(ctx, &a);
        MUST(q);
        to_init(q);
        return q;
    }
    static void to_init(ibv_qp* q) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        MUST(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    }
    Endpoint ep(ibv_qp* q) const {
        Endpoint e;
        e.qpn = q->qp_num;
        ibv_port_attr pa{};
        MUST(ibv_query_port(ctx, 1, &pa) == 0);
        e.lid = pa.lid;
        MUST(ibv_query_gid(ctx, 1, 0, &e.gid) == 0);
        e.addr = reinterpret_cast<uintptr_t>(buf.data());
        e.rkey = mr->rkey;
        return e;
    }
    static void connect(ibv_qp* q, const Endpoint& r, bool by_gid = true) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_4096;
        a.dest_qp_num = r.qpn;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 4;
        a.min_rnr_timer = 12;
        a.ah_attr.port_num = 1;
        a.ah_attr.dlid = r.lid;
        if (by_gid) {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid = r.gid;
            a.ah_attr.grh.hop_limit = 1;
        }
        MUST(ibv_modify_qp(q, &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = 0;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 4;
        MUST(ibv_modify_qp(q, &a,
                              IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_MAX_QP_RD_ATOMIC) == 0);
    }
    // Polls until n completions arrived or timeout; returns them.
    std::vector<ibv_wc> wait(size_t n, int timeout_ms = 5000) {
        std::vector<ibv_wc> out;
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (out.size() < n && std::chrono::steady_clock::now() < end) {
            ibv_wc wc[8];
            const int k = ibv_poll_cq(cq, 8, wc);
            MUST(k >= 0);
            out.insert(out.end(), wc, wc + k);
        }
        return out;
    }
};

void post_recv(ibv_qp* q, uint64_t id, std::vector<ibv_sge> sges) {
    ibv_recv_wr w{}, *bad = nullptr;
    w.wr_id = id;
    w.sg_list = sges.empty() ? nullptr : sges.data();
    w.num_sge = int(sges.size());
    MUST(ibv_post_recv(q, &w, &bad) == 0);
}

// The peer of a scenario: spawned with its own configuration.
struct Peer {
    pid_t pid = -1;
    int fd = -1;
    explicit Peer(const char* scenario) {
        int sv[2];
        MUST(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        const std::string conf = write_config("127.0.0.42");
        pid = ::fork();
        MUST(pid >= 0);
        if (pid == 0) {
            ::dup2(sv[1], kPeerFd);
            ::setenv("MROCE_CONFIG", conf.c_str(), 1);
            ::execl(g_self.c_str(), g_self.c_str(), "--peer", scenario, nullptr);
            ::_exit(127);
        }
        ::close(sv[1]);
        fd = sv[0];
    }
    int finish() {
        int st = 0;
        ::close(fd);
        ::waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
};

}  // namespace

// ---------------------------------------------------------------------------
// Peer scenarios (the other process). Exit 0 when everything it checked held.

namespace peer {

#define PEER_CHECK(c)                                                                 \
    do {                                                                              \
        if (!(c)) {                                                                   \
            std::fprintf(stderr, "peer: %s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

// Target of every operation of "ops": receives posted in INIT (before RTR).
int ops() {
    Side s(false, 2);
    ibv_qp* q = s.qp();
    // wr 1: SGE-less (WRITE_WITH_IMM), wr 2: a 3-entry list for the inline SEND, wr 3: one buffer for the list SEND.
    post_recv(q, 1, {});
    uint8_t* b = s.buf.data();
    post_recv(q, 2, {{uintptr_t(b + 900000), 10, s.mr->lkey}, {uintptr_t(b + 910000), 10, s.mr->lkey},
                     {uintptr_t(b + 920000), 40, s.mr->lkey}});
    post_recv(q, 3, {{uintptr_t(b + 950000), 5000, s.mr->lkey}});
    put(kPeerFd, s.ep(q));
    Side::connect(q, get<Endpoint>(kPeerFd));
    get<char>(kPeerFd);  // the other side's work completed
    const auto wc = s.wait(3);
    PEER_CHECK(wc.size() == 3);
    PEER_CHECK(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM);
    PEER_CHECK((wc[0].wc_flags & IBV_WC_WITH_IMM) && wc[0].imm_data == htonl(0x12345678) && wc[0].byte_len == 3001);
    PEER_CHECK(wc[1].wr_id == 2 && wc[1].status == IBV_WC_SUCCESS && wc[1].opcode == IBV_WC_RECV && wc[1].byte_len == 48);
    PEER_CHECK(wc[2].wr_id == 3 && wc[2].status == IBV_WC_SUCCESS && wc[2].byte_len == 4097);
    for (const ibv_wc& w : wc) PEER_CHECK(w.qp_num == q->qp_num);
    // Bytes: the list WRITE at 0 (its pieces from the writer's 1000, 5000, 9000: 100 + 1 + 4000).
    std::vector<uint8_t> want;
    for (uint64_t i = 1000; i < 1100; ++i) want.push_back(pattern(i, 1));
    want.push_back(pattern(5000, 1));
    for (uint64_t i = 9000; i < 13000; ++i) want.push_back(pattern(i, 1));
    PEER_CHECK(std::memcmp(b, want.data(), want.size()) == 0);
    PEER_CHECK(b[want.size()] == pattern(want.size(), 2));  // not one byte more
    for (uint64_t i = 0; i < 3001; ++i) PEER_CHECK(b[200000 + i] == pattern(20000 + i, 1));  // WRITE_WITH_IMM
    // Inline SEND: 48 bytes 'I' then 'J', scattered 10 / 10 / 28 (the third entry's rest untouched).
    const uint8_t* p[3] = {b + 900000, b + 910000, b + 920000};
    for (int i = 0; i < 10; ++i) PEER_CHECK(p[0][i] == 'I' && p[1][i] == 'I');
    for (int i = 0; i < 28; ++i) PEER_CHECK(p[2][i] == (i < 20 ? 'I' : 'J'));
    PEER_CHECK(p[2][28] == pattern(920028, 2));
    for (uint64_t i = 0; i < 4097; ++i) PEER_CHECK(b[950000 + i] == pattern(40000 + i, 1));
    // Atomics: the word at 8192 was CAS'd (compare hit) then FADD'ed.
    uint64_t word;
    std::memcpy(&word, b + 8192, 8);
    PEER_CHECK(word == 0xabcdef0000000000ull + 5);
    put(kPeerFd, 'k');
    get<char>(kPeerFd);
    ibv_destroy_qp(q);
    return 0;
}

// "shared": three QPs to one peer device.
int shared() {
    Side s(false, 3);
    ibv_qp* q[3] = {s.qp(), s.qp(), s.qp()};
    for (auto* x : q) put(kPeerFd, s.ep(x));
    for (auto* x : q) Side::connect(x, get<Endpoint>(kPeerFd), false);  // by LID
    get<char>(kPeerFd);
    for (auto* x : q) ibv_destroy_qp(x);
    return 0;
}

// "events": SENDs to a peer whose CQ is armed / whose SRQ has a limit.
int events() {
    Side s(false, 4);
    ibv_qp* q = s.qp();
    put(kPeerFd, s.ep(q));
    Side::connect(q, get<Endpoint>(kPeerFd));
    const int n = get<int>(kPeerFd);
    for (int i = 0; i < n; ++i) {
        ibv_sge sge{uintptr_t(s.buf.data() + i * 64), 64, s.mr->lkey};
        ibv_send_wr w{}, *bad = nullptr;
        w.wr_id = uint64_t(i);
        w.opcode = IBV_WR_SEND;
        w.send_flags = IBV_SEND_SIGNALED;
        w.sg_list = &sge;
        w.num_sge = 1;
        PEER_CHECK(ibv_post_send(q, &w, &bad) == 0);
    }
    const auto wc = s.wait(size_t(n));
    PEER_CHECK(wc.size() == size_t(n));
    for (const auto& w : wc) PEER_CHECK(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_SEND);
    put(kPeerFd, 'k');
    get<char>(kPeerFd);
    ibv_destroy_qp(q);
    return 0;
}

// "vanish": connects, then dies without a word.
int vanish() {
    Side s(false, 5);
    ibv_qp* q = s.qp();
    put(kPeerFd, s.ep(q));
    Side::connect(q, get<Endpoint>(kPeerFd));
    get<char>(kPeerFd);
    ::_exit(0);
}

int run(const std::string& name) {
    try {
        if (name == "ops") return ops();
        if (name == "shared") return shared();
        if (name == "events") return events();
        if (name == "vanish") return vanish();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "peer %s: %s\n", name.c_str(), e.what());
        return 1;
    }
    std::fprintf(stderr, "peer: unknown scenario %s\n", name.c_str());
    return 2;
}

}  // namespace peer

int main(int argc, char** argv) {
    g_self = "/proc/self/exe";
    char exe[4096];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) g_self.assign(exe, size_t(n));
    const char* port = std::getenv("MROCE_TEST_PORT");
    // Below the kernel's ephemeral range (32768-60999), where clients of other tests bind.
    g_port = port ? uint16_t(std::atoi(port)) : uint16_t(20000 + (::getpid() % 6000) * 2);
    if (argc == 3 && std::strcmp(argv[1], "--peer") == 0) return peer::run(argv[2]);
    ::setenv("MROCE_CONFIG", write_config("127.0.0.41").c_str(), 1);
    ::setenv("MROCE_TEST_PORT", std::to_string(g_port).c_str(), 1);  // peers use the same port
    ::signal(SIGPIPE, SIG_IGN);
    return Catch::Session().run(argc, argv);
}

// ---------------------------------------------------------------------------

TEST_CASE("every opcode through ibv_wr_*, with lists, inline data reused at once, receives posted in INIT",
          "[verbs]") {
    Peer pr("ops");
    Side s(false, 1);
    ibv_qp* q = s.qp();
    ibv_qp_ex* x = ibv_qp_to_qp_ex(q);
    REQUIRE(x);
    const Endpoint r = get<Endpoint>(pr.fd);
    put(pr.fd, s.ep(q));
    Side::connect(q, r);
    uint8_t* b = s.buf.data();
    const uint32_t lk = s.mr->lkey;
    // The atomic word at the peer's 8192 is set by a WRITE first (8 bytes, ordered before the CAS).
    const uint64_t start = 0xabcdef0000000000ull;
    std::memcpy(b + 600000, &start, 8);
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, r.rkey, r.addr);
    const ibv_sge list[3] = {{uintptr_t(b + 1000), 100, lk}, {uintptr_t(b + 5000), 1, lk}, {uintptr_t(b + 9000), 4000, lk}};
    ibv_wr_set_sge_list(x, 3, list);
    x->wr_id = 2;
    ibv_wr_rdma_write_imm(x, r.rkey, r.addr + 200000, htonl(0x12345678));
    ibv_wr_set_sge(x, lk, uintptr_t(b + 20000), 3001);
    x->wr_id = 3;
    char inl[48];
    std::memset(inl, 'I', 40);
    std::memset(inl + 40, 'J', 8);
    ibv_wr_send(x);
    const ibv_data_buf parts[2] = {{inl, 22}, {inl + 22, 26}};
    ibv_wr_set_inline_data_list(x, 2, parts);
    std::memset(inl, 'X', sizeof inl);  // verbs: the buffer is the caller's again once the setter returns
    x->wr_id = 4;
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lk, uintptr_t(b + 40000), 4097);
    x->wr_id = 5;
    ibv_wr_rdma_write(x, r.rkey, r.addr + 8192);
    ibv_wr_set_sge(x, lk, uintptr_t(b + 600000), 8);
    x->wr_id = 6;
    ibv_wr_atomic_cmp_swp(x, r.rkey, r.addr + 8192, start, start + 3);
    ibv_wr_set_sge(x, lk, uintptr_t(b + 700000), 8);
    x->wr_id = 7;
    ibv_wr_atomic_fetch_add(x, r.rkey, r.addr + 8192, 2);
    ibv_wr_set_sge(x, lk, uintptr_t(b + 700008), 8);
    x->wr_id = 8;
    ibv_wr_rdma_read(x, r.rkey, r.addr + 300000);
    const ibv_sge rlist[2] = {{uintptr_t(b + 800000), 7, lk}, {uintptr_t(b + 810000), 5000, lk}};
    ibv_wr_set_sge_list(x, 2, rlist);
    REQUIRE(ibv_wr_complete(x) == 0);
    const auto wc = s.wait(8);
    REQUIRE(wc.size() == 8);
    const ibv_wc_opcode ops[8] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_SEND,
                                  IBV_WC_RDMA_WRITE, IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD, IBV_WC_RDMA_READ};
    for (size_t i = 0; i < 8; ++i) {
        INFO("wr " << wc[i].wr_id << ": " << ibv_wc_status_str(wc[i].status));
        CHECK(wc[i].wr_id == i + 1);
        CHECK(wc[i].status == IBV_WC_SUCCESS);
        CHECK(wc[i].opcode == ops[i]);
        CHECK(wc[i].qp_num == q->qp_num);
        CHECK(wc[i].src_qp == r.qpn);
    }
    CHECK(wc[7].byte_len == 5007);
    uint64_t cas_old, fadd_old;
    std::memcpy(&cas_old, b + 700000, 8);
    std::memcpy(&fadd_old, b + 700008, 8);
    CHECK(cas_old == start);
    CHECK(fadd_old == start + 3);
    // READ: the peer's 300000.. (seed 2) scattered 7 / 5000.
    for (uint64_t i = 0; i < 7; ++i) CHECK(b[800000 + i] == pattern(300000 + i, 2));
    bool same = true;
    for (uint64_t i = 0; i < 5000; ++i) same &= b[810000 + i] == pattern(300007 + i, 2);
    CHECK(same);
    CHECK(b[810000 + 5000] == pattern(815000, 1));
    put(pr.fd, 'd');
    CHECK(get<char>(pr.fd) == 'k');
    put(pr.fd, 'e');
    ibv_destroy_qp(q);
    CHECK(pr.finish() == 0);
}

TEST_CASE("QPs between the same two devices are streams of one connection; the extension API shows its paths",
          "[verbs][ext]") {
    Peer pr("shared");
    Side s(false, 1);
    ibv_qp* q[3] = {s.qp(), s.qp(), s.qp()};
    Endpoint r[3];
    for (auto& e : r) e = get<Endpoint>(pr.fd);
    for (auto* x : q) put(pr.fd, s.ep(x));
    for (int i = 0; i < 3; ++i) Side::connect(q[i], r[i], i != 1);  // one by LID, two by GID
    mroce_conn_info ci[3];
    for (int i = 0; i < 3; ++i) REQUIRE(mroce_query_conn(q[i], &ci[i]) == 0);
    CHECK(ci[0].conn_id == ci[1].conn_id);
    CHECK(ci[1].conn_id == ci[2].conn_id);
    CHECK(ci[0].stream_id != ci[1].stream_id);
    CHECK(ci[0].num_paths >= 1);
    CHECK(std::string(ci[0].peer).rfind("127.0.0.42:", 0) == 0);
    // The stream is named by the QP number of the lower address's end: ours (127.0.0.41).
    CHECK(ci[2].stream_id == q[2]->qp_num);
    mroce_path_info pi{};
    REQUIRE(mroce_query_path(q[0], 0, &pi) == 0);
    CHECK(pi.state == MROCE_PATH_ACTIVE);
    CHECK(pi.udp_src_port == g_port + 1 + pi.entropy % 16);
    CHECK(mroce_query_path(q[0], ci[0].num_paths, &pi) == EINVAL);
    // One-plane devices (R-PLANE-5): plane 0 is the device's address and carries everything.
    CHECK(ci[0].num_planes == 1);
    CHECK(pi.plane == 0);
    mroce_plane_info pl{};
    REQUIRE(mroce_query_plane(s.ctx, 0, &pl) == 0);
    CHECK(pl.num_planes == 1);
    CHECK(std::string(pl.address) == "127.0.0.41");
    CHECK(pl.tx_packets > 0);
    CHECK(mroce_query_plane(s.ctx, 1, &pl) == EINVAL);
    uint64_t mbps = 0;
    CHECK(mroce_query_rx_capacity(s.ctx, &mbps) == 0);
    CHECK(mbps > 0);
    // A write on each QP lands where that QP's peer said.
    for (int i = 0; i < 3; ++i) {
        ibv_sge sge{uintptr_t(s.buf.data() + i * 100), 100, s.mr->lkey};
        ibv_send_wr w{}, *bad = nullptr;
        w.wr_id = uint64_t(i);
        w.opcode = IBV_WR_RDMA_WRITE;
        w.send_flags = IBV_SEND_SIGNALED;
        w.sg_list = &sge;
        w.num_sge = 1;
        w.wr.rdma.remote_addr = r[i].addr + uint64_t(i) * 100;
        w.wr.rdma.rkey = r[i].rkey;
        REQUIRE(ibv_post_send(q[i], &w, &bad) == 0);
    }
    const auto wc = s.wait(3);
    REQUIRE(wc.size() == 3);
    for (const auto& w : wc) CHECK(w.status == IBV_WC_SUCCESS);
    put(pr.fd, 'd');
    for (auto* x : q) ibv_destroy_qp(x);
    CHECK(pr.finish() == 0);
}

TEST_CASE("CQ events through a completion channel; SRQ limit as an async event", "[verbs][events]") {
    Peer pr("events");
    Side s(true, 1);
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 10;
    sa.attr.max_sge = 1;
    ibv_srq* srq = ibv_create_srq(s.pd, &sa);
    REQUIRE(srq);
    ibv_srq_attr lim{};
    lim.srq_limit = 5;
    REQUIRE(ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT) == 0);
    for (int i = 0; i < 8; ++i) {
        ibv_sge sge{uintptr_t(s.buf.data() + 100000 + i * 64), 64, s.mr->lkey};
        ibv_recv_wr w{}, *bad = nullptr;
        w.wr_id = uint64_t(100 + i);
        w.sg_list = &sge;
        w.num_sge = 1;
        REQUIRE(ibv_post_srq_recv(srq, &w, &bad) == 0);
    }
    ibv_qp* q = s.qp(srq);
    const Endpoint r = get<Endpoint>(pr.fd);
    put(pr.fd, s.ep(q));
    Side::connect(q, r);
    REQUIRE(ibv_req_notify_cq(s.cq, 0) == 0);
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    // O_NONBLOCK on the channel's and the async fd (set by programs that
    // epoll them): no event yet gives -1 with EAGAIN, as rdma-core's read().
    const int chfl = fcntl(s.ch->fd, F_GETFL);
    REQUIRE(fcntl(s.ch->fd, F_SETFL, chfl | O_NONBLOCK) == 0);
    REQUIRE(fcntl(s.ctx->async_fd, F_SETFL, fcntl(s.ctx->async_fd, F_GETFL) | O_NONBLOCK) == 0);
    errno = 0;
    CHECK(ibv_get_cq_event(s.ch, &ev_cq, &ev_ctx) == -1);
    CHECK(errno == EAGAIN);
    ibv_async_event none{};
    errno = 0;
    CHECK(ibv_get_async_event(s.ctx, &none) == -1);
    CHECK(errno == EAGAIN);
    REQUIRE(fcntl(s.ch->fd, F_SETFL, chfl) == 0);  // the CQ event below blocks
    put(pr.fd, 4);  // four SENDs: posted entries 8 -> 4, below the limit of 5
    REQUIRE(ibv_get_cq_event(s.ch, &ev_cq, &ev_ctx) == 0);
    CHECK(ev_cq == s.cq);
    CHECK(ev_ctx == &s);
    ibv_ack_cq_events(ev_cq, 1);
    const auto wc = s.wait(4);
    REQUIRE(wc.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
        CHECK(wc[i].status == IBV_WC_SUCCESS);
        CHECK(wc[i].opcode == IBV_WC_RECV);
        CHECK(wc[i].wr_id == 100 + i);
        CHECK(wc[i].byte_len == 64);
    }
    ibv_async_event ae{};
    pollfd ap{s.ctx->async_fd, POLLIN, 0};  // the async fd, still non-blocking, polled as programs do
    REQUIRE(poll(&ap, 1, 10000) == 1);
    REQUIRE(ibv_get_async_event(s.ctx, &ae) == 0);
    CHECK(ae.event_type == IBV_EVENT_SRQ_LIMIT_REACHED);
    CHECK(ae.element.srq == srq);
    ibv_ack_async_event(&ae);
    ibv_srq_attr qa{};
    REQUIRE(ibv_query_srq(srq, &qa) == 0);
    CHECK(qa.srq_limit == 0);  // verbs: the limit disarms when it fires
    CHECK(get<char>(pr.fd) == 'k');
    put(pr.fd, 'e');
    CHECK(ibv_destroy_srq(srq) == EBUSY);  // a QP still uses it
    ibv_destroy_qp(q);
    CHECK(ibv_destroy_srq(srq) == 0);
    CHECK(pr.finish() == 0);
}

TEST_CASE("a peer that dies: outstanding work fails, the QP goes to ERR with IBV_EVENT_QP_FATAL", "[verbs][fatal]") {
    Peer pr("vanish");
    Side s(false, 1);
    ibv_qp* q = s.qp();
    const Endpoint r = get<Endpoint>(pr.fd);
    put(pr.fd, s.ep(q));
    Side::connect(q, r);
    put(pr.fd, 'x');
    pr.finish();  // gone
    ibv_sge sge{uintptr_t(s.buf.data()), 4096, s.mr->lkey};
    ibv_send_wr w{}, *bad = nullptr;
    w.wr_id = 77;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.wr.rdma.remote_addr = r.addr;
    w.wr.rdma.rkey = r.rkey;
    REQUIRE(ibv_post_send(q, &w, &bad) == 0);
    const auto t0 = std::chrono::steady_clock::now();
    const auto wc = s.wait(1, 5000);  // conn_timeout is 400 ms
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].wr_id == 77);
    CHECK(wc[0].status != IBV_WC_SUCCESS);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500));
    ibv_async_event ae{};
    REQUIRE(ibv_get_async_event(s.ctx, &ae) == 0);
    CHECK(ae.event_type == IBV_EVENT_QP_FATAL);
    CHECK(ae.element.qp == q);
    ibv_ack_async_event(&ae);
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    REQUIRE(ibv_query_qp(q, &qa, IBV_QP_STATE, &qi) == 0);
    CHECK(qa.qp_state == IBV_QPS_ERR);
    ibv_destroy_qp(q);
}

TEST_CASE("ERR flushes posted receives and later sends; the state machine refuses skipped steps", "[verbs][state]") {
    Side s(false, 1);
    ibv_qp* q = s.qp();
    ibv_sge sge{uintptr_t(s.buf.data()), 64, s.mr->lkey};
    ibv_send_wr sw{}, *sbad = nullptr;
    sw.opcode = IBV_WR_SEND;
    sw.sg_list = &sge;
    sw.num_sge = 1;
    CHECK(ibv_post_send(q, &sw, &sbad) == EINVAL);  // INIT: no sends yet
    CHECK(sbad == &sw);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE) == EINVAL);  // INIT -> RTS skips RTR
    a.qp_state = IBV_QPS_RTR;
    CHECK(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV) == EINVAL);  // required attributes missing
    // RTR toward a GID that is not IPv4-mapped.
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid.raw[0] = 0xfe;
    a.ah_attr.grh.dgid.raw[1] = 0x80;
    a.ah_attr.port_num = 1;
    a.path_mtu = IBV_MTU_1024;
    CHECK(ibv_modify_qp(q, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == EINVAL);
    ibv_qp_attr qa{};
    ibv_qp_init_attr qi{};
    REQUIRE(ibv_query_qp(q, &qa, IBV_QP_STATE, &qi) == 0);
    CHECK(qa.qp_state == IBV_QPS_INIT);
    CHECK(qi.cap.max_send_wr == 37);
    CHECK(qi.cap.max_recv_wr == 23);
    ibv_destroy_qp(q);

    // ERR with receives on a connected stream: flushed in order.
    Peer pr("shared");
    ibv_qp* c[3] = {s.qp(), s.qp(), s.qp()};
    Endpoint r[3];
    for (auto& e : r) e = get<Endpoint>(pr.fd);
    for (auto* x : c) put(pr.fd, s.ep(x));
    for (int i = 0; i < 3; ++i) Side::connect(c[i], r[i]);
    post_recv(c[0], 1, {{uintptr_t(s.buf.data()), 64, s.mr->lkey}});
    post_recv(c[0], 2, {});
    a = {};
    a.qp_state = IBV_QPS_ERR;
    REQUIRE(ibv_modify_qp(c[0], &a, IBV_QP_STATE) == 0);
    sw.wr_id = 3;
    sw.send_flags = IBV_SEND_SIGNALED;
    REQUIRE(ibv_post_send(c[0], &sw, &sbad) == 0);  // ERR: completes flushed
    const auto wc = s.wait(3);
    REQUIRE(wc.size() == 3);
    for (const auto& w : wc) CHECK(w.status == IBV_WC_WR_FLUSH_ERR);
    // The other QPs on the connection are untouched.
    ibv_qp_attr q1{};
    REQUIRE(ibv_query_qp(c[1], &q1, IBV_QP_STATE, &qi) == 0);
    CHECK(q1.qp_state == IBV_QPS_RTS);
    put(pr.fd, 'd');
    for (auto* x : c) ibv_destroy_qp(x);
    CHECK(pr.finish() == 0);
}

TEST_CASE("what mroce does not offer fails with the documented errno", "[verbs][unsupported]") {
    Side s(false, 1);
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = s.cq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.qp_type = IBV_QPT_UD;
    errno = 0;
    CHECK(ibv_create_qp(s.pd, &ia) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_sge = 33;
    errno = 0;
    CHECK(ibv_create_qp(s.pd, &ia) == nullptr);
    CHECK(errno == EINVAL);
    errno = 0;
    CHECK(ibv_reg_mr_iova2(s.pd, s.buf.data(), 4096, 0, IBV_ACCESS_LOCAL_WRITE) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    errno = 0;
    CHECK(ibv_reg_dmabuf_mr(s.pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    ibv_cq_init_attr_ex cx{};
    cx.cqe = 16;
    errno = 0;
    CHECK(ibv_create_cq_ex(s.ctx, &cx) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    ibv_ah_attr ah{};
    errno = 0;
    CHECK(ibv_create_ah(s.pd, &ah) == nullptr);
    CHECK(errno == EOPNOTSUPP);
    // Port and GID as the programs need them.
    ibv_port_attr pa{};
    REQUIRE(ibv_query_port(s.ctx, 1, &pa) == 0);
    CHECK(pa.state == IBV_PORT_ACTIVE);
    CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET);
    CHECK(pa.lid == 41);  // 127.0.0.41
    CHECK(pa.gid_tbl_len == 1);
    ibv_gid_entry ge{};
    REQUIRE(ibv_query_gid_ex(s.ctx, 1, 0, &ge, 0) == 0);
    CHECK(ge.gid_type == IBV_GID_TYPE_ROCE_V2);
    CHECK(ge.gid.raw[10] == 0xff);
    CHECK(ge.gid.raw[15] == 41);
    CHECK(ibv_query_port(s.ctx, 2, &pa) != 0);
    // The wr_* builder with an operation mroce lacks fails the batch and posts nothing.
    ibv_qp* q = s.qp();
    ibv_qp_ex* x = ibv_qp_to_qp_ex(q);
    ibv_wr_start(x);
    ibv_wr_local_inv(x, 1);
    CHECK(ibv_wr_complete(x) == EOPNOTSUPP);
    ibv_destroy_qp(q);
}

namespace {
void on_alarm(int) {}
}

TEST_CASE("a signal ends a blocked ibv_get_cq_event / ibv_get_async_event with -1 (qperf stops its tests so)",
          "[verbs][events]") {
    Side s(true, 1);
    struct sigaction sa {};
    sa.sa_handler = on_alarm;  // no SA_RESTART
    struct sigaction old {};
    REQUIRE(::sigaction(SIGALRM, &sa, &old) == 0);
    REQUIRE(ibv_req_notify_cq(s.cq, 0) == 0);
    ::ualarm(100'000, 0);
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    errno = 0;
    CHECK(ibv_get_cq_event(s.ch, &cq, &cq_ctx) == -1);
    CHECK(errno == EINTR);
    ::ualarm(100'000, 0);
    ibv_async_event ae{};
    CHECK(ibv_get_async_event(s.ctx, &ae) == -1);
    CHECK(errno == EINTR);
    ::sigaction(SIGALRM, &old, nullptr);
}
