// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Planes (spec 8.1, R-PLANE-2..7) on loopback: the IUT gets two planes,
// 127.0.0.1 and 127.0.0.2 (reset planes=...), and the suite plays a
// two-plane peer with one socket per address (Peer objects on each). A plane
// is "down" when the suite ignores what arrives on it.
#include <algorithm>
#include <optional>
#include <sstream>
#include <thread>

#include "fixture.hpp"

namespace mroce::conform {
namespace {

using wire::PacketType;

constexpr uint32_t kLo0 = 0x7F000001u, kLo1 = 0x7F000002u;  // plane 0, plane 1
const char* const kTwoPlanes = "127.0.0.1,127.0.0.2";

std::string ip_str(uint32_t a) {
    return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." + std::to_string((a >> 8) & 255) +
           "." + std::to_string(a & 255);
}

// The suite's second plane: a peer on 127.0.0.2 talking to the IUT's plane-1 address.
std::unique_ptr<Peer> plane1_peer(Ctx& t) { return std::make_unique<Peer>("127.0.0.2", t.ctl.udp_port(), "127.0.0.2"); }

// Both peers announce both planes (R-PLANE-1): plane 0 = p0, plane 1 = p1.
void announce(Peer& p0, Peer& p1) {
    p0.planes = {{kLo0, p0.port()}, {kLo1, p1.port()}};
    p1.planes = p0.planes;
}

// p1 takes over p0's view of the connection (the same connection, another plane).
void share_conn(const Peer& p0, Peer& p1) {
    p1.mine = p0.mine;
    p1.theirs = p0.theirs;
    p1.my_conn = p0.my_conn;
    p1.iut_conn = p0.iut_conn;
    p1.next_csn = p0.next_csn;
    p1.next_psn = p0.next_psn;
}

std::map<std::string, uint64_t> conn_counters(Control& c, uint32_t conn) {
    std::map<std::string, uint64_t> m;
    for (const std::string& w : c.call("conn_counters " + std::to_string(conn))) {
        const size_t eq = w.find('=');
        if (eq != std::string::npos) m[w.substr(0, eq)] = parse_u64(w.substr(eq + 1));
    }
    return m;
}

void wait_state(Control& ctl, uint32_t conn, const std::string& want, uint32_t timeout_ms) {
    const uint64_t end = now_ns() + uint64_t(timeout_ms) * kMs;
    std::string st;
    while ((st = ctl.conn_state(conn)) != want) {
        if (now_ns() > end) fail("connection " + std::to_string(conn) + " " + want, st + " after " + std::to_string(timeout_ms) + " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

std::string connect_cmd(const Peer& p0, const Peer& p1) {
    return "connect 127.0.0.1 " + std::to_string(p0.port()) + " 127.0.0.2 " + std::to_string(p1.port());
}

}  // namespace

CONFORM_TEST(plane_connect_rotates, "R-PLANE-6 R-CONN-5",
             "a two-plane IUT given the peer's address on both planes sends its CONNECT_REQs on plane 0 and plane 1 in "
             "turn, each from its listening address on that plane; plane 0 ignored, the answer from plane 1 "
             "establishes; unanswered, the error counts every attempt over both planes") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"planes", kTwoPlanes}, {"connect_retry_us", "20000"}}), .connect = false});
    auto p1 = plane1_peer(t);
    announce(e.p(), *p1);
    const uint32_t conn = uint32_t(parse_u64(t.ctl.call(connect_cmd(e.p(), *p1)).at(0)));
    // Plane 0 is down: nothing arriving there is answered.
    // Both sockets read in turn, so each packet's arrival time is within a millisecond of true.
    std::vector<RxPkt> on0, on1;
    for (const uint64_t end = now_ns() + 1000 * kMs; (on0.size() < 2 || on1.size() < 2) && now_ns() < end;) {
        for (const RxPkt& r : e.p().collect(is_ctrl(PacketType::connect_req), kMs / 2)) on0.push_back(r);
        e.p().clear();
        for (const RxPkt& r : p1->collect(is_ctrl(PacketType::connect_req), kMs / 2)) on1.push_back(r);
        p1->clear();
    }
    check(on0.size() >= 2 && on1.size() >= 2, "two CONNECT_REQs on each plane",
          std::to_string(on0.size()) + " on plane 0, " + std::to_string(on1.size()) + " on plane 1");
    std::vector<std::pair<uint64_t, int>> order;
    for (const RxPkt& r : on0) {
        check(r.src_ip == kLo0 && r.src_port == t.ctl.udp_port(), "plane 0's from the IUT's plane-0 listening address",
              ip_str(r.src_ip) + ":" + std::to_string(r.src_port));
        check(r.pk.common.src_conn == on0[0].pk.common.src_conn && r.pk.connect.cookie == on0[0].pk.connect.cookie,
              "one attempt: the same src_conn and cookie", r.str());
        order.emplace_back(r.at, 0);
    }
    for (const RxPkt& r : on1) {
        check(r.src_ip == kLo1 && r.src_port == t.ctl.udp_port(), "plane 1's from the IUT's plane-1 listening address",
              ip_str(r.src_ip) + ":" + std::to_string(r.src_port));
        check(r.pk.common.src_conn == on0[0].pk.common.src_conn && r.pk.connect.cookie == on0[0].pk.connect.cookie,
              "the same attempt on both planes", r.str());
        check(r.pk.connect.num_planes == 2, "a plane block of the IUT's two planes (R-PLANE-1)", r.str());
        order.emplace_back(r.at, 1);
    }
    // Attempt k on plane k % 2: the planes take turns. Arrival times order
    // two attempts only when they are clearly apart (a descheduled suite
    // reads several at once): there, consecutive ones are on different planes.
    check(on0.size() == on1.size() || on0.size() == on1.size() + 1 || on0.size() + 1 == on1.size(),
          "the planes in turn", std::to_string(on0.size()) + " on plane 0, " + std::to_string(on1.size()) + " on plane 1");
    std::sort(order.begin(), order.end());
    const uint64_t apart = 10 * kMs;  // connect_retry 20 ms
    if (order[1].first - order[0].first > apart)
        check(order[0].second == 0, "the first CONNECT_REQ on plane 0", "on plane " + std::to_string(order[0].second));
    for (size_t k = 1; k < order.size(); ++k)
        if (order[k].first - order[k - 1].first > apart)
            check(order[k].second != order[k - 1].second, "consecutive attempts on different planes",
                  "attempts " + std::to_string(k - 1) + " and " + std::to_string(k) + " both on plane " +
                      std::to_string(order[k].second));
    p1->answer(on1.back(), ConnParams{});
    wait_state(t.ctl, conn, "established", 1000);
    // Drop what was sent before the answer landed (loopback delivers at send), then nothing more.
    for (Peer* p : {&e.p(), p1.get()}) {
        p->collect(is_ctrl(PacketType::connect_req), 2 * kMs);
        p->clear();
    }
    e.p().quiet(is_ctrl(PacketType::connect_req), 60 * kMs, "no CONNECT_REQ on plane 0 once established");
    p1->quiet(is_ctrl(PacketType::connect_req), 1 * kMs, "no CONNECT_REQ on plane 1 once established");

    // Both planes down: in error after conn_timeout, every attempt counted, both planes tried.
    Env f = setup(t, Setup{.iut = iut_cfg({{"planes", kTwoPlanes}, {"connect_retry_us", "20000"},
                                           {"conn_timeout_ms", "150"}}),
                           .connect = false});
    auto q1 = plane1_peer(t);
    announce(f.p(), *q1);
    const uint32_t c2 = uint32_t(parse_u64(t.ctl.call(connect_cmd(f.p(), *q1)).at(0)));
    wait_state(t.ctl, c2, "error", 2000);
    const size_t n0 = f.p().collect(is_ctrl(PacketType::connect_req), 1 * kMs).size();
    const size_t n1 = q1->collect(is_ctrl(PacketType::connect_req), 1 * kMs).size();
    const auto cc = conn_counters(t.ctl, c2);
    check(n0 >= 2 && n1 >= 2 && (n0 == n1 || n0 == n1 + 1), "the attempts alternated over both planes",
          std::to_string(n0) + " on plane 0, " + std::to_string(n1) + " on plane 1");
    check(cc.count("connect_attempts") && cc.at("connect_attempts") == n0 + n1 && cc.at("connect_planes") == 2,
          "connect_attempts = every CONNECT_REQ sent, connect_planes 2",
          "connect_attempts " + std::to_string(cc.count("connect_attempts") ? cc.at("connect_attempts") : 0) +
              ", connect_planes " + std::to_string(cc.count("connect_planes") ? cc.at("connect_planes") : 0) +
              ", seen " + std::to_string(n0 + n1));
}

