// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "fixture.hpp"

#include <thread>

namespace mroce::conform {

std::map<std::string, std::string> iut_cfg(std::initializer_list<std::pair<const std::string, std::string>> extra) {
    std::map<std::string, std::string> m = {{"num_paths", "1"}, {"max_payload", "1024"},
                                            {"initial_rto_us", "1000000"}, {"min_rto_us", "1000000"}};
    for (const auto& [k, v] : extra) m[k] = v;
    return m;
}

std::string wr_args(uint64_t id, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey) {
    return "wr=" + std::to_string(id) + " addr=" + hex(addr) + " len=" + std::to_string(len) +
           " lkey=" + std::to_string(lkey) + " raddr=" + hex(raddr) + " rkey=" + hex(rkey);
}

Env setup(Ctx& t, const Setup& s) {
    Env e(t);
    t.ctl.reset(s.iut);
    e.pd = t.ctl.pd();
    e.mr = t.ctl.mr(e.pd, s.mr_len, s.access);
    e.cq = t.ctl.cq(256);
    e.peer = std::make_unique<Peer>(t.ctl.udp_ip(), t.ctl.udp_port());
    if (s.connect) {
        e.p().connect(s.cp);
        e.conn = t.ctl.accept(1000);
        if (s.stream) t.ctl.stream(e.conn, 1, e.pd, e.cq, e.cq, s.stream_extra);
    }
    return e;
}

void Env::post(const std::string& op, const std::string& args, uint32_t stream) {
    ctl.call("send " + std::to_string(conn) + " " + std::to_string(stream) + " " + op + " " + args);
}

Answer Env::try_post(const std::string& op, const std::string& args, uint32_t stream) {
    return ctl.try_call("send " + std::to_string(conn) + " " + std::to_string(stream) + " " + op + " " + args);
}

void Env::post_all(const std::vector<std::pair<std::string, std::string>>& wrs, uint32_t stream) {
    std::string line = "sends " + std::to_string(conn) + " " + std::to_string(stream);
    for (size_t i = 0; i < wrs.size(); ++i) line += (i ? " ; " : " ") + wrs[i].first + " " + wrs[i].second;
    ctl.call(line);
}

void Env::post_recv(uint64_t wr, uint64_t addr, uint32_t len, uint32_t stream, uint32_t lkey) {
    ctl.call("recv " + std::to_string(conn) + " " + std::to_string(stream) + " wr=" + std::to_string(wr) +
             " addr=" + hex(addr) + " len=" + std::to_string(len) + " lkey=" + std::to_string(lkey ? lkey : mr.lkey));
}

std::vector<Wc> Env::completions(size_t n, uint32_t timeout_ms, uint32_t q) {
    std::vector<Wc> out;
    const uint64_t end = now_ns() + uint64_t(timeout_ms) * kMs;
    for (;;) {
        for (auto& w : ctl.poll(q ? q : cq)) out.push_back(w);
        if (out.size() >= n) return out;
        if (now_ns() > end)
            fail(std::to_string(n) + " completions", std::to_string(out.size()) + " within " +
                                                          std::to_string(timeout_ms) + " ms: " + wc_list(out));
        std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
}

void Env::no_completion(uint32_t ms, uint32_t q) {
    const uint64_t end = now_ns() + uint64_t(ms) * kMs;
    do {
        auto w = ctl.poll(q ? q : cq);
        if (!w.empty()) fail("no completion yet", wc_list(w));
        std::this_thread::sleep_for(std::chrono::microseconds(500));
    } while (now_ns() < end);
}

DataSpec write_seg(const Env& e, uint32_t msg_seq, uint32_t region_off, uint32_t msg_len, uint32_t seg_off,
                   const std::vector<uint8_t>& bytes, wire::Opcode op) {
    DataSpec d;
    d.op = op;
    d.msg_seq = msg_seq;
    d.msg_len = msg_len;
    d.offset = seg_off;
    d.rkey = e.mr.rkey;
    d.raddr = e.at(region_off);
    d.payload = bytes;
    return d;
}

bool acks_psn(const RxPkt& a, uint32_t psn) {
    if (!a.is(wire::PacketType::ack)) return false;
    if (wire::seq_lt(psn, a.a().cum_psn)) return true;
    const uint32_t i = psn - a.a().cum_psn - 1;
    return i < 256 && ((a.a().sack[i / 64] >> (i % 64)) & 1);
}

RxPkt wait_acked(Peer& p, uint16_t path, uint32_t psn, uint64_t timeout_ns) {
    if (auto it = p.last_ack.find(path); it != p.last_ack.end() && acks_psn(it->second, psn)) return it->second;
    return p.wait([&](const RxPkt& r) { return r.is(wire::PacketType::ack) && r.pk.common.path_id == path && acks_psn(r, psn); },
                  timeout_ns, "an ACK of path " + std::to_string(path) + " covering PSN " + std::to_string(psn));
}

void not_acked(Peer& p, uint16_t path, uint32_t psn, uint64_t window_ns) {
    p.quiet([&](const RxPkt& r) { return r.is(wire::PacketType::ack) && r.pk.common.path_id == path && acks_psn(r, psn); },
            window_ns, "no ACK of path " + std::to_string(path) + " covering PSN " + std::to_string(psn));
}

RxPkt wait_nak(Peer& p, wire::Syndrome syn, uint32_t csn, uint64_t timeout_ns) {
    auto r = p.wait([&](const RxPkt& x) { return x.is(wire::PacketType::nak) && x.n().csn == csn; }, timeout_ns,
                    std::string("a NAK ") + wire::to_string(syn) + " for CSN " + std::to_string(csn));
    if (r.n().syndrome != syn)
        fail(std::string("NAK syndrome ") + wire::to_string(syn) + " for CSN " + std::to_string(csn),
             std::string("syndrome ") + wire::to_string(r.n().syndrome));
    return r;
}

uint64_t counter(Control& c, const std::string& name) {
    auto m = c.counters();
    auto it = m.find(name);
    if (it == m.end()) fail("the IUT to report counter " + name, "no such counter");
    return it->second;
}

std::string wc_list(const std::vector<Wc>& v) {
    std::string s = "[";
    for (const auto& w : v) s += w.str() + " ";
    return s + "]";
}

void check_wc(const Wc& w, uint64_t wr_id, const std::string& status, const std::string& what) {
    if (w.wr_id != wr_id || w.status != status)
        fail(what + ": completion wr_id=" + std::to_string(wr_id) + " status=" + status, w.str());
}

}  // namespace mroce::conform
