// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Connections (spec section 8): set-up from either side, retries and time
// limits, duplicate and crossed CONNECT_REQs, refusal, teardown, which
// packets each state accepts; and the receiver's fair-share hints that the
// handshake and the ACKs carry (9.3).
#include <thread>

#include "fixture.hpp"

namespace mroce::conform {
namespace {

using wire::Opcode;
using wire::PacketType;

Pred any_pkt() {
    return [](const RxPkt&) { return true; };
}

std::vector<uint8_t> disconnect_pkt(const Peer& p, PacketType ty) {
    std::vector<uint8_t> b(wire::kDisconnectLen);
    wire::CommonHeader c;
    c.type = ty;
    c.dst_conn = p.iut_conn;
    c.src_conn = p.my_conn;
    wire::encode_disconnect(b, c, wire::DisconnectHeader{});
    return b;
}

// Waits until the IUT reports conn in state want.
void wait_state(Control& ctl, uint32_t conn, const std::string& want, uint32_t timeout_ms) {
    const uint64_t end = now_ns() + uint64_t(timeout_ms) * kMs;
    std::string st;
    while ((st = ctl.conn_state(conn)) != want) {
        if (now_ns() > end) fail("connection " + std::to_string(conn) + " " + want, st + " after " + std::to_string(timeout_ms) + " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

}  // namespace

CONFORM_TEST(initiator_handshake, "R-CONN-5 R-CONN-11 R-CONN-2 R-CSN-2:random R-CONN-1",
             "the IUT's CONNECT_REQ: from its listening port, dst_conn 0, repeated every connect_retry; a CONNECT_ACK with "
             "another cookie is ignored, the right one establishes, a duplicate changes nothing") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"connect_retry_us", "30000"}}), .connect = false});
    const uint32_t conn = uint32_t(parse_u64(t.ctl.call("connect 127.0.0.1 " + std::to_string(e.p().port())).at(0)));
    const auto r1 = e.p().wait(is_ctrl(PacketType::connect_req), 1000 * kMs, "a CONNECT_REQ");
    const auto r2 = e.p().wait(is_ctrl(PacketType::connect_req), 1000 * kMs, "a repeated CONNECT_REQ");
    check(r1.pk.common.dst_conn == 0 && r1.pk.common.src_conn != 0 && r1.src_port == t.ctl.udp_port() && r1.ecn == 0,
          "dst_conn 0, src_conn nonzero, from the listening port, Not-ECT", r1.str());
    check(r2.pk.common.src_conn == r1.pk.common.src_conn && r2.pk.connect.cookie == r1.pk.connect.cookie &&
              r2.pk.connect.initial_csn == r1.pk.connect.initial_csn,
          "the repeat carries the same connection id, cookie and initial CSN", r2.str());
    check(r2.at - r1.at >= 22 * kMs, "repeated after connect_retry (30 ms)", std::to_string((r2.at - r1.at) / kMs) + " ms");
    check(r1.pk.connect.initial_csn != r1.pk.common.src_conn, "an initial CSN not derived from the connection id",
          r1.str());
    ConnParams cp;
    e.p().answer(r2, cp, 0, r2.pk.connect.cookie ^ 0x5a5a5a5a);  // another cookie
    e.p().wait(is_ctrl(PacketType::connect_req), 1000 * kMs, "CONNECT_REQs going on after a CONNECT_ACK with the wrong cookie");
    check(t.ctl.conn_state(conn) == "connecting", "still connecting", t.ctl.conn_state(conn));
    e.p().answer(r2, cp);
    wait_state(t.ctl, conn, "established", 1000);
    e.p().answer(r2, cp);  // a duplicate
    e.p().clear();
    e.p().quiet(is_ctrl(PacketType::connect_req), 70 * kMs, "no CONNECT_REQ once established");
    check(t.ctl.conn_state(conn) == "established", "established after a duplicate CONNECT_ACK", t.ctl.conn_state(conn));
    // Another connection (fresh endpoint): another initial CSN and cookie.
    Env f = setup(t, Setup{.iut = iut_cfg({}), .connect = false});
    t.ctl.call("connect 127.0.0.1 " + std::to_string(f.p().port()));
    const auto r3 = f.p().wait(is_ctrl(PacketType::connect_req), 1000 * kMs, "a CONNECT_REQ of a second connection");
    check(r3.pk.connect.initial_csn != r1.pk.connect.initial_csn && r3.pk.connect.cookie != r1.pk.connect.cookie,
          "initial CSN and cookie differ between connections", r3.str());
}

