// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-conform-iut: mroce's own stack as the conformance suite's
// implementation under test. It serves the control protocol of
// doc/conformance.md on a TCP port and runs one native-API Device (UDP
// driver, automatic progress) that `reset` replaces with a fresh one.
//
//   mroce-conform-iut [--control-port N] [--mutation NAME]
//
// prints "mroce-conform-iut control 127.0.0.1:<port>" once it listens.
// --mutation (TEST ONLY, doc/conformance.md section 5) makes every endpoint
// it opens deliberately broken in one way (EngineConfig::test_mutation).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "control.hpp"
#include "mroce/api.hpp"
#include "suite.hpp"

using namespace mroce;
using conform::from_hex;
using conform::parse_u64;
using conform::to_hex;

namespace {

// Guard bytes after every region the adapter allocates: a mutated engine
// (no_rkey_bounds) that writes past a region lands here, not in the heap.
constexpr size_t kGuard = kMutationSlack + 4096;

const char* status_name(Status s) {
    switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid_argument";
    case Status::no_such_object: return "no_such_object";
    case Status::queue_full: return "queue_full";
    case Status::bad_state: return "bad_state";
    case Status::exists: return "exists";
    case Status::no_memory: return "no_memory";
    case Status::message_too_long: return "message_too_long";
    }
    return "unknown";
}

const char* wc_name(WcStatus s) {
    switch (s) {
    case WcStatus::success: return "success";
    case WcStatus::loc_len_err: return "loc_len_err";
    case WcStatus::loc_prot_err: return "loc_prot_err";
    case WcStatus::rem_access_err: return "rem_access_err";
    case WcStatus::rem_inv_req_err: return "rem_inv_req_err";
    case WcStatus::rem_op_err: return "rem_op_err";
    case WcStatus::wr_flush_err: return "wr_flush_err";
    case WcStatus::transport_err: return "transport_err";
    case WcStatus::rnr_retry_exc_err: return "rnr_retry_exc_err";
    }
    return "unknown";
}

const char* wc_op_name(WcOpcode o) {
    switch (o) {
    case WcOpcode::send: return "send";
    case WcOpcode::write: return "write";
    case WcOpcode::read: return "read";
    case WcOpcode::atomic_cas: return "atomic_cas";
    case WcOpcode::atomic_fadd: return "atomic_fadd";
    case WcOpcode::recv: return "recv";
    case WcOpcode::recv_write_imm: return "recv_write_imm";
    }
    return "unknown";
}

struct BadRequest : std::runtime_error {
    std::string status;
    BadRequest(std::string st, const std::string& m) : std::runtime_error(m), status(std::move(st)) {}
};

struct Region {
    std::unique_ptr<uint8_t[]> mem;
    size_t len = 0;
    MemoryRegion mr;
};

class Adapter {
public:
    explicit Adapter(TestMutation m) : mutation_(m) {}
    std::string handle(const std::string& line);
    ~Adapter() { close_device(); }

private:
    void close_device() {
        dev_.reset();  // the engine thread stops before the memory it writes goes
        regions_.clear();
        cq_events_.clear();
        chan_ = nullptr;
    }
    void open_device(const std::map<std::string, std::string>& kv);
    Device& dev() {
        if (!dev_) throw BadRequest("bad_state", "no endpoint: reset first");
        return *dev_;
    }
    uint8_t* host(uint64_t addr, uint64_t len) {
        for (auto& r : regions_) {
            const uint64_t base = reinterpret_cast<uintptr_t>(r.mem.get());
            if (addr >= base && len <= r.len && addr - base <= r.len - len) return r.mem.get() + (addr - base);
        }
        throw BadRequest("invalid_argument", "address range not inside a region this adapter allocated");
    }
    void check(Status s) {
        if (s != Status::ok) throw BadRequest(status_name(s), to_string(s));
    }

    TestMutation mutation_;
    std::unique_ptr<Device> dev_;
    std::vector<Region> regions_;
    CompletionChannel* chan_ = nullptr;
    std::map<uint32_t, uint64_t> cq_events_;
    uint16_t udp_port_ = 0;
};

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> w;
    std::istringstream in(s);
    for (std::string x; in >> x;) w.push_back(x);
    return w;
}