CONFORM_TEST(plane_connect_ack_on_arrival_plane, "R-PLANE-7 R-CONN-4 R-PLANE-1",
             "a two-plane IUT answers a CONNECT_REQ on the plane it arrived on; the same REQ repeated on the other "
             "plane is answered there and creates no second connection") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"planes", kTwoPlanes}}), .connect = false});
    auto p1 = plane1_peer(t);
    announce(e.p(), *p1);
    ConnParams cp;
    p1->send_raw(p1->connect_req(cp));
    const auto a1 = p1->wait(is_ctrl(PacketType::connect_ack), 1000 * kMs, "a CONNECT_ACK on plane 1");
    check(a1.src_ip == kLo1 && a1.src_port == t.ctl.udp_port() && a1.pk.common.dst_conn == cp.conn_id &&
              a1.pk.connect.num_planes == 2,
          "from the IUT's plane-1 listening address, to our id, with its two planes", a1.str() + " from " + ip_str(a1.src_ip));
    e.p().quiet(is_ctrl(PacketType::connect_ack), 30 * kMs, "no CONNECT_ACK on plane 0 for a REQ that came on plane 1");
    const uint32_t conn = t.ctl.accept(1000);
    // The ACK was "lost": the REQ again, now on plane 0.
    e.p().send_raw(e.p().connect_req(cp));
    const auto a0 = e.p().wait(is_ctrl(PacketType::connect_ack), 1000 * kMs, "a CONNECT_ACK on plane 0");
    check(a0.src_ip == kLo0 && a0.pk.common.src_conn == a1.pk.common.src_conn && a0.pk.connect.cookie == cp.cookie,
          "from the IUT's plane-0 address, the same connection's answer", a0.str() + " from " + ip_str(a0.src_ip));
    const Answer second = t.ctl.try_call("accept 60");
    check(!second.ok, "no second connection", second.line);
    check(t.ctl.conn_state(conn) == "established", "the connection established", t.ctl.conn_state(conn));
}