CONFORM_TEST(connect_gives_up, "R-CONN-5:timeout",
             "unanswered CONNECT_REQs: after conn_timeout the connection is in error and work posted meanwhile fails transport_err") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"connect_retry_us", "20000"}, {"conn_timeout_ms", "150"}}), .connect = false});
    const uint64_t t0 = now_ns();
    const uint32_t conn = uint32_t(parse_u64(t.ctl.call("connect 127.0.0.1 " + std::to_string(e.p().port())).at(0)));
    t.ctl.stream(conn, 1, e.pd, e.cq, e.cq);
    e.conn = conn;
    e.post("write", e.wr(1, 0, 64));
    wait_state(t.ctl, conn, "error", 2000);
    check(now_ns() - t0 >= 140 * kMs, "in error no sooner than conn_timeout (150 ms)", std::to_string((now_ns() - t0) / kMs) + " ms");
    const auto wc = e.completions(1);
    check_wc(wc[0], 1, "transport_err", "the WRITE posted while connecting");
    const auto reqs = e.p().collect(is_ctrl(PacketType::connect_req), 1 * kMs);
    check(reqs.size() >= 3, "CONNECT_REQ repeated every 20 ms meanwhile", std::to_string(reqs.size()) + " seen");
}

CONFORM_TEST(silent_peer_times_out, "R-CONN-6",
             "with a WRITE outstanding and the peer silent, the connection enters error after conn_timeout; send WRs and "
             "posted receives complete transport_err in order") {
    // The peer's last packet is its CONNECT_REQ, sent after t0: the silence is at least now - t0.
    const uint64_t t0 = now_ns();
    Env e = setup(t, Setup{.iut = iut_cfg({{"conn_timeout_ms", "200"}, {"initial_rto_us", "20000"}, {"min_rto_us", "20000"}})});
    e.post_recv(5, e.at(4096), 64);
    e.post("write", e.wr(1, 0, 64));
    e.post("write", e.wr(2, 0, 64));
    wait_state(t.ctl, e.conn, "error", 3000);
    check(now_ns() - t0 >= 190 * kMs, "not before conn_timeout (200 ms)", std::to_string((now_ns() - t0) / kMs) + " ms");
    const auto wc = e.completions(3);
    std::map<uint64_t, std::string> st;
    for (const auto& w : wc) st[w.wr_id] = w.status;
    check(st[1] == "transport_err" && st[2] == "transport_err" && st[5] == "transport_err",
          "WRs 1, 2 and receive 5 transport_err", wc_list(wc));
}

CONFORM_TEST(idle_connection_does_not_time_out, "R-CONN-6:idle",
             "an idle connection with nothing outstanding outlives conn_timeout") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"conn_timeout_ms", "60"}})});
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    check(t.ctl.conn_state(e.conn) == "established", "still established after 150 ms idle", t.ctl.conn_state(e.conn));
}