// key=value arguments after the positional ones.
std::map<std::string, std::string> kvs(const std::vector<std::string>& w, size_t from) {
    std::map<std::string, std::string> m;
    for (size_t i = from; i < w.size(); ++i) {
        const auto eq = w[i].find('=');
        if (eq == std::string::npos) throw BadRequest("invalid_argument", "expected key=value: " + w[i]);
        m[w[i].substr(0, eq)] = w[i].substr(eq + 1);
    }
    return m;
}

uint64_t num(const std::map<std::string, std::string>& m, const std::string& k, uint64_t dflt) {
    auto it = m.find(k);
    return it == m.end() ? dflt : parse_u64(it->second);
}

// "addr:len:lkey,addr:len:lkey"
std::vector<Sge> sges(const std::string& s) {
    std::vector<Sge> v;
    std::istringstream in(s);
    for (std::string e; std::getline(in, e, ',');) {
        Sge g;
        const auto a = e.find(':'), b = e.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) throw BadRequest("invalid_argument", "sge: addr:len:lkey");
        g.addr = parse_u64(e.substr(0, a));
        g.length = uint32_t(parse_u64(e.substr(a + 1, b - a - 1)));
        g.lkey = uint32_t(parse_u64(e.substr(b + 1)));
        v.push_back(g);
    }
    return v;
}

// One send WR of the control protocol: OP and its key=value arguments (doc/conformance.md 3).
struct PostedSend {
    SendWr wr;
    std::vector<Sge> sge;  // wr.sg_list points here once the WR is posted
};

PostedSend send_wr(const std::string& op, const std::map<std::string, std::string>& m) {
    PostedSend p;
    SendWr& s = p.wr;
    if (op == "send") s.op = OpKind::send;
    else if (op == "send_imm") s.op = OpKind::send_imm;
    else if (op == "write") s.op = OpKind::write;
    else if (op == "write_imm") s.op = OpKind::write_imm;
    else if (op == "read") s.op = OpKind::read;
    else if (op == "cas") s.op = OpKind::atomic_cas;
    else if (op == "fadd") s.op = OpKind::atomic_fadd;
    else throw BadRequest("invalid_argument", "send: unknown op " + op);
    s.wr_id = num(m, "wr", 0);
    s.local_addr = num(m, "addr", 0);
    s.length = uint32_t(std::min<uint64_t>(num(m, "len", 0), UINT32_MAX));
    s.lkey = uint32_t(num(m, "lkey", 0));
    s.remote_addr = num(m, "raddr", 0);
    s.rkey = uint32_t(num(m, "rkey", 0));
    s.imm = uint32_t(num(m, "imm", 0));
    s.compare_add = num(m, "cmp", num(m, "add", 0));
    s.swap = num(m, "swap", 0);
    s.signaled = num(m, "signaled", 1) != 0;
    s.solicited = num(m, "solicited", 0) != 0;
    s.inline_data = num(m, "inline", 0) != 0;
    if (m.count("sge")) {
        p.sge = sges(m.at("sge"));
        s.num_sge = uint32_t(p.sge.size());
    }
    return p;
}

bool free_udp_ports(uint16_t first, uint16_t count) {
    std::vector<int> fds;
    bool ok = true;
    for (uint16_t i = 0; i < count && ok; ++i) {
        const int fd = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(uint16_t(first + i));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
        if (fd >= 0) fds.push_back(fd);
    }
    for (int fd : fds) close(fd);
    return ok;
}