CONFORM_TEST(plane_paths_and_counters, "R-PLANE-2 R-PLANE-5",
             "a two-plane connection: the IUT's path i leaves from its plane-(i % 2) address to ours; data from our "
             "plane-1 address is the same peer's; the per-plane counters show both planes' traffic") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"planes", kTwoPlanes}, {"num_paths", "4"}}), .connect = false});
    auto p1 = plane1_peer(t);
    announce(e.p(), *p1);
    e.p().connect(ConnParams{});
    e.conn = t.ctl.accept(1000);
    t.ctl.stream(e.conn, 1, e.pd, e.cq, e.cq);
    share_conn(e.p(), *p1);
    for (int m = 0; m < 4; ++m) e.post("write", e.wr(uint64_t(m + 1), 0, 4096, 0x10000 + uint64_t(m) * 4096));
    std::vector<RxPkt> all;
    const uint64_t end = now_ns() + 2000 * kMs;
    while (all.size() < 16 && now_ns() < end) {
        for (Peer* p : {&e.p(), p1.get()}) {
            auto d = p->collect(is_data(), 5 * kMs);
            p->clear();
            for (const RxPkt& r : d) {
                const uint16_t path = r.pk.common.path_id;
                const bool on1 = p == p1.get();
                check(int(path % 2) == int(on1) && r.src_ip == (on1 ? kLo1 : kLo0),
                      "path i on plane i % 2: from the IUT's plane-(i % 2) address to ours",
                      "path " + std::to_string(path) + " arrived on plane " + std::to_string(int(on1)) + " from " +
                          ip_str(r.src_ip));
                all.push_back(r);
            }
        }
        e.p().ack_all(all);
    }
    check(all.size() >= 16, "16 DATA packets (4 x 4 KiB)", std::to_string(all.size()));
    bool used[4] = {};
    for (const RxPkt& r : all) used[r.pk.common.path_id % 4] = true;
    check(used[0] && used[1] && used[2] && used[3], "every path used", "paths used: " + std::to_string(used[0]) +
          std::to_string(used[1]) + std::to_string(used[2]) + std::to_string(used[3]));
    const auto wc = e.completions(4);
    for (const Wc& w : wc) check(w.status == "success", "the WRITEs complete", wc_list(wc));
    // A WRITE of ours from our plane-1 address on our path 1: accepted as the same peer's.
    DataSpec d = write_seg(e, 0, 0, 64, 0, pattern(64, 3));
    d.path = 1;
    const Sent s = p1->send(d);
    wait_acked(*p1, 1, s.psn);
    check(t.ctl.mem_read(e.at(0), 64) == pattern(64, 3), "placed", "other bytes");
    // R-PLANE-5: both planes' addresses and traffic.
    const auto pc = t.ctl.call("plane_counters");
    check(pc.size() == 3 && pc[0] == "2", "two planes", [&] { std::string s2; for (auto& w : pc) s2 += w + " "; return s2; }());
    for (size_t p = 0; p < 2; ++p) {
        std::vector<std::string> f;
        std::stringstream ss(pc[p + 1]);
        for (std::string x; std::getline(ss, x, ':');) f.push_back(x);
        check(f.size() == 5 && f[0] == ip_str(p ? kLo1 : kLo0) && parse_u64(f[1]) > 0 && parse_u64(f[2]) > 0 &&
                  parse_u64(f[3]) > 0 && parse_u64(f[4]) > 0,
              "plane " + std::to_string(p) + ": its address, packets and bytes sent and received", pc[p + 1]);
    }
}