CONFORM_TEST(keepalive_when_silent, "R-CONN-15",
             "keepalive_interval 30 ms: a silent peer gets PROBEs with probe_seq 0, no sooner than the interval and at most "
             "one per interval; answered, the connection stays established") {
    const uint64_t t0 = now_ns();  // before our CONNECT_REQ, the last packet the IUT hears from us
    Env e = setup(t, Setup{.iut = iut_cfg({{"keepalive_interval_us", "30000"}})});
    // The first three, however late a loaded host delivers them: counting
    // them in a fixed 140 ms of our clock failed when the IUT or this process
    // was descheduled. "At most one per interval" is judged by the IUT's own
    // send clock below.
    auto k = e.p().collect_n(is_ctrl(PacketType::probe), 3, 1500 * kMs);
    check(k.size() == 3, "3 keepalives in the first 1.5 s of silence (one every 30 ms due)", std::to_string(k.size()));
    check(k[0].at - t0 >= 30 * kMs, "the first no sooner than keepalive_interval", std::to_string((k[0].at - t0) / kMs) + " ms");
    for (size_t i = 0; i < k.size(); ++i) {
        check(k[i].pk.probe.probe_seq == 0 && k[i].pk.common.path_id < e.p().theirs.num_paths && k[i].ecn == 0,
              "a PROBE with probe_seq 0 on one of the IUT's paths, Not-ECT", k[i].str());
        // Spacing by the IUT's own send clock (the PROBE's ts, ns mod 2^32): our
        // receive times carry our scheduling delays (a late read of one probe
        // made an 18 ms gap on a loaded host).
        const uint32_t gap = k[i].pk.probe.ts - (i ? k[i - 1].pk.probe.ts : 0);
        if (i) check(gap >= 22 * kMs, "at most one per interval (IUT's send clock)", std::to_string(gap / kMs) + " ms");
    }
    e.p().send_probe_reply(k.back());
    check(t.ctl.conn_state(e.conn) == "established", "established", t.ctl.conn_state(e.conn));
}

CONFORM_TEST(probe_budget, "R-PATH-14",
             "probe_rate 20/s with keepalives due every 2 ms: in 300 ms of silence at most 2 + 6 PROBEs leave") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"keepalive_interval_us", "2000"}, {"probe_rate", "20"}})});
    const uint64_t t0 = now_ns();
    auto k = e.p().collect(is_ctrl(PacketType::probe), 300 * kMs);
    const double allowed = 2 + 20.0 * double(now_ns() - t0) / 1e9 + 1;
    check(k.size() >= 2 && double(k.size()) <= allowed,
          "between 2 and " + std::to_string(int(allowed)) + " PROBEs (a 20/s bucket of 2)", std::to_string(k.size()));
}

CONFORM_TEST(duplicate_and_late_connect_req, "R-CONN-4 R-CONN-14:late",
             "a repeated CONNECT_REQ gets the same CONNECT_ACK and no second connection; one with our id and another cookie "
             "is dropped") {
    Env e = setup(t);
    const ConnParams cp;
    e.p().send_raw(e.p().connect_req(cp));
    const auto a = e.p().wait(is_ctrl(PacketType::connect_ack), 1000 * kMs, "a CONNECT_ACK to the repeated CONNECT_REQ");
    check(a.pk.common.src_conn == e.p().iut_conn && a.pk.connect.initial_csn == e.p().theirs.initial_csn &&
              a.pk.connect.cookie == cp.cookie,
          "the same connection id, initial CSN and cookie", a.str());
    const Answer second = t.ctl.try_call("accept 50");
    check(!second.ok, "no second incoming connection", second.line);
    ConnParams other = cp;
    other.cookie = cp.cookie + 1;
    const uint64_t crossed = counter(t.ctl, "connects_crossed");
    e.p().send_raw(e.p().connect_req(other));
    e.p().quiet(is_ctrl(PacketType::connect_ack), 30 * kMs, "no answer to our id with another cookie");
    check_eq(counter(t.ctl, "connects_crossed") - crossed, uint64_t(1), "connects_crossed");
    const Sent s = e.p().send(write_seg(e, 0, 0, 16, 0, pattern(16, 1)));
    wait_acked(e.p(), 0, s.psn);
}