void Adapter::open_device(const std::map<std::string, std::string>& kv) {
    close_device();
    DeviceConfig c;
    c.address = "127.0.0.1";
    c.progress = ProgressMode::automatic;
    c.path_port_span = 16;
    EngineConfig& e = c.engine;
    static const char* known[] = {"num_paths", "max_payload", "stream_depth", "recv_depth", "csn_window",
                                  "rx_capacity_mbps", "rate_hints", "accept", "initial_rto_us", "min_rto_us",
                                  "max_rto_us", "fail_after", "probe_interval_us", "conn_timeout_ms",
                                  "rnr_delay_us", "rnr_retry", "connect_retry_us", "ack_delay_us", "init_cwnd",
                                  "min_cwnd", "max_cwnd", "ecn", "reroute_after_marks", "max_inline",
                                  "max_send_sge", "max_recv_sge", "deferred_placement", "hint_interval_us",
                                  "keepalive_interval_us", "probe_rate", "probe_max_interval_us", "planes",
                                  "tail_redundancy", "pack_writes"};
    for (const auto& [k, v] : kv) {
        bool ok = false;
        for (const char* n : known) ok |= k == n;
        if (!ok) throw BadRequest("invalid_argument", "unknown reset key " + k);
    }
    e.num_paths = uint16_t(num(kv, "num_paths", e.num_paths));
    e.max_payload = uint16_t(num(kv, "max_payload", 1024));
    e.stream_depth = uint32_t(num(kv, "stream_depth", e.stream_depth));
    e.recv_depth = uint32_t(num(kv, "recv_depth", e.recv_depth));
    e.csn_window = uint32_t(num(kv, "csn_window", e.csn_window));
    e.rx_capacity_mbps = uint32_t(num(kv, "rx_capacity_mbps", e.rx_capacity_mbps));
    e.rate_hints = num(kv, "rate_hints", 1) != 0;
    e.accept_incoming = num(kv, "accept", 1) != 0;
    e.initial_rto = num(kv, "initial_rto_us", e.initial_rto / 1000) * 1000;
    e.min_rto = num(kv, "min_rto_us", e.min_rto / 1000) * 1000;
    e.max_rto = num(kv, "max_rto_us", e.max_rto / 1000) * 1000;
    e.fail_after_timeouts = uint32_t(num(kv, "fail_after", e.fail_after_timeouts));
    e.probe_interval = num(kv, "probe_interval_us", e.probe_interval / 1000) * 1000;
    e.conn_timeout = num(kv, "conn_timeout_ms", e.conn_timeout / 1'000'000) * 1'000'000;
    e.rnr_delay = num(kv, "rnr_delay_us", e.rnr_delay / 1000) * 1000;
    e.rnr_retry = uint8_t(num(kv, "rnr_retry", e.rnr_retry));
    e.connect_retry = num(kv, "connect_retry_us", e.connect_retry / 1000) * 1000;
    e.ack_delay = num(kv, "ack_delay_us", 0) * 1000;
    e.hint_interval = num(kv, "hint_interval_us", 0) * 1000;
    e.cc.init_cwnd = double(num(kv, "init_cwnd", uint64_t(e.cc.init_cwnd)));
    e.cc.min_cwnd = double(num(kv, "min_cwnd", uint64_t(e.cc.min_cwnd)));
    e.cc.max_cwnd = double(num(kv, "max_cwnd", uint64_t(e.cc.max_cwnd)));
    e.cc.ecn = num(kv, "ecn", 1) != 0;
    e.reroute_after_marks = uint32_t(num(kv, "reroute_after_marks", 0));
    e.max_inline = uint32_t(num(kv, "max_inline", e.max_inline));
    e.max_send_sge = uint32_t(num(kv, "max_send_sge", e.max_send_sge));
    e.max_recv_sge = uint32_t(num(kv, "max_recv_sge", e.max_recv_sge));
    e.deferred_placement = num(kv, "deferred_placement", 0) != 0;
    e.keepalive_interval = num(kv, "keepalive_interval_us", e.keepalive_interval / 1000) * 1000;
    e.probe_rate = uint32_t(num(kv, "probe_rate", e.probe_rate));
    e.probe_max_interval = num(kv, "probe_max_interval_us", e.probe_max_interval / 1000) * 1000;
    e.tail_redundancy = num(kv, "tail_redundancy", 0) != 0;
    e.pack_writes = num(kv, "pack_writes", 1) != 0;  // R-PACK-2
    e.test_mutation = mutation_;
    // R-PLANE-1: planes=A,B,... one local address per plane (loopback: 127.0.0.x), all on the one port.
    if (auto it = kv.find("planes"); it != kv.end()) {
        c.planes.clear();
        for (size_t at = 0; at <= it->second.size();) {
            const size_t comma = std::min(it->second.find(',', at), it->second.size());
            c.planes.push_back(it->second.substr(at, comma - at));
            at = comma + 1;
        }
        c.address = c.planes[0];
    }
    // A listening port with its path ports (port + 1 .. + 16) free.
    for (int attempt = 0; attempt < 64; ++attempt) {
        uint16_t p = udp_port_;
        if (!p || !free_udp_ports(p, 17)) {
            // 10000-14999: below the kernel's ephemeral range and the ranges other tests of
            // this project pick their fixed ports from (20000 and up); the suite's sockets
            // take 15000-19999 (peer.cpp).
            p = uint16_t(10000 + ((uint32_t(getpid()) * 131u + uint32_t(attempt) * 977u) % 4980u));
            if (!free_udp_ports(p, 17)) continue;
        }
        c.port = p;
        try {
            dev_ = mroce::open_device(c);
            udp_port_ = p;
            break;
        } catch (const std::exception&) {
            udp_port_ = 0;
        }
    }
    if (!dev_) throw BadRequest("no_memory", "could not open a UDP endpoint");
    chan_ = &dev_->create_comp_channel();
}

