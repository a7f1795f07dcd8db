// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-perf: a perftest-style (ib_write_bw / ib_write_lat) benchmark over the
// native API. One server process accepts one client, runs one test, exits.
//
// Setup is in-band: the client connects with mroce's own CONNECT handshake to
// the server's well-known UDP port, then sends a Hello on control stream 0 (op,
// size, streams, depth, its buffer's rkey/address for --lat); the server creates
// the data streams 1..N and its buffer, and answers with the buffer's
// rkey/address. At the end the client sends Done (messages per stream), the
// server verifies what it holds and answers with a Result (verification and
// its engine's drop counters), so the client's report covers both ends.
//
// The loop uses manual progress (no engine thread, no lock) with the device's
// spin-then-block idle, so two processes sharing two cores do not starve.
#include <getopt.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "check_pace.hpp"
#include "lat_sample.hpp"
#include "mroce/api.hpp"

using namespace mroce;
using mroce::perf::CheckPace;
using mroce::perf::kLatSampleEvery;
using mroce::perf::lat_sampled;

namespace {

constexpr uint32_t kMagic = 0x6D524F50;  // "mROP"
constexpr uint32_t kCtrl = 0;            // control stream id
constexpr uint32_t kMaxStreams = 64;
constexpr uint32_t kCtrlBuf = 1024;
// A data message's wr_id: stream, the latency-sample bit, slot, and the low
// 32 bits of its number in its stream (a completion retires every message of
// the stream up to it, unsignaled ones included: R-CMPL-2's post order).
constexpr uint64_t kTimedBit = 1ull << 47;
constexpr uint64_t data_wr_id(uint32_t s, bool timed, uint32_t k, uint64_t j) {
    return uint64_t(s) << 48 | (timed ? kTimedBit : 0) | uint64_t(k) << 32 | uint32_t(j);
}
constexpr uint32_t kDefaultCqMod = 100;  // perftest's (DEF_CQ_MOD)

enum class Op : uint32_t { write = 1, send = 2, read = 3, fadd = 4, cas = 5 };
constexpr bool is_atomic(Op o) { return o == Op::fadd || o == Op::cas; }

struct Hello {
    uint32_t magic = kMagic;
    uint32_t op = 0;
    uint32_t size = 0;
    uint32_t streams = 0;
    uint32_t depth = 0;
    uint32_t verify = 0;
    uint32_t lat = 0;
    uint32_t client_rkey = 0;
    uint64_t client_addr = 0;
};
struct Reply {
    uint32_t magic = kMagic;
    uint32_t status = 0;  // 0 ok, else errno-like
    uint32_t rkey = 0;
    uint32_t slots = 0;   // buffer slots per stream
    uint64_t addr = 0;
};
struct Done {
    uint32_t magic = kMagic;
    uint32_t streams = 0;
    uint64_t msgs[kMaxStreams] = {};
};
// Server-side counters carried back to the client.
struct Result {
    uint32_t magic = kMagic;
    uint32_t verify_ok = 0;
    uint64_t mismatches = 0;
    uint64_t received = 0;
    uint64_t rx_packets = 0, rx_decode_errors = 0, rx_truncated = 0, rx_bad_version = 0, rx_bad_type = 0,
             rx_oversized = 0, rx_inconsistent = 0, rx_unknown_conn = 0, rx_bad_path = 0, rx_stale = 0,
             udp_rx_truncated = 0, injected_drops = 0, injected_ce = 0;
    double cpu_s = 0;  // server process CPU (user + system) from its Reply to the client's Done
};

struct Opts {
    std::string server;  // empty: server mode
    uint16_t port = 0;   // 0: the config's
    uint16_t local_port = 0;
    uint32_t size = 65536;
    uint64_t iters = 0;
    double seconds = 0;
    Op op = Op::write;
    uint32_t paths = 0;
    uint32_t streams = 1;
    uint32_t depth = 0;
    uint32_t cq_mod = 0;  // 0: kDefaultCqMod
    uint32_t post_list = 1;
    bool json = false;
    bool verify = false;
    bool lat = false;
    // Derived in parse() from the flags below: every message of a stream uses its
    // first slot on both ends, as perftest's ib_*_bw do for messages above 2 KiB,
    // unless --slots or --verify (or an atomic op) gives each outstanding message its own.
    bool one_buffer = false;
    bool one_buffer_given = false, slots_given = false;
    std::string config;
    std::string device;
    double loss = 0, ce = 0;
    uint64_t seed = 1;
    uint32_t conn_timeout_ms = 0;
    uint32_t accept_timeout_s = 60;
    int64_t spin_us = -1;  // -1: the config's (--lat: at least 1000)
};

const char* op_name(Op o) {
    switch (o) {
    case Op::write: return "write";
    case Op::send: return "send";
    case Op::read: return "read";
    case Op::fadd: return "fadd";
    case Op::cas: return "cas";
    }
    return "?";
}

// CPU per packet survives a shared machine far better than Gbit/s does (other processes
// take wall time, not work per packet), so both ends report the CPU of the test.
double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void usage(FILE* f) {
    std::fprintf(f,
        "usage: mroce-perf [options]               server: waits for one client, runs its test, exits\n"
        "       mroce-perf [options] <server-ip>   client: runs the test against the server\n"
        "       mroce-perf [options] <ip0>,<ip1>,...  the same, the server given by its address on each\n"
        "                        plane (plane 0 first): the connection is set up over any plane that\n"
        "                        is up (the handshake tries them in turn, R-PLANE-6)\n"
        "  -p, --port P          server's well-known UDP port (default: the config's port, 4793)\n"
        "      --local-port P    client's own well-known port (default: server port + 200);\n"
        "                        path source ports are the next path_port_span ports after it\n"
        "                        (driver udp only: dpdk devices have their own addresses and share -p)\n"
        "  -s, --size BYTES      message size (default 65536; --lat, fadd, cas: 8)\n"
        "  -n, --iters N         messages in total, split evenly over the streams (default 5000, at\n"
        "                        most 8 GiB of them but 4 or more, unless -D)\n"
        "  -D, --duration S      run S seconds instead of a message count\n"
        "      --op write|send|read|fadd|cas   operation (default write); fadd and cas are 8-byte\n"
        "                        atomics (as ib_atomic_bw's FETCH_AND_ADD / CMP_AND_SWAP) on one\n"
        "                        word per stream at the server, always checked: message j of a\n"
        "                        stream must fetch j (fadd adds 1; cas swaps j for j+1) and the\n"
        "                        word must end at the stream's message count (executed exactly once)\n"
        "  -t, --depth N         outstanding messages per stream, 1..256 (default: 4 MiB worth,\n"
        "                        at least 2, at most 128)\n"
        "      --cq-mod N        request a completion for 1 message in N of each stream, as perftest's\n"
        "                        --cq-mod (default 100, at most half the depth), and for each stream's\n"
        "                        last message and every message of the latency sample; a completion\n"
        "                        retires its stream's messages before it (post order). --lat, fadd,\n"
        "                        cas and read --verify: every message (each is checked on completion)\n"
        "      --post-list N     post up to N messages of a stream in one call (Connection::try_post_sends,\n"
        "                        a verbs WR list), as perftest's --post_list; 1..64 (default 1, as\n"
        "                        perftest: one call per message)\n"
        "      --paths N         paths this side sends on (read data flows server->client: give it\n"
        "                        to the server too)\n"
        "      --streams N       data streams (QPs) on the connection, 1..%u (default 1)\n"
        "      --lat             latency mode: 8-byte RDMA WRITE ping-pong, reports round-trip time\n"
        "                        (both ends acknowledge at the start of their next pass, so each\n"
        "                        answer leaves right ahead of its ACK: Device::set_tx_order(before_rx))\n"
        "      --verify          byte-exact check of the transferred data (costs CPU: memset/memcmp;\n"
        "                        implies --slots)\n"
        "      --slots           every outstanding message of a stream has its own slot, local and\n"
        "                        remote (depth x size bytes per stream and end; implied by --verify)\n"
        "      --one-buffer      the default: every message of a stream uses the stream's first slot,\n"
        "                        local and remote, as perftest's ib_write_bw/ib_send_bw/ib_read_bw do\n"
        "                        for messages above 2 KiB (so the figures compare with theirs; the\n"
        "                        data stays cache-resident, like the raw UDP pair's buffers)\n"
        "      --json            one JSON object on stdout instead of the table\n"
        "      --config FILE     configuration file (default $MROCE_CONFIG, else built-in defaults)\n"
        "      --device NAME     device section of the configuration (default: the first)\n"
        "      --conn-timeout MS peer silent this long with work outstanding: connection error\n"
        "      --accept-timeout S  server gives up waiting for a client after S seconds (default 60)\n"
        "      --spin-us N       busy-poll N us after activity before blocking (udp: in epoll; dpdk:\n"
        "                        50 us naps) (default: the\n"
        "                        config's spin_us, 50; --lat: at least 1000 on the client, as waking\n"
        "                        from epoll costs more than a round trip). The server follows the\n"
        "                        config/flag of its own command line only: give it --spin-us 1000\n"
        "                        for --lat runs too.\n"
        "      --inject-loss P   TEST ONLY fault injector: drop received packets with probability P\n"
        "      --inject-ce P     TEST ONLY fault injector: mark received packets CE with probability P\n"
        "                        (both act on this process's receive side, before the engine sees\n"
        "                        the packet; seeded by --seed, default 1)\n"
        "  -h, --help\n"
        "Prints a progress line on stderr once per second, then goodput (payload Gbit/s), message\n"
        "rate, per-message completion latency percentiles (post to completion, over a sample of 1\n"
        "message in %u of each stream, its first included, chosen by a hash of the message's number,\n"
        "so a p99.9 needs some 16,000 messages; --lat: every round trip; JSON lat_samples: how many),\n"
        "and per path: packets, retransmits, losses, timeouts (and those proved spurious), tail-loss probes, ECN marks.\n"
        "Exit status: 0 ok, 1 usage/config error, 2 verification failed, 3 connection error (stderr then\n"
        "also shows the connection's and every path's state at the failure).\n",
        kMaxStreams, kLatSampleEvery);
}

[[noreturn]] void die_usage(const std::string& m) {
    std::fprintf(stderr, "mroce-perf: %s (see --help)\n", m.c_str());
    std::exit(1);
}

uint64_t num(const char* opt, const char* v, uint64_t lo, uint64_t hi) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long x = std::strtoull(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        die_usage(std::string(opt) + ": expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                  ", got '" + v + "'");
    return x;
}
double prob(const char* opt, const char* v) {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (!*v || *end || !(x >= 0 && x < 1)) die_usage(std::string(opt) + ": expected a probability in [0, 1)");
    return x;
}

Opts parse(int argc, char** argv) {
    Opts o;
    enum { O_OP = 1000, O_PATHS, O_STREAMS, O_JSON, O_CONFIG, O_LOSS, O_CE, O_VERIFY, O_LAT, O_SEED, O_CT, O_LP,
           O_DEV, O_AT, O_SPIN, O_ONEBUF, O_SLOTS, O_CQMOD, O_POSTLIST };
    static const option lo[] = {
        {"port", required_argument, nullptr, 'p'},     {"size", required_argument, nullptr, 's'},
        {"iters", required_argument, nullptr, 'n'},    {"duration", required_argument, nullptr, 'D'},
        {"depth", required_argument, nullptr, 't'},    {"op", required_argument, nullptr, O_OP},
        {"paths", required_argument, nullptr, O_PATHS}, {"streams", required_argument, nullptr, O_STREAMS},
        {"json", no_argument, nullptr, O_JSON},        {"config", required_argument, nullptr, O_CONFIG},
        {"inject-loss", required_argument, nullptr, O_LOSS}, {"inject-ce", required_argument, nullptr, O_CE},
        {"verify", no_argument, nullptr, O_VERIFY},    {"lat", no_argument, nullptr, O_LAT},
        {"seed", required_argument, nullptr, O_SEED},  {"conn-timeout", required_argument, nullptr, O_CT},
        {"local-port", required_argument, nullptr, O_LP}, {"device", required_argument, nullptr, O_DEV},
        {"accept-timeout", required_argument, nullptr, O_AT}, {"spin-us", required_argument, nullptr, O_SPIN},
        {"cq-mod", required_argument, nullptr, O_CQMOD}, {"post-list", required_argument, nullptr, O_POSTLIST},
        {"one-buffer", no_argument, nullptr, O_ONEBUF}, {"slots", no_argument, nullptr, O_SLOTS},
        {"help", no_argument, nullptr, 'h'},           {nullptr, 0, nullptr, 0}};
    bool size_given = false;
    int c;
    while ((c = getopt_long(argc, argv, "p:s:n:D:t:h", lo, nullptr)) != -1) {
        switch (c) {
        case 'p': o.port = uint16_t(num("--port", optarg, 1, 65535)); break;
        case 's': o.size = uint32_t(num("--size", optarg, 1, 1u << 30)); size_given = true; break;
        case 'n': o.iters = num("--iters", optarg, 1, UINT64_MAX); break;
        case 'D': {
            char* end = nullptr;
            o.seconds = std::strtod(optarg, &end);
            if (!*optarg || *end || !(o.seconds > 0 && o.seconds <= 3600)) die_usage("--duration: expected seconds in (0, 3600]");
            break;
        }
        case 't': o.depth = uint32_t(num("--depth", optarg, 1, 256)); break;
        case O_OP:
            if (!std::strcmp(optarg, "write")) o.op = Op::write;
            else if (!std::strcmp(optarg, "send")) o.op = Op::send;
            else if (!std::strcmp(optarg, "read")) o.op = Op::read;
            else if (!std::strcmp(optarg, "fadd")) o.op = Op::fadd;
            else if (!std::strcmp(optarg, "cas")) o.op = Op::cas;
            else die_usage(std::string("--op: expected write, send, read, fadd or cas, got '") + optarg + "'");
            break;
        case O_PATHS: o.paths = uint32_t(num("--paths", optarg, 1, 256)); break;
        case O_STREAMS: o.streams = uint32_t(num("--streams", optarg, 1, kMaxStreams)); break;
        case O_JSON: o.json = true; break;
        case O_CONFIG: o.config = optarg; break;
        case O_DEV: o.device = optarg; break;
        case O_LOSS: o.loss = prob("--inject-loss", optarg); break;
        case O_CE: o.ce = prob("--inject-ce", optarg); break;
        case O_VERIFY: o.verify = true; break;
        case O_ONEBUF: o.one_buffer_given = true; break;
        case O_SLOTS: o.slots_given = true; break;
        case O_LAT: o.lat = true; break;
        case O_SEED: o.seed = num("--seed", optarg, 1, UINT64_MAX); break;
        case O_CT: o.conn_timeout_ms = uint32_t(num("--conn-timeout", optarg, 1, 3'600'000)); break;
        case O_LP: o.local_port = uint16_t(num("--local-port", optarg, 1, 65535)); break;
        case O_AT: o.accept_timeout_s = uint32_t(num("--accept-timeout", optarg, 1, 86400)); break;
        case O_SPIN: o.spin_us = int64_t(num("--spin-us", optarg, 0, 1'000'000)); break;
        case O_CQMOD: o.cq_mod = uint32_t(num("--cq-mod", optarg, 1, 1024)); break;
        case O_POSTLIST: o.post_list = uint32_t(num("--post-list", optarg, 1, 64)); break;
        case 'h': usage(stdout); std::exit(0);
        default: usage(stderr); std::exit(1);
        }
    }
    if (optind < argc) o.server = argv[optind++];
    if (optind < argc) die_usage(std::string("unexpected argument '") + argv[optind] + "'");
    if (o.lat && !size_given) o.size = 8;
    if (o.lat && o.size != 8) die_usage("--lat measures 8-byte writes; drop -s");
    if (is_atomic(o.op)) {
        if (o.lat) die_usage("--lat measures 8-byte writes; drop --op " + std::string(op_name(o.op)));
        if (size_given && o.size != 8) die_usage("--op " + std::string(op_name(o.op)) + ": atomics are 8 bytes; drop -s");
        if (o.one_buffer_given) die_usage("--op " + std::string(op_name(o.op)) + ": every result needs its own slot; drop --one-buffer");
        o.size = 8;
        o.verify = true;  // cheap for atomics, and the exactly-once check is the point
    }
    if (o.iters && o.seconds > 0) die_usage("give -n or -D, not both");
    // Distinct slots are what lets both ends check every message's pattern.
    if (o.one_buffer_given && o.verify) die_usage("--one-buffer and --verify exclude each other");
    if (o.one_buffer_given && o.slots_given) die_usage("--one-buffer and --slots exclude each other");
    if (o.slots_given && o.lat) die_usage("--lat uses one 8-byte buffer; drop --slots");
    o.one_buffer = !o.slots_given && !o.verify && !o.lat;
    // 5,000 messages, but no more than 8 GiB by default: 5,000 messages of
    // 1 GiB would take over an hour on sockets.
    if (!o.iters && o.seconds <= 0)
        o.iters = o.lat ? 10000 : std::clamp<uint64_t>((uint64_t(8) << 30) / std::max<uint64_t>(o.size, 1), 4, 5000);
    return o;
}

// Deterministic content of a message slot, so both ends can check it without
// shipping the data twice.
inline uint64_t mix(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
void fill_pattern(uint8_t* p, size_t len, uint32_t stream, uint32_t slot) {
    const uint64_t seed = mix((uint64_t(stream) << 32) | slot);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        const uint64_t v = seed ^ (i * 0x100000001B3ull);
        std::memcpy(p + i, &v, 8);
    }
    const uint64_t v = seed ^ (i * 0x100000001B3ull);
    std::memcpy(p + i, &v, len - i);
}
bool check_pattern(const uint8_t* p, size_t len, uint32_t stream, uint32_t slot, std::vector<uint8_t>& scratch) {
    scratch.resize(len);
    fill_pattern(scratch.data(), len, stream, slot);
    return std::memcmp(p, scratch.data(), len) == 0;
}

// Runs work() on a thread of its own while this one keeps the device's
// progress going, so that local work longer than conn_timeout (allocating,
// filling or checking a 1 GiB buffer) leaves this end audible: its ACKs and
// its answers to the peer's keepalives (R-CONN-15) still go out. work() must
// not call the device.
template <class F>
void while_progressing(Device& dev, F&& work) {
    if (dev.config().progress == ProgressMode::automatic) {  // the engine thread answers
        work();
        return;
    }
    std::atomic<bool> done{false};
    std::exception_ptr err;
    std::thread t([&] {
        try {
            work();
        } catch (...) {
            err = std::current_exception();
        }
        done.store(true, std::memory_order_release);
    });
    while (!done.load(std::memory_order_acquire))
        if (dev.progress() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    t.join();
    if (err) std::rethrow_exception(err);
}

// Large buffers are allocated, filled and checked while progressing; small
// ones inline (a thread per message would cost more than the work).
constexpr size_t kBigWork = 16u << 20;
// How long a peer that is still heard may take to answer a control message:
// it may be allocating, filling or checking gigabytes. A dead or stuck peer
// is caught by the silence check (Ctrl::wait), not by this.
constexpr Time kPeerWorkLimit = 600'000'000'000;

uint32_t default_depth(uint32_t size) { return std::clamp<uint32_t>(uint32_t((4u << 20) / std::max(size, 1u)), 2, 128); }

// 1 message in this many of a stream asks for a completion (--cq-mod): at most
// half the depth, so that a window refills while its other half is in flight;
// 1 where each message is checked on its completion.
uint32_t cq_mod_of(const Opts& o, uint32_t depth) {
    if (o.lat || is_atomic(o.op) || (o.op == Op::read && o.verify)) return 1;
    return std::min(o.cq_mod ? o.cq_mod : kDefaultCqMod, std::max(depth / 2, 1u));
}

struct Ctrl {
    Device& dev;
    Connection conn;
    uint32_t cq;
    MemoryRegion mr;
    std::vector<uint8_t>& mem;  // [0, 8*kCtrlBuf): receive slots; [8*kCtrlBuf, +kCtrlBuf): send buffer
    uint64_t sent = 0;

    void post_recvs() {
        for (uint32_t i = 0; i < 8; ++i) conn.post_recv(kCtrl, RecvWr{i, mr.iova(i * kCtrlBuf), kCtrlBuf, mr.lkey});
    }
    template <class T>
    void send(const T& m) {
        static_assert(sizeof(T) <= kCtrlBuf);
        std::memcpy(mem.data() + 8 * kCtrlBuf, &m, sizeof m);
        conn.post_send(kCtrl, Connection::send_wr(1ull << 63 | sent++, mr, mr.iova(8 * kCtrlBuf), sizeof m));
    }
    // Polls the control CQ once: returns the received message's bytes, or empty.
    bool poll(std::vector<uint8_t>& out) {
        static Completion c[8];  // static: a local array is re-initialised every call (every pass of wait)
        const size_t n = dev.poll_cq(cq, c, 8);
        bool got = false;
        for (size_t i = 0; i < n; ++i) {
            if (c[i].status != WcStatus::success) {
                conn.check();
                throw ConnectionError(std::string("control message completed with ") + to_string(c[i].status));
            }
            if (c[i].opcode == WcOpcode::recv) {
                const uint64_t slot = c[i].wr_id;
                out.assign(mem.data() + slot * kCtrlBuf, mem.data() + slot * kCtrlBuf + c[i].byte_len);
                conn.post_recv(kCtrl, RecvWr{slot, mr.iova(slot * kCtrlBuf), kCtrlBuf, mr.lkey});
                got = true;
            }
        }
        return got;
    }
    template <class T>
    T wait(const char* what, Time timeout_ns, const std::function<void()>& each = {}) {
        std::vector<uint8_t> b;
        const Time end = dev.now() + timeout_ns;
        // A peer that died while we owe it nothing never trips conn_timeout
        // (that needs outstanding work): give up after as long without a packet.
        const Time silent_limit = std::max<Time>(dev.config().engine.conn_timeout, 1'000'000'000);
        uint64_t last_rx = dev.engine_stats().rx_packets;
        Time last_rx_t = dev.now();
        // The checks (silence, the connection's state, the timeout): CheckPace.
        for (CheckPace pace;;) {
            const bool moved = dev.progress() != 0;
            if (each) each();
            if (poll(b)) {
                T m;
                if (b.size() != sizeof m) throw Error(std::string(what) + ": unexpected message size " + std::to_string(b.size()));
                std::memcpy(&m, b.data(), sizeof m);
                if (m.magic != kMagic) throw Error(std::string(what) + ": bad magic");
                return m;
            }
            if (pace.due(moved)) {
                const uint64_t rx = dev.engine_stats().rx_packets;
                const Time t = dev.now();
                if (rx != last_rx) last_rx = rx, last_rx_t = t;
                else if (t - last_rx_t > silent_limit)
                    throw ConnectionError(std::string("waiting for ") + what + ": peer " + conn.peer_name() +
                                          " silent for " + std::to_string((t - last_rx_t) / 1'000'000) + " ms");
                conn.check();
                if (t > end) throw TimeoutError(std::string("no ") + what + " from the peer in time");
            }
            pace.idled(dev.idle(moved));
        }
    }
};

struct PathRow {
    PathStats ps;
};

double pct(std::vector<uint32_t>& v, double q) {
    if (v.empty()) return 0;
    const size_t k = std::min(v.size() - 1, size_t(q * double(v.size())));
    std::nth_element(v.begin(), v.begin() + long(k), v.end());
    return v[k] / 1000.0;
}

// The udp_* keys predate the DPDK driver and count whatever driver runs.
// tx_calls is udp_tx_syscalls under a name true of every driver (UDP: sendmmsg
// calls that took packets; DPDK: PMD transmit bursts); the old key stays for
// scripts. The DPDK driver does not count its receive bursts.
void print_engine_json(FILE* f, const EngineStats& e, const DeviceStats& d, const TransportStats& t) {
    std::fprintf(f,
        "{\"rx_packets\": %" PRIu64 ", \"tx_packets\": %" PRIu64 ", \"rx_decode_errors\": %" PRIu64
        ", \"rx_truncated\": %" PRIu64 ", \"rx_bad_version\": %" PRIu64 ", \"rx_bad_type\": %" PRIu64
        ", \"rx_oversized\": %" PRIu64 ", \"rx_inconsistent\": %" PRIu64 ", \"rx_unknown_conn\": %" PRIu64
        ", \"rx_bad_path\": %" PRIu64 ", \"rx_stale\": %" PRIu64 ", \"udp_rx_truncated\": %" PRIu64
        ", \"injected_drops\": %" PRIu64 ", \"injected_ce\": %" PRIu64 ", \"udp_tx_packets\": %" PRIu64
        ", \"udp_tx_syscalls\": %" PRIu64 ", \"udp_rx_packets\": %" PRIu64 ", \"udp_rx_syscalls\": %" PRIu64
        ", \"udp_tx_errors\": %" PRIu64 ", \"tx_calls\": %" PRIu64
        ", \"progress_passes\": %" PRIu64 ", \"idle_blocks\": %" PRIu64
        ", \"tx_retry_dropped\": %" PRIu64 ", \"place_jobs\": %" PRIu64 ", \"stage_copies\": %" PRIu64
        ", \"cc_feedback\": %" PRIu64 ", \"stage_cc_records\": %" PRIu64 "}",
        e.rx_packets, e.tx_packets, e.rx_decode_errors, e.rx_truncated, e.rx_bad_version, e.rx_bad_type,
        e.rx_oversized, e.rx_inconsistent, e.rx_unknown_conn, e.rx_bad_path, e.rx_stale, t.rx_truncated,
        d.injected_drops, d.injected_ce, t.tx_packets, t.tx_syscalls, t.rx_packets, t.rx_syscalls, t.tx_errors,
        t.tx_syscalls, d.passes, d.blocks, d.tx_retry_dropped, e.place_jobs, d.stage_copies, e.cc_feedback, d.stage_cc_records);
}

void print_path_table(FILE* f, const std::vector<PathStats>& paths) {
    std::fprintf(f, " %-5s %-7s %-12s %-8s %-8s %-8s %-8s %-8s %-8s %-9s %-9s %-7s\n", "path", "state", "tx_packets",
                 "retx", "losses", "rto", "spurious", "tlp", "ce", "srtt us", "min us", "cwnd");
    for (size_t p = 0; p < paths.size(); ++p)
        std::fprintf(f, " %-5zu %-7s %-12" PRIu64 " %-8" PRIu64 " %-8" PRIu64 " %-8" PRIu64 " %-8" PRIu64 " %-8" PRIu64
                     " %-8" PRIu64 " %-9.1f %-9.1f %-7.1f\n", p,
                     paths[p].state == PathStateKind::active ? "active" : "failed", paths[p].tx_packets,
                     paths[p].retransmits, paths[p].losses, paths[p].timeouts, paths[p].spurious_timeouts,
                     paths[p].tail_probes, paths[p].ce_marks, double(paths[p].srtt) / 1e3,
                     double(paths[p].min_rtt) / 1e3, paths[p].cwnd);
}

// Per-plane traffic of this end (R-PLANE-5): printed when the device has more than one plane.
void print_plane_table(FILE* f, const Device& dev) {
    if (dev.num_planes() < 2) return;
    std::fprintf(f, " %-5s %-16s %-12s %-14s %-12s %-14s\n", "plane", "address", "tx_packets", "tx_bytes", "rx_packets",
                 "rx_bytes");
    for (size_t p = 0; p < dev.num_planes(); ++p) {
        PlaneInfo i;
        if (!dev.query_plane(p, i)) continue;
        std::fprintf(f, " %-5zu %-16s %-12" PRIu64 " %-14" PRIu64 " %-12" PRIu64 " %-14" PRIu64 "\n", p,
                     i.address.c_str(), i.tx_packets, i.tx_bytes, i.rx_packets, i.rx_bytes);
    }
}

// What a user needs to tell a dead peer from a stalled transfer: printed to stderr when the
// connection fails, before the error itself.
void print_failure_state(const Device& dev, const Connection& conn) {
    const ConnStats cs = conn.stats();
    std::fprintf(stderr, "mroce-perf: state at the failure: data packets tx %" PRIu64 " rx %" PRIu64
                 ", retransmits %" PRIu64 ", duplicates %" PRIu64 ", NAKs sent %" PRIu64 " received %" PRIu64
                 ", peer hint %u kbit/s\n",
                 cs.tx_data_packets, cs.rx_data_packets, cs.retransmits, cs.duplicates, cs.naks_sent,
                 cs.naks_received, cs.rate_hint_kbps);
    std::vector<PathStats> paths(cs.num_paths);
    for (uint16_t p = 0; p < cs.num_paths; ++p) paths[p] = conn.path_stats(p);
    print_path_table(stderr, paths);
    std::fprintf(stderr, " engine and driver counters: ");
    print_engine_json(stderr, dev.engine_stats(), dev.device_stats(), dev.transport_stats());
    std::fprintf(stderr, "\n");
}

DeviceConfig make_cfg(const Opts& o, bool client) {
    const Config cfg = load_config(o.config);
    DeviceConfig d = cfg.device(o.device);
    const uint16_t server_port = o.port ? o.port : d.port;
    if (d.driver == "dpdk") {
        // Each DPDK device owns an address (and MAC); all of one fabric share the UDP port.
        if (o.local_port) die_usage("--local-port: not used with driver dpdk (each device has its own address; "
                                    "client and server share the UDP port)");
        d.port = server_port;
    } else if (client) {
        d.port = o.local_port ? o.local_port : uint16_t(server_port + 200);
        d.path_port_base = 0;
    } else if (o.port) {
        d.port = o.port;
        d.path_port_base = 0;
    }
    d.progress = ProgressMode::manual;
    if (o.spin_us >= 0) d.spin_us = uint32_t(o.spin_us);
    else if (o.lat) d.spin_us = std::max<uint32_t>(d.spin_us, 1000);
    if (o.paths) d.engine.num_paths = uint16_t(o.paths);
    if (o.conn_timeout_ms) d.engine.conn_timeout = Time(o.conn_timeout_ms) * 1'000'000;
    d.inject_loss = o.loss;
    d.inject_ce = o.ce;
    d.inject_seed = o.seed;
    return d;
}

constexpr uint32_t kAllAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

void check_wc(const Completion& c, Connection& conn) {
    if (c.status == WcStatus::success) return;
    conn.check();
    if (c.status == WcStatus::transport_err)
        throw ConnectionError("stream " + std::to_string(c.stream) + ": work request failed: transport_err "
                              "(peer unreachable)");
    throw Error("stream " + std::to_string(c.stream) + ": work request failed: " + to_string(c.status));
}

// ---------------------------------------------------------------------------

int run_server(const Opts& o) {
    const DeviceConfig dc = make_cfg(o, false);
    auto dev = open_device(dc);
    const uint32_t pd = dev->alloc_pd();
    const uint32_t ccq = dev->create_cq(64);
    const uint32_t dcq = dev->create_cq(1 << 16);
    std::vector<uint8_t> cmem(9 * kCtrlBuf);
    const MemoryRegion cmr = dev->register_mr(pd, cmem.data(), cmem.size(), kAccessLocalWrite);
    dev->set_accept_streams({StreamSpec{kCtrl, pd, ccq, ccq}});
    if (!o.json)
        std::fprintf(stderr, "mroce-perf server: listening on %s (%u paths, max_payload %u)\n",
                     dev->transport().describe().c_str(), dc.engine.num_paths, dev->config().engine.max_payload);
    Connection conn = dev->accept(Time(o.accept_timeout_s) * 1'000'000'000);
    try {
        Ctrl ctrl{*dev, conn, ccq, cmr, cmem};
        ctrl.post_recvs();
        const Hello h = ctrl.wait<Hello>("Hello", kPeerWorkLimit);
        if (h.streams < 1 || h.streams > kMaxStreams || h.size < 1 || h.depth < 1 || h.depth > 256)
            throw Error("client sent invalid parameters");
        const Op op = Op(h.op);
        // Latency: the answer to each ping leaves with its ACK (Device::set_tx_order).
        if (h.lat) dev->set_tx_order(TxOrder::before_rx);
        const uint32_t slots = op == Op::send ? 2 * h.depth : h.depth;
        const size_t size = h.lat ? 64 : h.size;
        std::vector<uint8_t> mem;
        while_progressing(*dev, [&] {
            mem.assign(size_t(h.streams) * slots * size + 64, 0);
            if (op == Op::read && !h.lat)
                for (uint32_t s = 0; s < h.streams; ++s)
                    for (uint32_t k = 0; k < slots; ++k)
                        fill_pattern(mem.data() + (size_t(s) * slots + k) * size, size, s + 1, k);
        });
        const MemoryRegion mr = dev->register_mr(pd, mem.data(), mem.size(), kAllAccess);
        for (uint32_t s = 0; s < h.streams; ++s) conn.create_stream(s + 1, pd, dcq, dcq);
        if (op == Op::send)
            for (uint32_t s = 0; s < h.streams; ++s)
                for (uint32_t k = 0; k < slots; ++k)
                    conn.post_recv(s + 1, RecvWr{(uint64_t(s) << 32) | k, mr.iova((size_t(s) * slots + k) * size),
                                                 uint32_t(size), mr.lkey});
        ctrl.send(Reply{kMagic, 0, mr.rkey, slots, mr.iova()});
        const double cpu0 = cpu_seconds();

        std::vector<uint64_t> recvd(h.streams, 0);
        uint64_t mismatches = 0, received = 0;
        std::vector<uint8_t> scratch;
        // Latency mode: answer each 8-byte write by writing it back.
        volatile uint64_t* ping = reinterpret_cast<volatile uint64_t*>(mem.data());
        uint64_t last_ping = 0;
        const auto service = [&] {
            static Completion c[64];  // static: a local array is re-initialised every pass
            size_t n;
            while ((n = dev->poll_cq(dcq, c, 64)) > 0) {
                for (size_t i = 0; i < n; ++i) {
                    check_wc(c[i], conn);
                    if (c[i].opcode != WcOpcode::recv) continue;
                    const uint32_t s = uint32_t(c[i].wr_id >> 32), k = uint32_t(c[i].wr_id);
                    uint8_t* p = mem.data() + (size_t(s) * slots + k) * size;
                    if (h.verify) {
                        bool good = false;
                        const auto check = [&] {
                            good = c[i].byte_len == h.size &&
                                   check_pattern(p, size, s + 1, uint32_t(recvd[s] % h.depth), scratch);
                            std::memset(p, 0, size);  // a stale copy must not pass the next check
                        };
                        if (size >= kBigWork) while_progressing(*dev, check);
                        else check();
                        if (!good) ++mismatches;
                    }
                    ++recvd[s];
                    ++received;
                    conn.post_recv(s + 1, RecvWr{c[i].wr_id, mr.iova((size_t(s) * slots + k) * size), uint32_t(size), mr.lkey});
                }
            }
            if (h.lat) {
                const uint64_t v = *ping;
                // A full send queue is back-pressure, not an error: a pong whose ACK
                // is late (lost, its path quiet until an RTO) holds the queue's head
                // while later pongs complete; this one goes on a later pass.
                if (v != last_ping) {
                    std::memcpy(mem.data() + 8, &v, 8);
                    if (conn.try_post_send(1, Connection::write_wr(v, mr, mr.iova(8), 8, h.client_addr, h.client_rkey, false)))
                        last_ping = v;
                }
            }
        };
        const Done d = ctrl.wait<Done>("Done", 24ull * 3600 * 1'000'000'000, service);
        const double cpu_s = cpu_seconds() - cpu0;
        if (op == Op::send) {
            uint64_t want = 0;
            for (uint32_t s = 0; s < h.streams; ++s) want += d.msgs[s];
            const Time end = dev->now() + 2'000'000'000;
            while (received < want && dev->now() < end) {
                dev->progress();
                service();
            }
        }
        if (is_atomic(op))
            for (uint32_t s = 0; s < h.streams; ++s) {
                uint64_t word;
                std::memcpy(&word, mem.data() + size_t(s) * slots * size, 8);
                if (word != d.msgs[s]) ++mismatches;  // each atomic executed exactly once (R-ATOMIC-2)
            }
        if (h.verify && op == Op::write && !h.lat) {
            while_progressing(*dev, [&] {
                for (uint32_t s = 0; s < h.streams; ++s)
                    for (uint32_t k = 0; k < slots && k < d.msgs[s]; ++k)
                        if (!check_pattern(mem.data() + (size_t(s) * slots + k) * size, size, s + 1, k, scratch))
                            ++mismatches;
            });
        }
        uint64_t want = 0;
        for (uint32_t s = 0; s < h.streams; ++s) want += d.msgs[s];
        const bool ok = mismatches == 0 && (op != Op::send || received == want);
        const EngineStats e = dev->engine_stats();
        const DeviceStats ds = dev->device_stats();
        const TransportStats ts = dev->transport_stats();
        Result r;
        r.cpu_s = cpu_s;
        r.verify_ok = ok;
        r.mismatches = mismatches;
        r.received = received;
        r.rx_packets = e.rx_packets;
        r.rx_decode_errors = e.rx_decode_errors;
        r.rx_truncated = e.rx_truncated;
        r.rx_bad_version = e.rx_bad_version;
        r.rx_bad_type = e.rx_bad_type;
        r.rx_oversized = e.rx_oversized;
        r.rx_inconsistent = e.rx_inconsistent;
        r.rx_unknown_conn = e.rx_unknown_conn;
        r.rx_bad_path = e.rx_bad_path;
        r.rx_stale = e.rx_stale;
        r.udp_rx_truncated = ts.rx_truncated;
        r.injected_drops = ds.injected_drops;
        r.injected_ce = ds.injected_ce;
        ctrl.send(r);
        // Let the Result be acked before closing, so the client does not wait on a retransmit.
        const Time end = dev->now() + 500'000'000;
        for (std::vector<uint8_t> b; dev->now() < end;) {
            const bool moved = dev->progress() != 0;
            Completion c[8];
            bool done = false;
            for (size_t n = dev->poll_cq(ccq, c, 8), i = 0; i < n; ++i)
                if (c[i].opcode == WcOpcode::send && c[i].wr_id == (1ull << 63 | (ctrl.sent - 1))) done = true;
            if (done) break;
            dev->idle(moved);
        }
        if (o.json) {
            std::printf("{\"role\": \"server\", \"op\": \"%s\", \"size\": %u, \"streams\": %u, \"received\": %" PRIu64
                        ", \"verify\": \"%s\", \"mismatches\": %" PRIu64 ", \"pipeline\": \"%s\", \"engine\": ",
                        op_name(op), h.size, h.streams, received, h.verify ? (ok ? "ok" : "fail") : "off", mismatches,
                        to_string(dev->config().dpdk.pipeline));
            print_engine_json(stdout, e, ds, ts);
            std::printf("}\n");
        } else {
            std::printf("server: %s %u B x %u streams, %" PRIu64 " messages received, verify %s; drops: decode %" PRIu64
                        ", unknown conn %" PRIu64 ", injected %" PRIu64 "\n",
                        op_name(op), h.size, h.streams, received, h.verify ? (ok ? "ok" : "FAILED") : "off",
                        e.rx_decode_errors, e.rx_unknown_conn, ds.injected_drops);
        }
        std::fflush(stdout);
        return h.verify && !ok ? 2 : 0;
    } catch (const Error&) {  // connection errors and timeouts, once the connection is up
        print_failure_state(*dev, conn);
        throw;
    }
}

// ---------------------------------------------------------------------------

int run_client(const Opts& o) {
    const DeviceConfig dc = make_cfg(o, true);
    const Config base = load_config(o.config);
    const uint16_t server_port = o.port ? o.port : base.device(o.device).port;
    auto dev = open_device(dc);
    const uint32_t pd = dev->alloc_pd();
    const uint32_t ccq = dev->create_cq(64);
    const uint32_t dcq = dev->create_cq(1 << 16);
    std::vector<uint8_t> cmem(9 * kCtrlBuf);
    const MemoryRegion cmr = dev->register_mr(pd, cmem.data(), cmem.size(), kAccessLocalWrite);
    // R-PLANE-6: "A,B,C" is the server's address on planes 0, 1, 2 (all on -p):
    // the handshake is tried on every plane, so it succeeds while any is up.
    std::vector<PeerAddress> server_planes;
    for (size_t at = 0; at <= o.server.size();) {
        const size_t comma = std::min(o.server.find(',', at), o.server.size());
        server_planes.push_back(PeerAddress{o.server.substr(at, comma - at), server_port});
        at = comma + 1;
    }
    Connection conn = dev->connect(server_planes, 5'000'000'000);
    try {
        conn.create_stream(kCtrl, pd, ccq, ccq);
        Ctrl ctrl{*dev, conn, ccq, cmr, cmem};
        ctrl.post_recvs();

        const uint32_t streams = o.lat ? 1 : o.streams;
        const uint32_t depth = o.lat ? 1 : (o.depth ? o.depth : default_depth(o.size));
        const size_t size = o.lat ? 64 : o.size;
        std::vector<uint8_t> mem;
        while_progressing(*dev, [&] {
            mem.assign(size_t(streams) * depth * size + 64, 0);
            if (o.op != Op::read)
                for (uint32_t s = 0; s < streams; ++s)
                    for (uint32_t k = 0; k < depth; ++k)
                        fill_pattern(mem.data() + (size_t(s) * depth + k) * size, size, s + 1, k);
        });
        const MemoryRegion mr = dev->register_mr(pd, mem.data(), mem.size(), kAllAccess);
        for (uint32_t s = 0; s < streams; ++s) conn.create_stream(s + 1, pd, dcq, dcq);

        Hello h;
        h.op = uint32_t(o.op);
        h.size = o.size;
        h.streams = streams;
        h.depth = depth;
        h.verify = o.verify;
        h.lat = o.lat;
        h.client_rkey = mr.rkey;
        h.client_addr = mr.iova();
        ctrl.send(h);
        const Reply rep = ctrl.wait<Reply>("Reply", kPeerWorkLimit);
        if (rep.status != 0) throw Error("server refused the test");
        if (o.lat) dev->set_tx_order(TxOrder::before_rx);  // the next ping leaves with the last pong's ACK

        std::vector<uint64_t> posted(streams, 0), done(streams, 0);
        std::vector<Time> post_time(size_t(streams) * depth, 0);
        std::vector<uint64_t> fetch_want(is_atomic(o.op) ? size_t(streams) * depth : 0, 0);  // value each slot's atomic must fetch
        std::vector<uint32_t> lat;
        lat.reserve(1 << 20);
        uint64_t mismatches = 0, total_done = 0, total_posted = 0;
        std::vector<uint8_t> scratch;
        const Time t0 = dev->now();
        const double cpu0 = cpu_seconds();
        const Time t_end = o.seconds > 0 ? t0 + Time(o.seconds * 1e9) : UINT64_MAX;
        Time next_report = t0 + 1'000'000'000;
        uint64_t last_done = 0;
        Time last_t = t0;
        uint32_t check_ctr = 0;

        const auto report = [&](Time now) {
            if (o.json || now < next_report) return;
            const double dt = double(now - last_t) / 1e9;
            const uint64_t dm = total_done - last_done;
            const ConnStats cs = conn.stats();
            std::fprintf(stderr, "[%6.1fs] %8.3f Gbit/s  %10.0f msg/s  retransmits %" PRIu64 "\n", double(now - t0) / 1e9,
                         double(dm) * double(o.size) * 8 / dt / 1e9, double(dm) / dt, cs.retransmits);
            last_done = total_done;
            last_t = now;
            next_report += 1'000'000'000;
        };

        if (o.lat) {
            volatile uint64_t* pong = reinterpret_cast<volatile uint64_t*>(mem.data());
            for (uint64_t i = 1; o.seconds > 0 ? dev->now() < t_end : i <= o.iters; ++i) {
                std::memcpy(mem.data() + 8, &i, 8);
                const Time ts = dev->now();
                // A full send queue (a ping's ACK late, holding the queue's head:
                // see the server) waits in the loop below, inside the timed round trip.
                const SendWr ping = Connection::write_wr(i, mr, mr.iova(8), 8, rep.addr, rep.rkey, false);
                bool sent = conn.try_post_send(1, ping);
                while (!sent || *pong != i) {
                    if (!sent) sent = conn.try_post_send(1, ping);
                    const bool moved = dev->progress() != 0;
                    // The answer: timed at once; this pass's CQ poll and idle()
                    // are left to the next round trip's passes (round 33).
                    if (sent && *pong == i) break;
                    static Completion c[16];
                    for (size_t n = dev->poll_cq(dcq, c, 16), k = 0; k < n; ++k) check_wc(c[k], conn);
                    if (!moved && (++check_ctr & 1023) == 0) conn.check();
                    // Spin-then-block like the UDP ping-pong it is compared with: a pure spin
                    // loses its core to the peer on a shared 2-core machine.
                    dev->idle(moved);
                }
                const Time te = dev->now();
                lat.push_back(uint32_t(std::min<Time>(te - ts, UINT32_MAX)));
                ++total_done;
                report(te);
            }
            posted[0] = done[0] = total_done;
        } else {
            const auto slot_ptr = [&](uint32_t s, uint32_t k) { return mem.data() + (size_t(s) * depth + k) * size; };
            // A stream's work requests (a list of --post-list) are built once: per
            // message only its id, addresses and signal bit change (atomics: built
            // per message, their operands change).
            const uint32_t plist = o.post_list;
            std::vector<SendWr> wrs(size_t(streams) * plist);
            // The loop's constants in locals: the post call between uses would reload them through o.
            const Op op = o.op;
            const bool by_time = o.seconds > 0;
            const uint64_t iters = o.iters;
            const uint64_t slot_step = o.one_buffer ? 0 : size;  // one buffer: every message at slot 0
            std::vector<uint64_t> lbase(streams), rbase(streams);  // a stream's slot 0, here and at the server
            // Completions: 1 message in m of a stream asks for one (--cq-mod), so that
            // a window's refill never waits for all of it; each stream's last one
            // (-n: a fixed share per stream, so the last is known at its post; -D:
            // a stream runs on past the time to its next signalled message).
            const uint32_t m = cq_mod_of(o, depth);
            std::vector<uint64_t> quota(streams);
            for (uint32_t s = 0; s < streams; ++s) quota[s] = by_time ? UINT64_MAX : iters / streams + (s < iters % streams);
            for (uint32_t s = 0; s < streams; ++s) {
                lbase[s] = mr.iova(size_t(s) * depth * size);
                rbase[s] = rep.addr + uint64_t(s) * rep.slots * size;
                for (uint32_t i = 0; i < plist; ++i) {
                    SendWr& w = wrs[size_t(s) * plist + i];
                    if (o.op == Op::write) w = Connection::write_wr(0, mr, 0, o.size, 0, rep.rkey);
                    else if (o.op == Op::read) w = Connection::read_wr(0, mr, 0, o.size, 0, rep.rkey);
                    else if (o.op == Op::send) w = Connection::send_wr(0, mr, 0, o.size);
                }
            }
            for (;;) {
                Time now = dev->now();
                const bool in_time = now < t_end;
                bool more = by_time ? in_time : total_posted < iters;
                if (by_time && !in_time)  // past the time: until each stream's last message was signalled
                    for (uint32_t s = 0; s < streams; ++s) more |= posted[s] % m != 0;
                bool active = false;
                if (more) {
                    for (uint32_t s = 0; s < streams; ++s) {
                        const uint64_t stop = in_time ? quota[s] : (posted[s] + m - 1) / m * m;  // -D: to a signalled one
                        SendWr* const list = &wrs[size_t(s) * plist];
                        // Messages are built into the list (nb of them) while the depth and the
                        // stop allow, and posted when it holds --post-list of them or no more may go.
                        // Per message the loop keeps counters, not divisions: `avail` messages may
                        // go (depth and stop), message nb is at slot k, and `sig` is the list
                        // index of the next message j with j % m == m - 1 (signalled; recomputed
                        // per stream and pass, and moved on as messages are posted).
                        uint64_t avail = std::min<uint64_t>(depth - (posted[s] - done[s]), stop - posted[s]);
                        uint64_t last = quota[s] - posted[s] - 1;  // list index of the stream's last message
                        uint64_t sig = m - 1 - posted[s] % m;
                        uint32_t k = uint32_t(posted[s] % depth);
                        const uint64_t lb = lbase[s], rb = rbase[s];  // locals: the post call would make them reloads
                        for (size_t nb = 0;;) {
                            const bool more_msgs = nb < avail;
                            if (more_msgs) {
                                const uint64_t j = posted[s] + nb;
                                const bool timed = lat_sampled(j);
                                const uint64_t id = data_wr_id(s, timed, k, j);
                                // One buffer (the default): the cache footprint of one message per stream, as
                                // perftest's; --slots: depth of them.
                                const uint64_t laddr = lb + k * slot_step;
                                const uint64_t raddr = rb + k * slot_step;
                                SendWr& wr = list[nb];
                                wr.wr_id = id;
                                wr.signaled = timed || nb == sig || nb == last;
                                if (nb == sig) sig += m;
                                wr.local_addr = laddr;
                                if (op == Op::write) wr.remote_addr = raddr;
                                else if (op == Op::read) {
                                    if (o.verify) {
                                        uint8_t* const p = slot_ptr(s, k);
                                        if (size >= kBigWork) while_progressing(*dev, [&] { std::memset(p, 0, size); });
                                        else std::memset(p, 0, size);
                                    }
                                    wr.remote_addr = raddr;
                                } else if (is_atomic(op)) {
                                    // Every atomic of a stream targets the stream's first slot at the server.
                                    const uint64_t word = rbase[s];
                                    wr = op == Op::fadd ? Connection::fadd_wr(id, mr, laddr, word, rep.rkey, 1)
                                                          : Connection::cas_wr(id, mr, laddr, word, rep.rkey, j, j + 1);
                                    fetch_want[size_t(s) * depth + k] = j;
                                    std::memset(slot_ptr(s, k), 0xA5, 8);  // a result not written must not pass
                                }
                                // Stored before the post: one that finds the queue full is built again, at the same slot.
                                if (timed) post_time[size_t(s) * depth + k] = now;
                                ++nb;
                                if (++k == depth) k = 0;
                            }
                            if (nb != 0 && (nb == plist || !more_msgs)) {
                                const size_t got = plist == 1 ? size_t(conn.try_post_send(s + 1, list[0]))
                                                              : conn.try_post_sends(s + 1, list, nb);
                                posted[s] += got;
                                total_posted += got;
                                active |= got != 0;
                                if (got < nb) break;  // the queue is full: the rest are built again next pass
                                avail -= nb;  // indices are relative to posted[s] again
                                sig -= nb;
                                last -= nb;
                                nb = 0;
                            }
                            if (!more_msgs) break;
                        }
                    }
                }
                active |= dev->progress() != 0;
                static Completion c[64];  // static: a local array is re-initialised every pass
                size_t n;
                now = dev->now();
                while ((n = dev->poll_cq(dcq, c, 64)) > 0) {
                    for (size_t i = 0; i < n; ++i) {
                        check_wc(c[i], conn);
                        const uint32_t s = uint32_t(c[i].wr_id >> 48), k = uint32_t(c[i].wr_id >> 32) & 0x7fff;
                        if (op == Op::read && o.verify) {
                            bool good = false;
                            const auto check = [&] { good = check_pattern(slot_ptr(s, k), size, s + 1, k, scratch); };
                            if (size >= kBigWork) while_progressing(*dev, check);
                            else check();
                            if (!good) ++mismatches;
                        }
                        if (is_atomic(op)) {
                            uint64_t got;
                            std::memcpy(&got, slot_ptr(s, k), 8);
                            if (got != fetch_want[size_t(s) * depth + k]) ++mismatches;  // executed twice, or lost
                        }
                        if ((c[i].wr_id & kTimedBit) && lat.size() < (64u << 20)) lat.push_back(uint32_t(std::min<Time>(now - post_time[size_t(s) * depth + k], UINT32_MAX)));
                        // This message and every unsignalled one before it (the low 32 bits: fewer are outstanding).
                        const uint32_t retired = uint32_t(c[i].wr_id) + 1 - uint32_t(done[s]);
                        done[s] += retired;
                        total_done += retired;
                    }
                    active = true;
                }
                if (!more && total_done == total_posted) break;
                if (!active && (++check_ctr & 255) == 0) conn.check();
                if ((check_ctr & 63) == 0) report(now);
                ++check_ctr;
                dev->idle(active);
            }
        }
        const Time t1 = dev->now();
        const double cpu_s = cpu_seconds() - cpu0;
        Done d;
        d.streams = streams;
        for (uint32_t s = 0; s < streams; ++s) d.msgs[s] = done[s];
        ctrl.send(d);
        const Result r = ctrl.wait<Result>("Result", kPeerWorkLimit);
        // Its ACK leaves now (the native API acknowledges at the start of the
        // next pass, with whatever was posted meanwhile): the server completes
        // and closes while the report is printed, not while we close too (a
        // net_memif pair closing both ends at once can fault inside DPDK 22.11).
        dev->progress();

        const double secs = double(t1 - t0) / 1e9;
        const double gbps = double(total_done) * double(o.size) * 8 / secs / 1e9;
        const double rate = double(total_done) / secs;
        const double p50 = pct(lat, 0.5), p99 = pct(lat, 0.99), p999 = pct(lat, 0.999);
        const ConnStats cs = conn.stats();
        const bool verified = r.verify_ok && mismatches == 0;
        const EngineStats e = dev->engine_stats();
        const DeviceStats ds = dev->device_stats();
        const TransportStats ts = dev->transport_stats();
        std::vector<PathStats> paths(cs.num_paths);
        for (uint16_t p = 0; p < cs.num_paths; ++p) paths[p] = conn.path_stats(p);
        const char* vs = o.verify ? (verified ? "ok" : "fail") : "off";
        if (o.json) {
            std::printf("{\"role\": \"client\", \"mode\": \"%s\", \"op\": \"%s\", \"size\": %u, \"streams\": %u, "
                        "\"depth\": %u, \"cq_mod\": %u, \"post_list\": %u, \"one_buffer\": %s, \"paths\": %u, \"max_payload\": %u, \"messages\": %" PRIu64 ", \"bytes\": %" PRIu64
                        ", \"seconds\": %.6f, \"goodput_gbps\": %.4f, \"msg_rate\": %.1f, \"lat_samples\": %zu, \"lat_p50_us\": %.3f, "
                        "\"lat_p99_us\": %.3f, \"lat_p999_us\": %.3f, \"verify\": \"%s\", \"mismatches\": %" PRIu64
                        ", \"retransmits\": %" PRIu64 ", \"duplicates\": %" PRIu64 ", \"rnr_drops\": %" PRIu64
                        ", \"inject_loss\": %g, \"inject_ce\": %g, \"cpu_s\": %.4f, \"pipeline\": \"%s\", \"path\": [",
                        o.lat ? "lat" : "bw", op_name(o.op), o.size, streams, depth, cq_mod_of(o, depth),
                        o.lat ? 1u : o.post_list, o.one_buffer ? "true" : "false",
                        unsigned(cs.num_paths), unsigned(dev->config().engine.max_payload), total_done,
                        total_done * o.size, secs, gbps, rate, lat.size(), p50, p99, p999, vs, mismatches + r.mismatches,
                        cs.retransmits, cs.duplicates, cs.rnr_drops, o.loss, o.ce, cpu_s,
                        to_string(dev->config().dpdk.pipeline));
            for (size_t p = 0; p < paths.size(); ++p)
                std::printf("%s{\"id\": %zu, \"state\": \"%s\", \"tx_packets\": %" PRIu64 ", \"retransmits\": %" PRIu64
                            ", \"losses\": %" PRIu64 ", \"timeouts\": %" PRIu64 ", \"spurious_timeouts\": %" PRIu64
                            ", \"tail_probes\": %" PRIu64 ", \"rerouted\": %" PRIu64 ", \"ce_marks\": %" PRIu64
                            ", \"rx_packets\": %" PRIu64 ", \"rx_ce\": %" PRIu64 ", \"srtt_us\": %.2f, \"min_rtt_us\": %.2f, \"cwnd\": %.1f}",
                            p ? ", " : "", p, paths[p].state == PathStateKind::active ? "active" : "failed",
                            paths[p].tx_packets, paths[p].retransmits, paths[p].losses, paths[p].timeouts,
                            paths[p].spurious_timeouts, paths[p].tail_probes, paths[p].rerouted, paths[p].ce_marks,
                            paths[p].rx_packets,
                            paths[p].rx_ce, double(paths[p].srtt) / 1e3, double(paths[p].min_rtt) / 1e3, paths[p].cwnd);
            // R-PLANE-5: this end's traffic per plane (one entry on a one-plane device).
            std::printf("], \"planes\": [");
            for (size_t p = 0; p < dev->num_planes(); ++p) {
                PlaneInfo pi;
                dev->query_plane(p, pi);
                std::printf("%s{\"plane\": %zu, \"address\": \"%s\", \"tx_packets\": %" PRIu64 ", \"tx_bytes\": %" PRIu64
                            ", \"rx_packets\": %" PRIu64 ", \"rx_bytes\": %" PRIu64 "}",
                            p ? ", " : "", p, pi.address.c_str(), pi.tx_packets, pi.tx_bytes, pi.rx_packets, pi.rx_bytes);
            }
            std::printf("], \"engine\": ");
            print_engine_json(stdout, e, ds, ts);
            std::printf(", \"server\": {\"verify_ok\": %u, \"mismatches\": %" PRIu64 ", \"received\": %" PRIu64
                        ", \"cpu_s\": %.4f, \"engine\": {\"rx_packets\": %" PRIu64 ", \"rx_decode_errors\": %" PRIu64
                        ", \"rx_truncated\": %" PRIu64 ", \"rx_bad_version\": %" PRIu64 ", \"rx_bad_type\": %" PRIu64
                        ", \"rx_oversized\": %" PRIu64 ", \"rx_inconsistent\": %" PRIu64 ", \"rx_unknown_conn\": %" PRIu64
                        ", \"rx_bad_path\": %" PRIu64 ", \"rx_stale\": %" PRIu64 ", \"udp_rx_truncated\": %" PRIu64
                        ", \"injected_drops\": %" PRIu64 ", \"injected_ce\": %" PRIu64 "}}}\n",
                        r.verify_ok, r.mismatches, r.received, r.cpu_s, r.rx_packets, r.rx_decode_errors, r.rx_truncated,
                        r.rx_bad_version, r.rx_bad_type, r.rx_oversized, r.rx_inconsistent, r.rx_unknown_conn,
                        r.rx_bad_path, r.rx_stale, r.udp_rx_truncated, r.injected_drops, r.injected_ce);
        } else {
            std::printf("---------------------------------------------------------------------------\n");
            std::printf(" mroce-perf %s %s  size %u B  streams %u  depth %u%s  cq_mod %u  post_list %u  paths %u  max_payload %u  loss %g  ce %g"
                        "  pipeline %s\n",
                        o.lat ? "lat" : "bw", op_name(o.op), o.size, streams, depth, o.lat ? "" : o.one_buffer ? " (one buffer)" : " (slots)",
                        cq_mod_of(o, depth), o.lat ? 1u : o.post_list,
                        unsigned(cs.num_paths), unsigned(dev->config().engine.max_payload), o.loss, o.ce,
                        to_string(dev->config().dpdk.pipeline));
            std::printf(" %-10s %-12s %-12s %-10s %-10s %-10s %-8s\n", "messages", "Gbit/s", "msg/s",
                        o.lat ? "rtt p50" : "p50 us", o.lat ? "rtt p99" : "p99 us", o.lat ? "rtt p99.9" : "p99.9 us",
                        "verify");
            std::printf(" %-10" PRIu64 " %-12.3f %-12.0f %-10.2f %-10.2f %-10.2f %-8s\n", total_done, gbps, rate, p50,
                        p99, p999, vs);
            if (!o.lat)
                std::printf(" latency percentiles over %zu sampled messages (1 in %u of each stream)\n", lat.size(),
                            kLatSampleEvery);
            std::printf(" retransmits %" PRIu64 "  duplicates %" PRIu64 "  rnr_drops %" PRIu64
                        "  injected drops (client rx) %" PRIu64 " (server rx) %" PRIu64 "\n",
                        cs.retransmits, cs.duplicates, cs.rnr_drops, ds.injected_drops, r.injected_drops);
            print_path_table(stdout, paths);
            print_plane_table(stdout, *dev);
            std::printf(" drops at server: decode %" PRIu64 "  unknown conn %" PRIu64 "  stale %" PRIu64 "\n",
                        r.rx_decode_errors, r.rx_unknown_conn, r.rx_stale);
            std::printf("---------------------------------------------------------------------------\n");
        }
        std::fflush(stdout);
        if (dc.driver == "dpdk") {
            // net_memif: the server closes its port once its Result is
            // acknowledged, and a memif rx_burst that runs while the peer's
            // close is handled can fault inside DPDK 22.11 (architecture.md
            // section 2, DPDK row). So the client polls no more once it has the
            // Result: no DISCONNECT (its 1,000 passes ran into the server's close
            // and faulted, 1 of 209 tests in an ASan CI run), and it leaves the
            // server time to close first.
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        } else {
            conn.disconnect();
            for (int i = 0; i < 1000; ++i) dev->progress();  // let the DISCONNECT leave
        }
        return o.verify && !verified ? 2 : 0;
    } catch (const Error&) {  // connection errors and timeouts, once the connection is up
        print_failure_state(*dev, conn);
        throw;
    }
}

}  // namespace

int main(int argc, char** argv) {
    const Opts o = parse(argc, argv);
    try {
            return o.server.empty() ? run_server(o) : run_client(o);
        } catch (const ConfigError& e) {
            std::fprintf(stderr, "mroce-perf: configuration error: %s\n", e.what());
            return 1;
        } catch (const ConnectionError& e) {
            std::fprintf(stderr, "mroce-perf: connection error: %s\n", e.what());
            return 3;
        } catch (const TimeoutError& e) {
            std::fprintf(stderr, "mroce-perf: connection error: %s\n", e.what());
            return 3;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "mroce-perf: error: %s\n", e.what());
            return 1;
        }
    }