CONFORM_TEST(refusing_incoming, "R-CONN-8",
             "an endpoint not accepting connections drops a CONNECT_REQ silently and counts it") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"accept", "0"}}), .connect = false});
    const uint64_t before = counter(t.ctl, "connects_refused");
    e.p().send_raw(e.p().connect_req(ConnParams{}));
    e.p().quiet(any_pkt(), 40 * kMs, "no answer to a refused CONNECT_REQ");
    check_eq(counter(t.ctl, "connects_refused") - before, uint64_t(1), "connects_refused");
}

CONFORM_TEST(plane_block, "R-PLANE-1 R-WIRE-6 R-WIRE-7",
             "a CONNECT_REQ with a plane block is answered by a one-plane endpoint with a CONNECT_ACK without one; a "
             "malformed block is dropped and counted inconsistent, one of more than 8 planes oversized") {
    Env e = setup(t, Setup{.connect = false});
    const uint64_t inc0 = counter(t.ctl, "rx_inconsistent"), ovs0 = counter(t.ctl, "rx_oversized");
    ConnParams cp;
    cp.conn_id = 0x00C0FFEE;
    const std::vector<uint8_t> req = e.p().connect_req(cp);
    // Plane 0 is where we are (127.0.0.1, our listening port), plane 1 another address.
    const wire::PlaneAddr planes[9] = {{0x7F000001u, e.p().port()}, {0x0A020002u, e.p().port()},
                                       {0x0A030002u, 1}, {0x0A040002u, 1}, {0x0A050002u, 1}, {0x0A060002u, 1},
                                       {0x0A070002u, 1}, {0x0A080002u, 1}, {0x0A090002u, 1}};
    std::vector<uint8_t> blk(wire::kMaxPlaneBlock);
    blk.resize(wire::encode_plane_block(blk, planes, 2));
    std::vector<uint8_t> bad = req;
    bad.insert(bad.end(), blk.begin(), blk.end());
    bad[wire::kConnectLen] = 3;  // three announced, two listed
    e.p().send_raw(bad);
    std::vector<uint8_t> big = req;  // nine planes: past the room for eight
    big.push_back(9);
    big.insert(big.end(), 3, 0);
    for (const wire::PlaneAddr& a : planes) {
        const uint8_t ent[8] = {uint8_t(a.ipv4 >> 24), uint8_t(a.ipv4 >> 16), uint8_t(a.ipv4 >> 8), uint8_t(a.ipv4),
                                uint8_t(a.port >> 8), uint8_t(a.port), 0, 0};
        big.insert(big.end(), ent, ent + 8);
    }
    e.p().send_raw(big);
    e.p().quiet(answer_from(e.p()), 30 * kMs, "no answer to a CONNECT_REQ with a malformed plane block");
    check_eq(counter(t.ctl, "rx_inconsistent") - inc0, uint64_t(1), "rx_inconsistent");
    check_eq(counter(t.ctl, "rx_oversized") - ovs0, uint64_t(1), "rx_oversized");
    std::vector<uint8_t> good = req;
    good.insert(good.end(), blk.begin(), blk.end());
    e.p().send_raw(good);
    const auto a = e.p().wait(is_ctrl(PacketType::connect_ack), 1000 * kMs, "a CONNECT_ACK");
    check(a.pk.common.dst_conn == cp.conn_id && a.pk.connect.num_planes == 0 && a.raw.size() == wire::kConnectLen,
          "to our id, 44 bytes: a one-plane endpoint announces no planes", a.str());
}