std::string Adapter::handle(const std::string& line) {
    const auto w = words(line);
    if (w.empty()) throw BadRequest("invalid_argument", "empty request");
    const std::string& cmd = w[0];
    auto arg = [&](size_t i) -> uint64_t {
        if (i >= w.size()) throw BadRequest("invalid_argument", cmd + ": missing argument " + std::to_string(i));
        return parse_u64(w[i]);
    };
    auto locked = [&](auto fn) {
        auto g = dev().lock();
        return fn(dev().engine());
    };
    if (cmd == "hello") {
        if (!dev_) open_device({});
        return "ok 1 127.0.0.1 " + std::to_string(udp_port_) + " mroce-conform-iut mroce-0.1.0" +
               (mutation_ != TestMutation::none ? " MUTATED" : "");
    }
    if (cmd == "reset") {
        open_device(kvs(w, 1));
        return "ok 127.0.0.1 " + std::to_string(udp_port_);
    }
    if (cmd == "pd") return "ok " + std::to_string(dev().alloc_pd());
    if (cmd == "mr") {
        const uint32_t pd = uint32_t(arg(1));
        const uint64_t len = arg(2);
        if (len > (64u << 20)) throw BadRequest("invalid_argument", "mr: at most 64 MiB");
        const std::string acc = w.size() > 3 ? w[3] : "l";
        uint32_t a = 0;
        for (char ch : acc) {
            if (ch == 'l') a |= kAccessLocalWrite;
            else if (ch == 'w') a |= kAccessRemoteWrite;
            else if (ch == 'r') a |= kAccessRemoteRead;
            else if (ch == 'a') a |= kAccessRemoteAtomic;
            else if (ch != '-') throw BadRequest("invalid_argument", "mr: access letters l w r a or -");
        }
        Region r;
        r.mem.reset(new uint8_t[len + kGuard]());
        r.len = len;
        {
            auto g = dev().lock();
            MrInfo mi{};
            check(dev().engine().register_mr(pd, r.mem.get(), len, a, mi));
            r.mr = MemoryRegion{mi.lkey, mi.rkey, mi.pd, mi.access, mi.addr, len};
        }
        const std::string out = "ok " + conform::hex(r.mr.iova()) + " " + std::to_string(r.mr.lkey) + " " +
                                std::to_string(r.mr.rkey);
        regions_.push_back(std::move(r));
        return out;
    }
    if (cmd == "mr_dereg") {
        locked([&](Engine& e) {
            check(e.deregister_mr(uint32_t(arg(1))));
            return 0;
        });
        return "ok";
    }
    if (cmd == "mem_write") {
        const uint64_t addr = arg(1);
        const auto b = from_hex(w.size() > 2 ? w[2] : "-");
        uint8_t* p = host(addr, b.size());
        auto g = dev().lock();
        if (!b.empty()) std::memcpy(p, b.data(), b.size());
        return "ok";
    }
    if (cmd == "mem_read") {
        const uint64_t addr = arg(1), len = arg(2);
        const uint8_t* p = host(addr, len);
        auto g = dev().lock();
        return "ok " + (len ? to_hex(p, len) : std::string("-"));
    }
    if (cmd == "cq") {
        const uint32_t cq = dev().create_cq(uint32_t(arg(1)), chan_);
        return "ok " + std::to_string(cq);
    }
    if (cmd == "cq_poll") {
        const uint32_t cq = uint32_t(arg(1));
        const size_t max = w.size() > 2 ? size_t(arg(2)) : 64;
        std::vector<Completion> c(std::max<size_t>(1, std::min<size_t>(max, 1024)));
        const size_t n = dev().poll_cq(cq, c.data(), std::min(max, c.size()));
        std::string out = "ok " + std::to_string(n);
        for (size_t i = 0; i < n; ++i)
            out += " " + std::to_string(c[i].wr_id) + ":" + wc_name(c[i].status) + ":" + wc_op_name(c[i].opcode) +
                   ":" + std::to_string(c[i].byte_len) + ":" + std::to_string(c[i].imm) + ":" +
                   (c[i].has_imm ? "1" : "0") + ":" + std::to_string(c[i].stream);
        return out;
    }
    if (cmd == "cq_arm") {
        dev().req_notify_cq(uint32_t(arg(1)), w.size() > 2 && w[2] == "solicited");
        return "ok";
    }
    if (cmd == "cq_events") {
        const uint32_t cq = uint32_t(arg(1));
        uint32_t got;
        while (chan_->get_event(got, 0)) {
            ++cq_events_[got];
            dev().ack_cq_events(got, 1);
        }
        const uint64_t n = cq_events_[cq];
        cq_events_[cq] = 0;
        return "ok " + std::to_string(n);
    }
    if (cmd == "srq") return "ok " + std::to_string(dev().create_srq(uint32_t(arg(1)), uint32_t(arg(2))));
    if (cmd == "srq_post") {
        const auto m = kvs(w, 2);
        RecvWr r;
        r.wr_id = num(m, "wr", 0);
        r.addr = num(m, "addr", 0);
        r.length = uint32_t(num(m, "len", 0));
        r.lkey = uint32_t(num(m, "lkey", 0));
        if (!dev().try_post_srq_recv(uint32_t(arg(1)), r)) throw BadRequest("queue_full", "srq full");
        return "ok";
    }
    if (cmd == "srq_arm") {
        dev().arm_srq_limit(uint32_t(arg(1)), uint32_t(arg(2)));
        return "ok";
    }
    if (cmd == "srq_destroy") {
        try {
            dev().destroy_srq(uint32_t(arg(1)));
        } catch (const mroce::Error& e) {
            throw BadRequest("bad_state", e.what());
        }
        return "ok";
    }
    if (cmd == "srq_events") {
        uint32_t s[64];
        const size_t n = dev().poll_srq_events(s, 64);
        std::string out = "ok " + std::to_string(n);
        for (size_t i = 0; i < n; ++i) out += " " + std::to_string(s[i]);
        return out;
    }
    if (cmd == "connect") {
        // connect IP PORT [IP PORT ...]: the peer's address on each of its planes (R-PLANE-6).
        std::vector<PeerAddress> planes;
        for (size_t i = 1; i + 1 < w.size(); i += 2) planes.push_back(PeerAddress{w.at(i), uint16_t(arg(i + 1))});
        if (planes.empty()) throw BadRequest("invalid_argument", "connect IP PORT [IP PORT ...]");
        uint32_t conn = 0;
        {
            auto g = dev().lock();
            uint8_t known = 1;
            const uint32_t peer = dev().transport().resolve_peer(planes, known);
            check(dev().engine().connect(peer, conn, known));
        }
        dev().transport().wake();
        return "ok " + std::to_string(conn);
    }
    if (cmd == "accept") {
        const uint64_t ms = w.size() > 1 ? arg(1) : 1000;
        try {
            return "ok " + std::to_string(dev().accept(ms * 1'000'000).id());
        } catch (const TimeoutError&) {
            throw BadRequest("timeout", "no incoming connection");
        }
    }
    if (cmd == "conn_state") {
        ConnStats cs;
        locked([&](Engine& e) {
            check(e.conn_stats(uint32_t(arg(1)), cs));  // a released id: no_such_object (R-CONN-13)
            return 0;
        });
        return std::string("ok ") + to_string(cs.state);
    }
    if (cmd == "disconnect" || cmd == "release") {
        locked([&](Engine& e) {
            check(cmd == "disconnect" ? e.disconnect(uint32_t(arg(1))) : e.release_conn(uint32_t(arg(1))));
            return 0;
        });
        dev().transport().wake();
        return "ok";
    }
    if (cmd == "stream") {
        const auto m = kvs(w, 6);
        StreamAttr a;
        a.pd = uint32_t(arg(3));
        a.send_cq = uint32_t(arg(4));
        a.recv_cq = uint32_t(arg(5));
        a.send_depth = uint32_t(num(m, "send_depth", 0));
        a.recv_depth = uint32_t(num(m, "recv_depth", 0));
        a.max_rd_atomic = uint32_t(num(m, "max_rd_atomic", 0));
        a.max_dest_rd_atomic = uint32_t(num(m, "max_dest_rd_atomic", 0));
        a.srq = uint32_t(num(m, "srq", 0));
        locked([&](Engine& e) {
            check(e.create_stream(uint32_t(arg(1)), uint32_t(arg(2)), a));
            return 0;
        });
        return "ok";
    }
    if (cmd == "stream_error" || cmd == "stream_destroy") {
        locked([&](Engine& e) {
            check(cmd == "stream_error" ? e.set_stream_error(uint32_t(arg(1)), uint32_t(arg(2)))
                                        : e.destroy_stream(uint32_t(arg(1)), uint32_t(arg(2))));
            return 0;
        });
        dev().transport().wake();
        return "ok";
    }
    // send: one WR; sends: several, "OP k=v ... ; OP k=v ...", all posted under one hold of the
    // engine's lock and one wake, so that the IUT finds them queued together when it next builds
    // packets (what a requester needs to pack them, R-PACK-3).
    if (cmd == "send" || cmd == "sends") {
        const auto conn = uint32_t(arg(1)), stream = uint32_t(arg(2));
        std::vector<PostedSend> wrs;
        for (size_t at = 3; at < w.size();) {
            size_t end = at;
            while (end < w.size() && w[end] != ";") ++end;
            if (end == at || (cmd == "send" && end != w.size()))
                throw BadRequest("invalid_argument", cmd + ": expected OP key=value ...");
            const std::vector<std::string> one(w.begin() + long(at), w.begin() + long(end));
            wrs.push_back(send_wr(one[0], kvs(one, 1)));
            at = end + 1;
        }
        if (wrs.empty()) throw BadRequest("invalid_argument", cmd + ": missing OP");
        locked([&](Engine& e) {
            for (auto& p : wrs) {
                p.wr.sg_list = p.sge.empty() ? nullptr : p.sge.data();
                check(e.post_send(conn, stream, p.wr));
            }
            return 0;
        });
        dev().transport().wake();
        return "ok";
    }
    if (cmd == "recv") {
        const auto m = kvs(w, 3);
        RecvWr r;
        r.wr_id = num(m, "wr", 0);
        r.addr = num(m, "addr", 0);
        r.length = uint32_t(num(m, "len", 0));
        r.lkey = uint32_t(num(m, "lkey", 0));
        std::vector<Sge> list;
        if (m.count("sge")) {
            list = sges(m.at("sge"));
            r.sg_list = list.data();
            r.num_sge = uint32_t(list.size());
        }
        locked([&](Engine& e) {
            check(e.post_recv(uint32_t(arg(1)), uint32_t(arg(2)), r));
            return 0;
        });
        dev().transport().wake();
        return "ok";
    }
    if (cmd == "counters") {
        const EngineStats s = dev().engine_stats();
        std::ostringstream o;
        o << "ok rx_packets=" << s.rx_packets << " tx_packets=" << s.tx_packets
          << " rx_decode_errors=" << s.rx_decode_errors << " rx_truncated=" << s.rx_truncated
          << " rx_bad_version=" << s.rx_bad_version << " rx_bad_type=" << s.rx_bad_type
          << " rx_oversized=" << s.rx_oversized << " rx_inconsistent=" << s.rx_inconsistent
          << " rx_unknown_conn=" << s.rx_unknown_conn << " rx_bad_path=" << s.rx_bad_path
          << " rx_stale=" << s.rx_stale << " cq_overflows=" << s.cq_overflows
          << " connects_refused=" << s.connects_refused << " connects_crossed=" << s.connects_crossed;
        return o.str();
    }
    if (cmd == "plane_counters") {
        // R-PLANE-5: per plane ADDR:tx_packets:tx_bytes:rx_packets:rx_bytes.
        std::ostringstream o;
        o << "ok " << dev().num_planes();
        for (size_t p = 0; p < dev().num_planes(); ++p) {
            PlaneInfo i;
            dev().query_plane(p, i);
            o << " " << i.address << ":" << i.tx_packets << ":" << i.tx_bytes << ":" << i.rx_packets << ":" << i.rx_bytes;
        }
        return o.str();
    }
    if (cmd == "conn_counters") {
        ConnStats cs;
        const Status st = locked([&](Engine& e) { return e.conn_stats(uint32_t(arg(1)), cs); });
        check(st);
        std::ostringstream o;
        o << "ok duplicates=" << cs.duplicates << " naks_sent=" << cs.naks_sent << " naks_received=" << cs.naks_received
          << " rnr_drops=" << cs.rnr_drops << " retransmits=" << cs.retransmits
          << " rx_data_packets=" << cs.rx_data_packets << " tx_data_packets=" << cs.tx_data_packets
          << " connect_attempts=" << cs.connect_attempts << " connect_planes=" << unsigned(cs.connect_planes)
          << " planes=" << unsigned(cs.planes);
        return o.str();
    }
    throw BadRequest("invalid_argument", "unknown command " + cmd);
}