CONFORM_TEST(plane_failover_and_revival, "R-PLANE-3 R-PLANE-4",
             "plane 1 silent: the IUT's path on it fails, its data moves to plane 0 and completes, the ACK for our "
             "plane-1 path comes back on plane 0, the failed path is probed on plane 1; the probe answered, plane 1 "
             "carries data again") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"planes", kTwoPlanes}, {"num_paths", "2"}, {"fail_after", "2"},
                                           {"initial_rto_us", "20000"}, {"min_rto_us", "20000"},
                                           {"max_rto_us", "40000"}, {"probe_interval_us", "5000"},
                                           {"probe_max_interval_us", "20000"}, {"init_cwnd", "2"},
                                           {"max_cwnd", "2"}}),
                           .connect = false});
    auto p1 = plane1_peer(t);
    announce(e.p(), *p1);
    e.p().connect(ConnParams{});
    e.conn = t.ctl.accept(1000);
    t.ctl.stream(e.conn, 1, e.pd, e.cq, e.cq);
    share_conn(e.p(), *p1);
    // Plane 1 is down: only what arrives on plane 0 is acknowledged. WRITEs keep
    // coming (four per round) and a window of 2 fills path 0, so path 1 keeps
    // getting packets that time out until it fails (fail_after 2 RTOs) and is probed.
    auto is_path_probe = [](const RxPkt& r) { return r.is(PacketType::probe) && r.pk.probe.probe_seq != 0; };
    std::vector<Wc> wc;
    uint64_t posted = 0;
    std::optional<RxPkt> probe;
    for (const uint64_t end = now_ns() + 3000 * kMs; now_ns() < end;) {
        if (!probe) probe = p1->poll(is_path_probe, 0);
        if (!probe && posted < 200)
            for (int m = 0; m < 4; ++m, ++posted)
                e.post("write", e.wr(posted + 1, 0, 2048, 0x10000 + (posted % 16) * 2048));
        auto d = e.p().collect(is_data(), 5 * kMs);
        e.p().clear();
        e.p().ack_all(d);
        for (auto& w : t.ctl.poll(e.cq)) wc.push_back(w);
        if (probe && wc.size() == posted) break;
    }
    check(probe.has_value(), "a PROBE of the failed path on plane 1", p1->backlog_summary());
    check(probe->pk.common.path_id == 1 && probe->src_ip == kLo1, "the IUT's path 1 probed from its plane-1 address",
          probe->str() + " from " + ip_str(probe->src_ip));
    check(wc.size() == posted, "every WRITE completes over plane 0 alone",
          std::to_string(wc.size()) + " of " + std::to_string(posted) + ": " + wc_list(wc));
    for (const Wc& w : wc) check(w.status == "success", "success", wc_list(wc));
    // Our data on our path 1 (plane 1 works toward the IUT): its ACK leaves on a live plane, plane 0.
    DataSpec d = write_seg(e, 0, 0, 64, 0, pattern(64, 9));
    d.path = 1;
    const Sent s = p1->send(d);
    const auto ack = e.p().wait([](const RxPkt& r) { return r.is(PacketType::ack) && r.pk.common.path_id == 1; },
                                1000 * kMs, "the ACK of our path 1 on plane 0");
    check(acks_psn(ack, s.psn) && ack.src_ip == kLo0, "covering our packet, from the IUT's plane-0 address",
          ack.str() + " from " + ip_str(ack.src_ip));
    // Plane 1 heals: the latest probe answered (R-PATH-10) revives the path and
    // plane 1 carries data again. Probes keep coming while the reply travels:
    // answer the newest one seen, again if a newer one overtook the reply.
    for (int m = 0; m < 6; ++m) e.post("write", e.wr(uint64_t(m + 1001), 0, 2048, 0x10000 + uint64_t(m) * 2048));
    std::optional<RxPkt> back;
    for (int attempt = 0; attempt < 20 && !back; ++attempt) {
        auto ps = p1->collect(is_path_probe, 25 * kMs);
        p1->clear();
        if (!ps.empty()) p1->send_probe_reply(ps.back());
        back = p1->poll(is_data(), 30 * kMs);
        auto d = e.p().collect(is_data(), 1 * kMs);
        e.p().clear();
        e.p().ack_all(d);
    }
    check(back.has_value(), "DATA on plane 1 again once the latest probe was answered", p1->backlog_summary());
    check(back->pk.common.path_id == 1 && back->src_ip == kLo1, "the revived path 1, from the IUT's plane-1 address",
          back->str() + " from " + ip_str(back->src_ip));
}

}  // namespace mroce::conform