CONFORM_TEST(disconnect_by_iut, "R-CONN-9",
             "disconnect: DISCONNECT from the listening port, at most 3 transmissions connect_retry apart, then closed; the "
             "outstanding WRITE is flushed") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"connect_retry_us", "20000"}})});
    e.post("write", e.wr(1, 0, 64));
    e.p().wait(is_data(), 1000 * kMs, "the WRITE");
    t.ctl.call("disconnect " + std::to_string(e.conn));
    auto d = e.p().collect(is_ctrl(PacketType::disconnect), 150 * kMs);
    check_eq(d.size(), size_t(3), "DISCONNECT transmissions when unanswered");
    check(d[0].src_port == t.ctl.udp_port() && d[0].pk.disconnect.reason == 0 && d[0].pk.common.dst_conn == e.p().my_conn,
          "from the listening port, reason 0, to our connection", d[0].str());
    check(d[1].at - d[0].at >= 15 * kMs, "repeated after connect_retry", std::to_string((d[1].at - d[0].at) / kMs) + " ms");
    wait_state(t.ctl, e.conn, "closed", 1000);
    const auto wc = e.completions(1);
    check_wc(wc[0], 1, "wr_flush_err", "the outstanding WRITE");
    e.p().quiet(is_data(), 20 * kMs, "no DATA after closing");
}

CONFORM_TEST(disconnect_by_peer, "R-CONN-9:passive R-CONN-10 R-ERR-2 R-CONN-13",
             "our DISCONNECT is answered DISCONNECT_ACK and closes; DATA to the closed, the released and an unknown "
             "connection, or from the wrong src_conn, is dropped silently and counted") {
    Env e = setup(t);
    e.post_recv(3, e.at(0), 64);
    const uint64_t u0 = counter(t.ctl, "rx_unknown_conn");
    // Wrong src_conn, unknown dst_conn: dropped.
    DataSpec d = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    Sent s;
    auto b = e.p().build(d, s, false);
    b[11] ^= 0x40;
    e.p().send_raw(b);
    b = e.p().build(d, s, false);
    b[7] ^= 0x40;
    e.p().send_raw(b);
    e.p().quiet(answer_from(e.p()), 20 * kMs, "no answer to DATA with a wrong connection id");
    check_eq(counter(t.ctl, "rx_unknown_conn") - u0, uint64_t(2), "rx_unknown_conn");
    const Answer early = t.ctl.try_call("release " + std::to_string(e.conn));
    check(!early.ok && early.status() == "bad_state", "release of an established connection refused bad_state", early.line);
    e.p().send_raw(disconnect_pkt(e.p(), PacketType::disconnect));
    const auto a = e.p().wait(is_ctrl(PacketType::disconnect_ack), 1000 * kMs, "a DISCONNECT_ACK");
    check(a.pk.common.dst_conn == e.p().my_conn && a.pk.disconnect.reason == 0, "to our connection, reason 0", a.str());
    wait_state(t.ctl, e.conn, "closed", 1000);
    check_wc(e.completions(1)[0], 3, "wr_flush_err", "the posted receive");
    const uint64_t u1 = counter(t.ctl, "rx_unknown_conn");
    e.p().send(d);
    e.p().quiet(answer_from(e.p()), 20 * kMs, "no answer to DATA for a closed connection");
    t.ctl.call("release " + std::to_string(e.conn));
    const Answer gone = t.ctl.try_call("conn_state " + std::to_string(e.conn));
    check(!gone.ok, "a released connection is gone", gone.line);
    e.p().send(d);
    e.p().quiet(answer_from(e.p()), 20 * kMs, "no answer to DATA for a released connection");
    check_eq(counter(t.ctl, "rx_unknown_conn") - u1, uint64_t(2), "rx_unknown_conn");
}