TestMutation parse_mutation(const std::string& s) {
    if (s == "none") return TestMutation::none;
    if (s == "go_back_n") return TestMutation::go_back_n;
    if (s == "no_rkey_bounds") return TestMutation::no_rkey_bounds;
    if (s == "no_dup_filter") return TestMutation::no_dup_filter;
    if (s == "ack_refused") return TestMutation::ack_refused;
    if (s == "pack_acks_first") return TestMutation::pack_acks_first;
    throw std::invalid_argument("unknown mutation '" + s + "' (none, go_back_n, no_rkey_bounds, no_dup_filter, ack_refused, pack_acks_first)");
}

void serve(int cfd, Adapter& ad) {
    std::string buf;
    char b[65536];
    for (;;) {
        const auto nl = buf.find('\n');
        if (nl == std::string::npos) {
            const ssize_t n = recv(cfd, b, sizeof b, 0);
            if (n <= 0) return;
            buf.append(b, size_t(n));
            continue;
        }
        const std::string line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        if (line == "quit") return;
        std::string out;
        try {
            out = ad.handle(line);
        } catch (const BadRequest& e) {
            out = "err " + e.status + " " + e.what();
        } catch (const std::exception& e) {
            out = std::string("err failed ") + e.what();
        }
        for (char& ch : out)
            if (ch == '\n') ch = ' ';
        out += '\n';
        if (send(cfd, out.data(), out.size(), MSG_NOSIGNAL) < 0) return;
    }
}

}  // namespace