CONFORM_TEST(simultaneous_connect, "R-CONN-14",
             "crossed CONNECT_REQs: with our key larger the IUT answers ours and its connect() handle is established; with "
             "ours smaller the IUT drops ours and waits for its own CONNECT_ACK") {
    for (int ours_larger = 1; ours_larger >= 0; --ours_larger) {
        Env e = setup(t, Setup{.iut = iut_cfg({{"connect_retry_us", "50000"}}), .connect = false});
        const uint32_t conn = uint32_t(parse_u64(t.ctl.call("connect 127.0.0.1 " + std::to_string(e.p().port())).at(0)));
        const auto req = e.p().wait(is_ctrl(PacketType::connect_req), 1000 * kMs, "the IUT's CONNECT_REQ");
        ConnParams cp;
        cp.cookie = ours_larger ? 0xffffffffu : 0;
        cp.initial_csn = ours_larger ? 0xffffffffu : 0;
        if (!ours_larger && req.pk.connect.cookie == 0) return;  // a tie of 2^-32: nothing to test
        const uint64_t crossed = counter(t.ctl, "connects_crossed");
        e.p().send_raw(e.p().connect_req(cp));
        if (ours_larger) {
            const auto a = e.p().wait(is_ctrl(PacketType::connect_ack), 1000 * kMs, "a CONNECT_ACK to our crossing CONNECT_REQ");
            check(a.pk.common.dst_conn == cp.conn_id && a.pk.connect.cookie == cp.cookie, "to our id with our cookie", a.str());
            wait_state(t.ctl, conn, "established", 1000);
            e.p().clear();
            e.p().quiet(is_ctrl(PacketType::connect_req), 120 * kMs, "the loser's CONNECT_REQ never sent again");
        } else {
            e.p().quiet(is_ctrl(PacketType::connect_ack), 30 * kMs, "no CONNECT_ACK to the smaller key");
            check_eq(counter(t.ctl, "connects_crossed") - crossed, uint64_t(1), "connects_crossed");
            e.p().answer(req, ConnParams{});
            wait_state(t.ctl, conn, "established", 1000);
        }
    }
}

CONFORM_TEST(fair_share_hints, "R-HINT-1 R-HINT-2 R-HINT-3 R-HINT-4 R-HINT-8:passive R-HINT-9",
             "capacity 1 Gbit/s: the first sender's CONNECT_ACK carries it all; the second's half, and the first, which sent "
             "nothing yet, gets an ACK on path 0 with the new half share") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"rx_capacity_mbps", "1000"}}), .connect = false});
    Peer a(t.ctl.udp_ip(), t.ctl.udp_port()), b(t.ctl.udp_ip(), t.ctl.udp_port());
    ConnParams ca, cb;
    cb.conn_id = ca.conn_id + 1;
    const auto acka = a.connect(ca);
    check_eq(acka.pk.connect.rate_hint, 1000000u, "first CONNECT_ACK rate_hint (kbit/s)");
    check_eq(acka.pk.connect.rx_capacity_mbps, 1000u, "CONNECT_ACK rx_capacity_mbps");
    const auto ackb = b.connect(cb);
    check_eq(ackb.pk.connect.rate_hint, 500000u, "second CONNECT_ACK rate_hint");
    const auto refresh = a.wait(is_ack(0), 1000 * kMs, "an ACK refreshing the first sender's hint");
    check(refresh.a().rx_count == 0 && refresh.a().rate_hint == 500000, "rx_count 0, rate_hint 500000", refresh.str());
    // Data from both: every ACK carries a hint, never above the capacity, at least 1 kbit/s.
    const uint32_t ac = t.ctl.accept(), bc = t.ctl.accept();
    t.ctl.stream(ac, 1, e.pd, e.cq, e.cq);
    t.ctl.stream(bc, 1, e.pd, e.cq, e.cq);
    for (Peer* p : {&a, &b}) {
        for (uint32_t m = 0; m < 4; ++m) {
            DataSpec d = write_seg(e, m, 0, 1024, 0, pattern(1024, 1));
            p->send(d);
        }
    }
    for (Peer* p : {&a, &b}) {
        const auto k = p->wait(is_ack(0), 1000 * kMs, "an ACK of the data");
        check(k.a().rate_hint >= 1 && k.a().rate_hint <= 1000000, "a hint between 1 and 1000000 kbit/s", k.str());
    }
}

}  // namespace mroce::conform