int main(int argc, char** argv) {
    uint16_t cport = 0;
    TestMutation mut = TestMutation::none;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            if (a == "--control-port" && i + 1 < argc) cport = uint16_t(std::stoul(argv[++i]));
            else if (a == "--mutation" && i + 1 < argc) mut = parse_mutation(argv[++i]);
            else if (a == "--help" || a == "-h") {
                std::printf("usage: mroce-conform-iut [--control-port N] [--mutation none|go_back_n|no_rkey_bounds|"
                            "no_dup_filter|ack_refused|pack_acks_first]\n");
                return 0;
            } else {
                std::fprintf(stderr, "mroce-conform-iut: unknown argument %s (see --help)\n", a.c_str());
                return 2;
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mroce-conform-iut: %s\n", e.what());
        return 2;
    }
    const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(cport);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0 || listen(lfd, 4) < 0) {
        std::fprintf(stderr, "mroce-conform-iut: control port %u: %s\n", cport, std::strerror(errno));
        return 1;
    }
    socklen_t l = sizeof sa;
    getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &l);
    std::printf("mroce-conform-iut control 127.0.0.1:%u\n", ntohs(sa.sin_port));
    std::fflush(stdout);
    Adapter ad(mut);
    for (;;) {
        const int cfd = accept(lfd, nullptr, nullptr);
        if (cfd < 0) continue;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        serve(cfd, ad);
        close(cfd);
        return 0;  // one suite run per adapter process
    }
}
