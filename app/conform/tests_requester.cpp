// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The IUT as requester: the suite asks it (control protocol) to post work,
// receives its DATA, and answers with chosen ACKs, SACK gaps, CE echoes,
// NAKs and rate hints, checking segmentation, retransmission (which packet,
// when), windows, pacing and the completions (spec sections 3, 4, 6, 9, 10, 11).
#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "fixture.hpp"

namespace mroce::conform {
namespace {

using wire::Opcode;
using wire::PacketType;
using wire::Syndrome;

// DATA packets until none arrives for quiet_ns.
std::vector<RxPkt> flight(Peer& p, uint64_t quiet_ns = 40 * kMs, uint64_t max_ns = 2000 * kMs) {
    std::vector<RxPkt> out;
    const uint64_t end = now_ns() + max_ns;
    while (now_ns() < end) {
        auto r = p.poll(is_data(), quiet_ns);
        if (!r) break;
        out.push_back(std::move(*r));
    }
    return out;
}

// Acknowledges the IUT's data until n completions arrived.
std::vector<Wc> ack_until_done(Env& e, size_t n, uint32_t hint = 0) {
    std::vector<Wc> out;
    const uint64_t end = now_ns() + 3000 * kMs;
    for (auto& [path, st] : e.p().acks) e.p().ack_path(path, hint);  // what the test recorded so far
    while (out.size() < n) {
        auto f = e.p().collect(is_data(), 5 * kMs);
        if (!f.empty()) e.p().ack_all(f, hint);
        for (auto& w : e.ctl.poll(e.cq)) out.push_back(w);
        if (now_ns() > end) fail(std::to_string(n) + " completions while acknowledging everything", wc_list(out));
    }
    return out;
}

wire::AckHeader sack_of(uint32_t cum, std::initializer_list<uint32_t> psns) {
    wire::AckHeader a{};
    a.cum_psn = cum;
    for (uint32_t p : psns) {
        const uint32_t i = p - cum - 1;
        a.sack[i / 64] |= uint64_t(1) << (i % 64);
    }
    a.rx_count = uint16_t(psns.size() + 1);
    return a;
}

}  // namespace

CONFORM_TEST(requester_write_segments, "R-SEG-1 R-SEG-2 R-DATA-3 R-DATA-5 R-DATA-4:sender R-CSN-1 R-CSN-2 R-PATH-1 "
             "R-RTT-1 R-ECN-1 R-CONN-7 R-DATA-9 R-CMPL-2 R-CSN-6 R-ACK-8:sender R-CMPL-6",
             "a 2000-byte WRITE at a negotiated 700-byte segment: fields of every packet; completion only once every packet "
             "is acked, never from cum_csn") {
    Setup s;
    s.iut = iut_cfg({});
    s.cp.max_payload = 700;
    Env e = setup(t, s);
    t.ctl.mem_write(e.at(0), pattern(2000, 50));
    e.post("write", e.wr(1, 0, 2000));
    auto f = e.p().collect_n(is_data(), 3, 1000 * kMs);
    check_eq(f.size(), size_t(3), "DATA packets of a 2000-byte WRITE at segment size min(1024, 700)");
    std::sort(f.begin(), f.end(), [](const RxPkt& a, const RxPkt& b) { return a.d().offset < b.d().offset; });
    const uint32_t offs[] = {0, 700, 1400}, lens[] = {700, 700, 600};
    const auto src = pattern(2000, 50);
    std::set<uint32_t> csns, psns;
    for (size_t i = 0; i < 3; ++i) {
        const auto& p = f[i];
        const auto& d = p.d();
        check(d.offset == offs[i] && d.payload_len == lens[i], "segment at " + std::to_string(offs[i]) + " of " +
                                                                   std::to_string(lens[i]) + " bytes", p.str());
        check(d.opcode == Opcode::write && d.msg_len == 2000 && d.rkey == 0x4242 && d.remote_addr == 0x10000 &&
                  d.stream_id == 1 && d.msg_seq == 0,
              "opcode WRITE, msg_len 2000, rkey, remote_addr, stream 1, msg_seq 0 in every packet", p.str());
        check(d.recv_seq == 0 && d.imm == 0, "recv_seq and imm 0 for WRITE", p.str());
        check(d.ts != 0, "ts nonzero", p.str());
        check(!wire::seq_lt(d.psn, d.path_floor), "path_floor <= psn", p.str());
        check((d.dflags & (wire::kDataRetransmit | wire::kDataVoid | wire::kDataSolicited)) == 0,
              "no retransmit, void or solicited flag on a first WRITE transmission", p.str());
        check(p.ecn == 2, "DATA sent ECT(0)", "ECN bits " + std::to_string(p.ecn));
        check(p.pk.common.dst_conn == e.p().my_conn && p.pk.common.src_conn == e.p().iut_conn, "connection ids", p.str());
        check(std::equal(p.payload().begin(), p.payload().end(), src.begin() + offs[i]), "payload = the buffer's bytes", p.str());
        csns.insert(d.csn);
        psns.insert(d.psn);
    }
    const uint32_t c0 = e.p().theirs.initial_csn;
    check(csns == std::set<uint32_t>{c0, c0 + 1, c0 + 2}, "CSNs initial_csn .. +2", "other CSNs");
    check(psns == std::set<uint32_t>{0, 1, 2}, "PSNs 0, 1, 2 on the path", "other PSNs");
    // cum_csn past every CSN, yet no PSN acknowledged: no completion (R-CSN-6).
    wire::AckHeader a{};
    a.cum_csn = c0 + 3;
    e.p().send_ack(0, a);
    e.no_completion(20);
    for (size_t i = 0; i < 2; ++i) e.p().record(f[i]);
    e.p().ack_path(0);
    e.no_completion(20);
    e.p().record(f[2]);
    e.p().ack_path(0);
    const auto wc = e.completions(1);
    check(wc[0].wr_id == 1 && wc[0].status == "success" && wc[0].opcode == "write" && wc[0].byte_len == 2000,
          "write wr 1 success byte_len 2000", wc[0].str());
}

CONFORM_TEST(selective_retransmission, "R-SACK-4 R-SACK-5 R-PATH-4 R-DATA-6 R-SCHED-6 R-DATA-9:retransmit",
             "8 packets in flight, PSN 1 missing below SACKed PSN 2: exactly PSN 1's segment is resent, at once, before new "
             "segments, with a new PSN and the same fields") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"init_cwnd", "8"}})});
    t.ctl.mem_write(e.at(0), pattern(12 * 1024, 60));
    e.post("write", e.wr(1, 0, 12 * 1024));
    auto f = flight(e.p());
    check_eq(f.size(), size_t(8), "first flight (init_cwnd 8)");
    const uint32_t c0 = e.p().theirs.initial_csn;
    RxPkt lost;
    for (const auto& p : f)
        if (p.d().psn == 1) lost = p;
    e.p().send_ack(0, sack_of(1, {2}));
    auto g = flight(e.p());
    check(!g.empty(), "DATA after the ACK that shows the hole", "none");
    std::vector<uint32_t> resent;
    for (const auto& p : g)
        if (wire::seq_lt(p.d().csn, c0 + 8)) resent.push_back(p.d().csn);
    check(resent.size() == 1 && resent[0] == lost.d().csn,
          "exactly one retransmission, of PSN 1's CSN " + std::to_string(lost.d().csn),
          std::to_string(resent.size()) + " old CSNs resent" + (resent.empty() ? "" : ", first " + std::to_string(resent[0])));
    const RxPkt& r = g[0];
    check(r.d().csn == lost.d().csn, "the retransmission first, before new segments", g[0].str());
    check(r.d().psn == 8, "the retransmission under the next PSN (8)", r.str());
    check(r.d().dflags & wire::kDataRetransmit, "the retransmit flag", r.str());
    check(r.d().path_floor == 3, "path_floor 3 (PSNs 0-2 resolved)", r.str());
    check(r.d().offset == lost.d().offset && r.d().msg_len == lost.d().msg_len && r.d().payload_len == lost.d().payload_len &&
              std::equal(r.payload().begin(), r.payload().end(), lost.payload().begin()) && r.d().opcode == lost.d().opcode,
          "the same segment (offset, lengths, bytes)", r.str());
    for (const auto& p : f) e.p().record(p);
    for (const auto& p : g) e.p().record(p);
    const auto wc = ack_until_done(e, 1);
    check_wc(wc[0], 1, "success", "the WRITE");
}

CONFORM_TEST(tail_loss_probe, "R-TIMER-8 R-RTT-1:sample",
             "after an RTT sample, an unacknowledged last packet is probed once on its path with ACK_NOW, long before the RTO") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"initial_rto_us", "500000"}, {"min_rto_us", "500000"}})});
    e.p().echo_ts = true;
    e.post("write", e.wr(1, 0, 100));
    const auto first = e.p().wait(is_data(), 1000 * kMs, "the first WRITE");
    e.p().ack_all({first});
    e.completions(1);
    e.post("write", e.wr(2, 0, 100));
    const auto orig = e.p().wait(is_data(), 1000 * kMs, "the second WRITE");
    const auto probe = e.p().wait(is_data(), 1000 * kMs, "a tail-loss probe");
    check(probe.d().csn == orig.d().csn && probe.pk.common.path_id == orig.pk.common.path_id &&
              probe.d().psn != orig.d().psn && (probe.d().dflags & wire::kDataAckNow),
          "the same CSN on the same path, new PSN, ACK_NOW set", probe.str());
    check(probe.at - orig.at < 400 * kMs, "the probe before the 500 ms RTO",
          std::to_string((probe.at - orig.at) / kMs) + " ms after the original");
    e.p().ack_all({orig, probe});
    e.completions(1);
}

CONFORM_TEST(redundant_copy, "R-TIMER-10",
             "two paths, tail_redundancy on, after an RTT sample: an idle connection's last packet goes again at once "
             "on the other path (same CSN, new PSN, retransmit flag); acknowledging the copy alone completes the WRITE") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"num_paths", "2"}, {"tail_redundancy", "1"}, {"initial_rto_us", "500000"},
                                        {"min_rto_us", "500000"}})});
    e.p().echo_ts = true;
    e.post("write", e.wr(1, 0, 100));
    ack_until_done(e, 1);
    e.post("write", e.wr(2, 0, 100));
    const auto orig = e.p().wait(is_data(), 1000 * kMs, "the second WRITE");
    const auto copy = e.p().wait(is_data(), 1000 * kMs, "its copy");
    check(copy.d().csn == orig.d().csn && copy.pk.common.path_id != orig.pk.common.path_id &&
              (copy.d().dflags & wire::kDataRetransmit) && copy.d().offset == orig.d().offset &&
              copy.d().payload_len == orig.d().payload_len,
          "the same CSN and segment on the other path, retransmit flag set", copy.str());
    check(copy.at - orig.at < 100 * kMs, "at once, not after an RTT or the 500 ms RTO",
          std::to_string((copy.at - orig.at) / kMs) + " ms after the original");
    e.p().ack_all({copy});
    e.completions(1);
}

CONFORM_TEST(path_silence, "R-TIMER-9 R-PATH-9:silence",
             "two paths, RTO 500 ms: path 1 never acknowledged while path 0 is: its flight is resent and, at its second "
             "silence, the path is retired (a PROBE on it), both long before the RTO") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"num_paths", "2"}, {"init_cwnd", "4"}, {"initial_rto_us", "500000"},
                                        {"min_rto_us", "500000"}, {"max_rto_us", "1000000"}})});
    e.p().echo_ts = true;  // RTT samples on both paths first
    e.post("write", e.wr(1, 0, 40 * 1024));
    ack_until_done(e, 1);
    e.post("write", e.wr(2, 0, 64 * 1024));
    const uint64_t start = now_ns();
    std::set<uint32_t> unacked;  // CSNs sent on path 1 and never acknowledged
    std::optional<RxPkt> resend, probe;
    size_t n0 = 0;
    const Pred data_or_probe = [d = is_data(), pr = is_ctrl(PacketType::probe)](const RxPkt& p) { return d(p) || pr(p); };
    while (now_ns() - start < 450 * kMs && !(resend && probe)) {
        auto f = e.p().collect(data_or_probe, 5 * kMs);
        for (const auto& p : f) {
            if (p.pk.common.type == PacketType::probe) {
                if (p.pk.common.path_id == 1 && !probe) probe = p;
                continue;
            }
            if (p.pk.common.path_id == 1) {
                unacked.insert(p.d().csn);
                continue;
            }
            if (unacked.count(p.d().csn) && !resend) resend = p;
            ++n0;
            e.p().record(p);
        }
        e.p().ack_path(0);
    }
    check(!unacked.empty(), "DATA on path 1 (the flight to go silent)", "none of " + std::to_string(n0) + " packets");
    check(resend.has_value(), "a CSN first sent on path 1 resent and acknowledged on path 0 within 450 ms",
          std::to_string(unacked.size()) + " CSNs sent on path 1, none resent on path 0");
    check(probe.has_value(), "path 1 retired (a PROBE on it) within 450 ms, before its 500 ms RTO", "no PROBE");
    ack_until_done(e, 1);
}

CONFORM_TEST(rto_backoff_path_failure_and_probing, "R-TIMER-2 R-TIMER-3 R-PATH-9 R-PATH-10 R-PATH-11 R-SCHED-9 R-TIMER-1:initial",
             "unacknowledged: resent after 30, 60 ms (backoff); the third timeout fails the path: new source port, PROBEs "
             "every 20 ms, no DATA; the latest probe's reply revives it") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"initial_rto_us", "30000"}, {"min_rto_us", "30000"}, {"max_rto_us", "1000000"},
                                        {"probe_interval_us", "20000"}, {"fail_after", "3"}})});
    e.post("write", e.wr(1, 0, 100));
    std::vector<RxPkt> tx;
    for (int i = 0; i < 3; ++i) tx.push_back(e.p().wait(is_data(), 2000 * kMs, "transmission " + std::to_string(i)));
    const uint64_t rto = 30 * kMs;
    for (int i = 1; i < 3; ++i) {
        const uint64_t want = rto << (i - 1);
        // Arrival times carry the suite's own receive latency: a quarter of slack.
        check(tx[size_t(i)].at - tx[size_t(i) - 1].at >= want * 3 / 4,
              "retransmission " + std::to_string(i) + " at least " + std::to_string(want / kMs) + " ms after the previous",
              std::to_string((tx[size_t(i)].at - tx[size_t(i) - 1].at) / kMs) + " ms");
        check(tx[size_t(i)].d().csn == tx[0].d().csn && tx[size_t(i)].d().psn != tx[size_t(i) - 1].d().psn,
              "the same CSN under a new PSN", tx[size_t(i)].str());
    }
    std::vector<RxPkt> probes;
    for (int i = 0; i < 3; ++i) probes.push_back(e.p().wait(is_ctrl(PacketType::probe), 2000 * kMs, "PROBE " + std::to_string(i)));
    check(probes[0].at - tx[2].at >= (rto << 2) * 3 / 4, "the path failing on the third timeout (120 ms after the last resend)",
          std::to_string((probes[0].at - tx[2].at) / kMs) + " ms");
    check(probes[0].src_port != tx[0].src_port, "a new entropy (source port) for the failed path",
          "source port " + std::to_string(probes[0].src_port));
    for (int i = 1; i < 3; ++i) {
        check(probes[size_t(i)].pk.probe.probe_seq == probes[size_t(i) - 1].pk.probe.probe_seq + 1,
              "probe_seq incremented per PROBE", probes[size_t(i)].str());
        check(probes[size_t(i)].src_port == probes[0].src_port && probes[size_t(i)].pk.probe.ts != 0,
              "PROBEs from the failed path's one new source port, ts nonzero", probes[size_t(i)].str());
    }
    // The first probe goes at once, the next on the probe_interval grid: a late first one shortens one gap only.
    check(probes[2].at - probes[0].at >= 15 * kMs, "PROBEs every probe_interval (20 ms): 3 of them over 20 ms at least",
          std::to_string((probes[2].at - probes[0].at) / kMs) + " ms");
    e.p().quiet(is_data(), 5 * kMs, "no DATA while the only path is failed");
    // A reply to an older probe is ignored: no DATA follows.
    e.p().send_probe_reply(probes[0]);
    e.p().quiet(is_data(), 30 * kMs, "no DATA after a reply to an older probe");
    // Answer the newest PROBE at once (a reply overtaken by the next PROBE names an older probe_seq: ignored).
    std::optional<RxPkt> back;
    RxPkt latest;
    for (int attempt = 0; attempt < 10 && !back; ++attempt) {
        e.p().collect(is_ctrl(PacketType::probe), 0);  // drop the ones already here
        latest = e.p().wait(is_ctrl(PacketType::probe), 1000 * kMs, "another PROBE");
        e.p().send_probe_reply(latest);
        back = e.p().poll(is_data(), 15 * kMs);
    }
    if (!back) fail("DATA on the path revived by a reply to its latest PROBE", "none after 10 replies");
    check(back->d().csn == tx[0].d().csn && back->src_port == latest.src_port,
          "the segment resent from the revived path's new source port", back->str());
    e.p().ack_all({*back});
    e.completions(1);
}

CONFORM_TEST(timeout_collapses_window_late_ack_cancels, "R-CC-6 R-TIMER-7 R-SACK-3 R-TIMER-2:all",
             "8 in flight, no ACK: the RTO declares all lost and resends one at a time (window 1); a late ACK of the "
             "originals cancels the other 7 resends") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"init_cwnd", "8"}, {"initial_rto_us", "40000"}, {"min_rto_us", "40000"},
                                        {"max_rto_us", "1000000"}})});
    e.post("write", e.wr(1, 0, 12 * 1024));
    auto f = e.p().collect_n(is_data(), 8, 1000 * kMs);
    check_eq(f.size(), size_t(8), "first flight");
    // The 9th packet: the RTO's resend of the oldest CSN, not a new segment (the window is 8).
    const auto r1 = e.p().wait(is_data(), 1000 * kMs, "the first resend after the RTO");
    check(r1.d().psn == 8 && r1.d().csn == e.p().theirs.initial_csn, "PSN 8 resending the oldest CSN", r1.str());
    e.p().quiet(is_data(), 15 * kMs, "a single packet in flight after the timeout (window = min_cwnd 1)");
    // Late ACK: the originals 0..7 did arrive.
    wire::AckHeader a{};
    a.cum_psn = 8;
    a.rx_count = 8;
    e.p().send_ack(0, a);
    auto g = flight(e.p(), 30 * kMs);
    for (const auto& p : g)
        check(!(wire::seq_lt(p.d().csn, e.p().theirs.initial_csn + 8) && p.d().csn != r1.d().csn),
              "no resend of a CSN the late ACK proved delivered", p.str());
    for (const auto& p : f) e.p().record(p);
    e.p().record(r1);
    e.p().ack_all(g);
    ack_until_done(e, 1);
}

CONFORM_TEST(ecn_cuts_window_ai_grows_loss_does_not, "R-CC-1 R-CC-2 R-CC-3 R-CC-4 R-CC-5 R-ECN-4",
             "init_cwnd 8: an ACK of the flight with every packet CE-marked allows 7 next; unmarked, 9; a SACK-detected loss "
             "does not cut (8)") {
    auto run = [&](int mode) {
        Env e = setup(t, Setup{.iut = iut_cfg({{"init_cwnd", "8"}})});
        e.post("write", e.wr(1, 0, 40 * 1024));
        auto f = flight(e.p());
        check_eq(f.size(), size_t(8), "first flight (init_cwnd 8)");
        wire::AckHeader a{};
        if (mode == 2) {
            a = sack_of(0, {1, 2, 3, 4, 5, 6, 7});  // PSN 0 lost
        } else {
            a.cum_psn = 8;
            a.rx_count = 8;
            a.ce_count = mode == 0 ? 8 : 0;
            a.ack_flags = mode == 0 ? wire::kAckCe : 0;
        }
        e.p().send_ack(0, a);
        return flight(e.p()).size();
    };
    const size_t marked = run(0), clean = run(1), loss = run(2);
    check(marked == 7, "7 packets after an all-CE ACK (8 x (1 - 1/32) = 7.75)", std::to_string(marked));
    check(clean == 9, "9 packets after a clean ACK of 8 (8 + 8/8)", std::to_string(clean));
    check(loss == 8, "8 packets (resend + 7 new) after a SACK-detected loss (loss_beta 1)", std::to_string(loss));
}

CONFORM_TEST(paths_spread_round_robin, "R-SCHED-1 R-SCHED-2 R-SCHED-4 R-PATH-2 R-PATH-8:entropy",
             "4 paths, no RTT yet: 8 segments go two per path, each path from one source port of its own, its PSNs 0 and 1") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"num_paths", "4"}})});
    e.post("write", e.wr(1, 0, 8 * 1024));
    auto f = e.p().collect_n(is_data(), 8, 1000 * kMs);
    check_eq(f.size(), size_t(8), "segments");
    std::map<uint16_t, std::vector<RxPkt>> by;
    for (auto& p : f) by[p.pk.common.path_id].push_back(p);
    check_eq(by.size(), size_t(4), "paths used");
    std::set<uint16_t> ports;
    for (auto& [path, v] : by) {
        check(v.size() == 2 && v[0].d().psn == 0 && v[1].d().psn == 1 && v[0].src_port == v[1].src_port,
              "path " + std::to_string(path) + ": two packets, PSNs 0 and 1, one source port", v[0].str());
        ports.insert(v[0].src_port);
    }
    check_eq(ports.size(), size_t(4), "distinct source ports of the 4 paths");
    e.p().ack_all(f);
    ack_until_done(e, 1);
}

CONFORM_TEST(csn_window_limits_sender, "R-CSN-5 R-SCHED-8:csn",
             "we announce csn_window 64: 100 segments with a large window stop at 64 CSNs in flight; acking 10 frees 10") {
    Setup s;
    s.iut = iut_cfg({{"init_cwnd", "200"}, {"max_cwnd", "256"}});
    s.cp.csn_window = 64;
    s.cp.max_payload = 256;
    Env e = setup(t, s);
    e.post("write", e.wr(1, 0, 100 * 256));
    auto f = flight(e.p());
    check_eq(f.size(), size_t(64), "segments in flight under a 64-CSN window");
    const uint32_t c0 = e.p().theirs.initial_csn;
    for (const auto& p : f) check(wire::seq_lt(p.d().csn, c0 + 64), "CSNs below csn_una + 64", p.str());
    wire::AckHeader a{};
    a.cum_psn = 10;
    a.rx_count = 10;
    e.p().send_ack(0, a);
    auto g = flight(e.p());
    check_eq(g.size(), size_t(10), "segments after 10 CSNs were acknowledged");
    for (auto& p : f) e.p().record(p);
    e.p().ack_all(g);
    ack_until_done(e, 1);
}

CONFORM_TEST(stream_window_limits_sender, "R-STREAM-5 R-CONN-7:depth",
             "we announce stream_depth 2: of 4 posted WRITEs two are sent; completing the first releases the third") {
    Setup s;
    s.iut = iut_cfg({});
    s.cp.stream_depth = 2;
    Env e = setup(t, s);
    for (int i = 0; i < 4; ++i) e.post("write", e.wr(uint64_t(i), 0, 64));
    auto f = flight(e.p());
    check_eq(f.size(), size_t(2), "messages in flight with stream_depth 2");
    for (auto& p : f) check(p.d().msg_seq < 2, "messages 0 and 1", p.str());
    RxPkt m0 = f[0].d().msg_seq == 0 ? f[0] : f[1];
    e.p().ack_all({m0});
    auto g = flight(e.p());
    check(g.size() == 1 && g[0].d().msg_seq == 2, "message 2 once message 0 completed", g.empty() ? "nothing" : g[0].str());
    for (auto& p : f) e.p().record(p);
    e.p().ack_all(g);
    ack_until_done(e, 4);
}

CONFORM_TEST(send_completions_in_post_order, "R-CMPL-2:order R-CMPL-4 R-CMPL-7",
             "three WRITEs (the second unsignaled) acknowledged last-first: completions wait, then wr 0 and wr 2 in order") {
    Env e = setup(t, Setup{.iut = iut_cfg({})});
    e.post("write", e.wr(0, 0, 64));
    e.post("write", e.wr(1, 0, 64) + " signaled=0");
    e.post("write", e.wr(2, 0, 64));
    auto f = e.p().collect_n(is_data(), 3, 1000 * kMs);
    check_eq(f.size(), size_t(3), "packets");
    wire::AckHeader a = sack_of(0, {2});
    e.p().send_ack(0, a);
    e.no_completion(20);
    const auto wc = ack_until_done(e, 2);
    check(wc.size() == 2 && wc[0].wr_id == 0 && wc[1].wr_id == 2 && wc[0].status == "success" && wc[1].status == "success",
          "completions wr 0 then wr 2 (wr 1 unsignaled)", wc_list(wc));
    e.no_completion(10);
}

CONFORM_TEST(nak_syndromes_to_status, "R-NAK-3 R-NAK-4 R-NAK-9 R-NAK-6 R-STREAM-2 R-STREAM-8",
             "a NAK of each syndrome fails its WR with the mapped status and flushes the later one; a NAKed packet is never "
             "resent; a WR acked before its predecessor's NAK is flushed") {
    Env e = setup(t, Setup{.iut = iut_cfg({})});
    const std::pair<Syndrome, const char*> map[] = {
        {Syndrome::rkey_invalid, "rem_access_err"}, {Syndrome::pd_mismatch, "rem_access_err"},
        {Syndrome::access_denied, "rem_access_err"}, {Syndrome::out_of_range, "rem_access_err"},
        {Syndrome::invalid_stream, "rem_inv_req_err"}, {Syndrome::invalid_request, "rem_inv_req_err"},
        {Syndrome::remote_op_error, "rem_op_err"}, {Syndrome::stream_error, "wr_flush_err"}};
    for (uint32_t i = 0; i < 8; ++i) {
        const uint32_t sid = 10 + i;
        t.ctl.stream(e.conn, sid, e.pd, e.cq, e.cq);
        e.post("write", e.wr(100 + i, 0, 64), sid);
        e.post("write", e.wr(200 + i, 0, 64), sid);
    }
    auto f = e.p().collect_n(is_data(), 16, 1000 * kMs);
    check_eq(f.size(), size_t(16), "packets");
    std::vector<RxPkt> second;
    for (const auto& p : f) {
        const uint32_t i = p.d().stream_id - 10;
        if (p.d().msg_seq == 0) {
            wire::NakHeader n;
            n.stream_id = p.d().stream_id;
            n.msg_seq = 0;
            n.syndrome = map[i].first;
            n.opcode = p.d().opcode;
            n.csn = p.d().csn;
            e.p().send_nak(n, 7);  // path_id informational
        } else {
            second.push_back(p);
        }
    }
    e.p().ack_all(second);  // the later WRs' bytes landed: still flushed
    auto wc = e.completions(16);
    std::map<uint64_t, std::string> st;
    for (const auto& w : wc) st[w.wr_id] = w.status;
    for (uint32_t i = 0; i < 8; ++i) {
        check(st[100 + i] == map[i].second, std::string("NAK ") + wire::to_string(map[i].first) + ": " + map[i].second,
              st[100 + i]);
        check(st[200 + i] == "wr_flush_err", "the later WR of the stream flushed", st[200 + i]);
    }
    e.p().quiet(is_data(), 40 * kMs, "no resend of a NAKed packet");
}

CONFORM_TEST(nak_for_nothing_ignored, "R-NAK-5",
             "NAKs naming an unknown stream or a msg_seq not outstanding change nothing: the WR then succeeds") {
    Env e = setup(t, Setup{.iut = iut_cfg({})});
    e.post("write", e.wr(1, 0, 64));
    const auto p = e.p().wait(is_data(), 1000 * kMs, "the WRITE");
    wire::NakHeader n;
    n.stream_id = 77;
    n.syndrome = Syndrome::rkey_invalid;
    n.csn = p.d().csn;
    e.p().send_nak(n);
    n.stream_id = 1;
    n.msg_seq = 5;
    e.p().send_nak(n);
    e.no_completion(20);
    e.p().ack_all({p});
    check_wc(e.completions(1)[0], 1, "success", "the WRITE");
}

CONFORM_TEST(rnr_nak_resend_then_void, "R-NAK-10:requester R-NAK-11:requester",
             "an RNR NAK makes the IUT resend the same CSN after rnr_delay; after rnr_retry the WR fails and the CSN goes "
             "once more as a void packet") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"rnr_delay_us", "30000"}, {"rnr_retry", "1"}})});
    e.post("send", "wr=1 addr=" + hex(e.at(0)) + " len=100 lkey=" + std::to_string(e.mr.lkey));
    const auto p = e.p().wait(is_data(), 1000 * kMs, "the SEND");
    auto rnr = [&](const RxPkt& x) {
        wire::NakHeader n;
        n.stream_id = x.d().stream_id;
        n.msg_seq = x.d().msg_seq;
        n.syndrome = Syndrome::rnr;
        n.opcode = x.d().opcode;
        n.csn = x.d().csn;
        e.p().send_nak(n);
    };
    const uint64_t t0 = now_ns();
    rnr(p);
    const auto again = e.p().wait(is_data(), 1000 * kMs, "the SEND resent after the RNR delay");
    check(again.d().csn == p.d().csn && again.d().psn != p.d().psn && again.d().opcode == Opcode::send,
          "the same CSN under a new PSN", again.str());
    check(again.at - t0 >= 27 * kMs, "the resend at least rnr_delay (30 ms) later", std::to_string((again.at - t0) / kMs) + " ms");
    rnr(again);
    const auto wc = e.completions(1);
    check_wc(wc[0], 1, "rnr_retry_exc_err", "the SEND after its retry");
    const auto v = e.p().wait(is_data(), 1000 * kMs, "the given-up CSN sent as a void packet");
    check(v.d().csn == p.d().csn && (v.d().dflags & wire::kDataVoid) && v.d().opcode == Opcode::write && v.d().msg_len == 0 &&
              v.d().payload_len == 0 && v.d().rkey == 0 && v.d().remote_addr == 0 && v.d().stream_id == p.d().stream_id &&
              v.d().msg_seq == p.d().msg_seq,
          "void flag, opcode WRITE, lengths and keys 0, the original stream and msg_seq", v.str());
    e.p().ack_all({v});
    e.no_completion(20);
}

CONFORM_TEST(requester_read, "R-READ-1 R-READ-6 R-READ-3:place",
             "a READ is one READ_REQ; its response, out of order, is placed and completes only when whole") {
    Env e = setup(t, Setup{.iut = iut_cfg({})});
    e.post("read", e.wr(1, 0, 2000, 0x5000, 0x99));
    const auto q = e.p().wait(is_data(), 1000 * kMs, "the READ_REQ");
    check(q.d().opcode == Opcode::read_req && q.d().msg_len == 2000 && q.d().payload_len == 0 && q.d().rkey == 0x99 &&
              q.d().remote_addr == 0x5000 && q.d().offset == 0,
          "READ_REQ msg_len 2000, no payload, rkey 0x99, remote_addr 0x5000", q.str());
    e.p().ack_all({q});
    e.p().quiet(is_data(), 10 * kMs, "one packet for the READ");
    const auto src = pattern(2000, 77);
    for (uint32_t off : {1000u, 0u}) {
        DataSpec r;
        r.op = Opcode::read_resp;
        r.stream = 1;
        r.msg_seq = q.d().msg_seq;
        r.msg_len = 2000;
        r.offset = off;
        r.payload.assign(src.begin() + off, src.begin() + off + 1000);
        const Sent s = e.p().send(r);
        wait_acked(e.p(), 0, s.psn);
        if (off == 1000) e.no_completion(10);
    }
    const auto wc = e.completions(1);
    check(wc[0].wr_id == 1 && wc[0].status == "success" && wc[0].opcode == "read" && wc[0].byte_len == 2000,
          "read wr 1 success 2000 bytes", wc[0].str());
    if (t.ctl.mem_read(e.at(0), 2000) != src) fail("the response's bytes in the READ's buffer", "other bytes");
}

CONFORM_TEST(requester_atomics, "R-ATOMIC-1:requester R-ATOMIC-3:requester R-ATOMIC-5",
             "FADD and CAS go as one 16-byte big-endian operand packet; the reply's value lands at the local address; bad "
             "lengths and alignment are refused at post") {
    Env e = setup(t, Setup{.iut = iut_cfg({})});
    auto bad = e.try_post("fadd", e.wr(9, 0, 4, 0x8008, 0x31) + " add=1");
    check(!bad.ok && bad.status() == "invalid_argument", "an atomic of 4 bytes refused invalid_argument", bad.line);
    bad = e.try_post("fadd", e.wr(9, 0, 8, 0x8004, 0x31) + " add=1");
    check(!bad.ok && bad.status() == "invalid_argument", "an unaligned atomic refused invalid_argument", bad.line);
    e.post("fadd", e.wr(1, 0, 8, 0x8008, 0x31) + " add=5");
    e.post("cas", e.wr(2, 8, 8, 0x8010, 0x31) + " cmp=0x10 swap=0x20");
    auto f = e.p().collect_n(is_data(), 2, 1000 * kMs);
    check_eq(f.size(), size_t(2), "atomic packets");
    const uint8_t fadd_ops[16] = {0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0};
    const uint8_t cas_ops[16] = {0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20};
    for (const auto& p : f) {
        const bool fadd = p.d().opcode == Opcode::atomic_fadd;
        check(p.d().payload_len == 16 && p.d().msg_len == 8 && p.d().rkey == 0x31 &&
                  std::memcmp(p.payload().data(), fadd ? fadd_ops : cas_ops, 16) == 0,
              "16 bytes of big-endian operands, msg_len 8", p.str());
        DataSpec r;
        r.op = Opcode::atomic_resp;
        r.msg_seq = p.d().msg_seq;
        r.msg_len = 8;
        const uint64_t old = fadd ? 0x1122334455667788ull : 0x10;
        for (int i = 0; i < 8; ++i) r.payload.push_back(uint8_t(old >> (56 - 8 * i)));
        e.p().send(r);
    }
    e.p().ack_all(f);
    const auto wc = e.completions(2);
    check(wc[0].opcode == "atomic_fadd" && wc[1].opcode == "atomic_cas" && wc[0].status == "success" && wc[1].status == "success",
          "atomic_fadd then atomic_cas, success", wc_list(wc));
    const auto v = t.ctl.mem_read(e.at(0), 8);
    const std::vector<uint8_t> le = {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
    check(v == le, "the old value stored in native (little-endian) order", to_hex(v.data(), 8));
}

CONFORM_TEST(read_atomic_outstanding_limits, "R-STREAM-10",
             "max_rd_atomic 1: a second READ waits for the first; max_dest_rd_atomic 1: a second held READ_REQ is refused "
             "invalid_request") {
    Env e = setup(t, Setup{.iut = iut_cfg({}), .stream_extra = "max_rd_atomic=1 max_dest_rd_atomic=1"});
    e.post("read", e.wr(1, 0, 64, 0x5000, 0x99));
    e.post("read", e.wr(2, 64, 64, 0x6000, 0x99));
    auto f = flight(e.p(), 30 * kMs);
    check_eq(f.size(), size_t(1), "READ_REQs in flight with max_rd_atomic 1");
    e.p().ack_all(f);
    DataSpec r;
    r.op = Opcode::read_resp;
    r.msg_seq = f[0].d().msg_seq;
    r.msg_len = 64;
    r.payload = pattern(64, 1);
    e.p().send(r);
    const auto q2 = e.p().wait(is_data(), 1000 * kMs, "the second READ_REQ once the first completed");
    check(q2.d().opcode == Opcode::read_req && q2.d().remote_addr == 0x6000, "the second READ", q2.str());
    // Responder side: message 0 incomplete, READ_REQs 1 and 2 held behind it.
    t.ctl.stream(e.conn, 2, e.pd, e.cq, e.cq, "max_dest_rd_atomic=1");
    DataSpec w = write_seg(e, 0, 0, 2048, 1024, pattern(1024, 1));
    w.stream = 2;
    e.p().send(w);
    DataSpec q;
    q.op = Opcode::read_req;
    q.stream = 2;
    q.msg_len = 64;
    q.rkey = e.mr.rkey;
    q.raddr = e.at(0);
    q.msg_seq = 1;
    e.p().send(q);
    q.msg_seq = 2;
    const Sent s2 = e.p().send(q);
    wait_nak(e.p(), Syndrome::invalid_request, s2.csn);
}

CONFORM_TEST(pacing_follows_rate_hint, "R-HINT-5 R-SCHED-7 R-HINT-6",
             "ACKs carrying a 16 Mbit/s hint: after the first flight, the IUT sends no faster than the hint plus one bucket") {
    Setup s;
    s.iut = iut_cfg({});
    s.mr_len = 400 * 1024;
    Env e = setup(t, s);
    const uint32_t hint = 16000;  // kbit/s = 2 MB/s
    e.post("write", e.wr(1, 0, 300 * 1024));
    uint64_t t_hint = 0, bytes = 0;
    double worst = -1e18;
    const uint64_t end = now_ns() + 3000 * kMs;
    bool done = false;
    while (!done && now_ns() < end) {
        auto f = e.p().collect(is_data(), 3 * kMs);
        for (const auto& p : f) {
            if (t_hint) {
                bytes += p.raw.size();
                // bytes sent since the hint vs what the hint allows: a 64 KiB bucket, the first flight (32
                // packets) already on its way, and the rate.
                const double allowed = 65536.0 + 34.0 * 1096.0 + double(hint) * 125.0 * double(p.at - t_hint) / 1e9;
                worst = std::max(worst, double(bytes) - allowed);
            }
        }
        if (!f.empty()) {
            e.p().ack_all(f, hint);
            if (!t_hint) t_hint = now_ns();
        }
        done = !e.ctl.poll(e.cq).empty();
    }
    check(done, "the 300 KiB WRITE to complete", "not within 3 s");
    check(worst <= 0, "never more bytes than the hint allows",
          std::to_string(int64_t(worst)) + " bytes over the allowance");
    t.note = "sent " + std::to_string(bytes) + " bytes after the first hint";
}

CONFORM_TEST(pacing_from_handshake_hint, "R-HINT-8:initiator R-CONN-12 R-STREAM-5:connecting",
             "the IUT connects; work posted while CONNECTING leaves once established, paced from its first packet at the "
             "CONNECT_ACK's 8 Mbit/s hint (empty bucket)") {
    Env e = setup(t, Setup{.connect = false});
    const uint32_t conn = uint32_t(parse_u64(t.ctl.call("connect 127.0.0.1 " + std::to_string(e.p().port())).at(0)));
    e.conn = conn;
    const auto req = e.p().wait(is_ctrl(PacketType::connect_req), 1000 * kMs, "the IUT's CONNECT_REQ");
    t.ctl.stream(conn, 1, e.pd, e.cq, e.cq);
    e.post("write", e.wr(1, 0, 20 * 1024));
    const std::string st = t.ctl.conn_state(conn);
    check(st == "connecting", "state connecting while the CONNECT_ACK is outstanding", st);
    e.p().quiet(is_data(), 20 * kMs, "no DATA before the connection is established");
    ConnParams cp;
    cp.num_paths = 1;
    e.p().answer(req, cp, 8000);
    auto f = e.p().collect_n(is_data(), 20, 2000 * kMs);
    check_eq(f.size(), size_t(20), "segments");
    check(f.back().at - f.front().at >= 15 * kMs, "20 packets of 1096 bytes at 8 Mbit/s spread over at least 19.7 ms",
          std::to_string((f.back().at - f.front().at) / 1000) + " us");
    check(f[0].d().payload_len <= 1024, "segments of the negotiated size", f[0].str());
    e.p().ack_all(f, 8000);
    ack_until_done(e, 1, 8000);
}

CONFORM_TEST(ack_beyond_snd_nxt_ignored, "R-ACK-6",
             "an ACK whose cum_psn is beyond anything sent on the path is ignored: the WR completes only on a real ACK") {
    Env e = setup(t, Setup{.iut = iut_cfg({})});
    e.post("write", e.wr(1, 0, 64));
    const auto p = e.p().wait(is_data(), 1000 * kMs, "the WRITE");
    wire::AckHeader a{};
    a.cum_psn = p.d().psn + 50;
    a.rx_count = 1;
    e.p().send_ack(0, a);
    e.no_completion(20);
    e.p().ack_all({p});
    check_wc(e.completions(1)[0], 1, "success", "the WRITE");
}

CONFORM_TEST(second_ack_of_a_csn_no_effect, "R-SACK-6 R-RTT-2 R-PATH-1:resend",
             "after a timeout resend, the original and the resend are acked separately: one completion; the resend carries "
             "its own PSN and ts") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"initial_rto_us", "30000"}, {"min_rto_us", "30000"}})});
    e.post("write", e.wr(1, 0, 64));
    e.post("write", e.wr(2, 0, 64));
    const auto p = e.p().collect_n(is_data(), 2, 1000 * kMs);
    check_eq(p.size(), size_t(2), "the two WRITEs");
    const RxPkt& first = p[0].d().msg_seq == 0 ? p[0] : p[1];
    const auto r = e.p().wait([&](const RxPkt& x) { return x.is(PacketType::data) && x.d().csn == first.d().csn; },
                              1000 * kMs, "the first WRITE resent after the RTO");
    check(r.d().psn != first.d().psn && r.d().ts != first.d().ts, "a new PSN and a new ts", r.str());
    e.p().ack_all({first});
    e.completions(1);
    e.p().ack_all({r});
    e.no_completion(20);
    for (const auto& x : p) e.p().record(x);
    ack_until_done(e, 1);
}

CONFORM_TEST(windows_per_path, "R-CC-7",
             "two paths of init_cwnd 4: an all-CE ACK of path 0 and a clean ACK of path 1 leave 3 and 5 packets in flight on "
             "them") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"num_paths", "2"}, {"init_cwnd", "4"}})});
    e.post("write", e.wr(1, 0, 40 * 1024));
    auto f = flight(e.p());
    check_eq(f.size(), size_t(8), "first flight (4 per path)");
    for (uint16_t path = 0; path < 2; ++path) {
        wire::AckHeader a{};
        a.cum_psn = 4;
        a.rx_count = 4;
        a.ce_count = path == 0 ? 4 : 0;
        a.ack_flags = path == 0 ? wire::kAckCe : 0;
        e.p().send_ack(path, a);
    }
    auto g = flight(e.p());
    size_t n[2] = {0, 0};
    for (const auto& p : g) ++n[p.pk.common.path_id & 1];
    check(n[0] == 3 && n[1] == 5, "3 packets on the marked path 0, 5 on path 1",
          std::to_string(n[0]) + " and " + std::to_string(n[1]));
}

CONFORM_TEST(reroute_after_marks, "R-SCHED-5",
             "reroute_after_marks 1: a path whose rounds keep seeing CE moves to a new entropy (source port), and its data "
             "still arrives") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"init_cwnd", "4"}, {"reroute_after_marks", "1"}})});
    e.post("write", e.wr(1, 0, 60 * 1024));
    uint16_t port0 = 0;
    bool moved = false;
    for (int round = 0; round < 12 && !moved; ++round) {
        auto f = flight(e.p(), 15 * kMs);
        if (f.empty()) break;
        for (const auto& p : f) {
            if (!port0) port0 = p.src_port;
            moved |= p.src_port != port0;
            e.p().record(p);
        }
        auto& st = e.p().acks[0];
        st.ce = st.rx;
        e.p().ack_path(0);
    }
    check(moved, "DATA from a new source port after rounds with marks", "the same port throughout");
    ack_until_done(e, 1);
}

}  // namespace mroce::conform

namespace mroce::conform {
namespace {

// The small WRITEs the R-PACK requester test posts together: their sizes (at most 256 B, R-PACK-3;
// 16 + length each, 494 bytes in all, well inside a 1024-byte segment), each from its own region
// offset to its own remote address; the third unsignaled (R-PACK-4: signaled ones complete).
struct SmallWrite {
    uint32_t len;
    uint32_t off;
    uint64_t raddr;
    bool signaled;
};
constexpr SmallWrite kSmallWrites[] = {
    {40, 0, 0x20000, true}, {1, 64, 0x20100, true}, {256, 128, 0x21000, false}, {17, 512, 0x20040, true}, {100, 768, 0x30000, true},
};
constexpr size_t kSmall = std::size(kSmallWrites);

// Writes each message's bytes into the IUT's region and posts all of them in one control call.
void post_small_writes(Env& e) {
    std::vector<std::pair<std::string, std::string>> wrs;
    for (size_t i = 0; i < kSmall; ++i) {
        const SmallWrite& m = kSmallWrites[i];
        e.ctl.mem_write(e.at(m.off), pattern(m.len, uint8_t(70 + i)));
        wrs.emplace_back("write", e.wr(i + 1, m.off, m.len, m.raddr) + (m.signaled ? "" : " signaled=0"));
    }
    e.post_all(wrs);
}

// The signaled messages' completions, in posting order, success.
void check_small_completions(const std::vector<Wc>& wc) {
    size_t n = 0;
    for (size_t i = 0; i < kSmall; ++i) {
        if (!kSmallWrites[i].signaled) continue;
        check(n < wc.size(), "a completion for wr " + std::to_string(i + 1), wc_list(wc));
        check(wc[n].wr_id == i + 1 && wc[n].status == "success" && wc[n].opcode == "write" &&
                  wc[n].byte_len == kSmallWrites[i].len,
              "completion " + std::to_string(n) + ": write wr " + std::to_string(i + 1) + " success byte_len " +
                  std::to_string(kSmallWrites[i].len) + " (signaled ones, in order)",
              wc_list(wc));
        ++n;
    }
    check_eq(wc.size(), n, "completions (the unsignaled WRITE has none)");
}

// R-PACK-1: the entries of a WRITE_PACK, each (head, bytes) checked against the posted messages.
void check_pack_entries(const RxPkt& p, uint32_t rkey) {
    const auto pay = p.payload();
    size_t at = 0;
    for (size_t i = 0; i < kSmall; ++i) {
        const SmallWrite& m = kSmallWrites[i];
        const std::string entry = "entry " + std::to_string(i);
        check(at + wire::kPackEntryHead <= pay.size(), entry + "'s head inside the payload", p.str());
        const uint8_t* h = pay.data() + at;
        check(wire::detail::get32(h) == rkey && wire::detail::get32(h + 4) == m.len &&
                  wire::detail::get64(h + 8) == m.raddr,
              entry + ": rkey " + hex(rkey) + ", length " + std::to_string(m.len) + ", remote_addr " + hex(m.raddr),
              "rkey " + hex(wire::detail::get32(h)) + ", length " + std::to_string(wire::detail::get32(h + 4)) +
                  ", remote_addr " + hex(wire::detail::get64(h + 8)));
        at += wire::kPackEntryHead;
        check(at + m.len <= pay.size(), entry + "'s bytes inside the payload", p.str());
        const auto want = pattern(m.len, uint8_t(70 + i));
        check(std::equal(want.begin(), want.end(), pay.begin() + long(at)), entry + "'s bytes = the posted buffer's", p.str());
        at += m.len;
    }
    check_eq(at, pay.size(), "payload_len (the entries fill it exactly)");
}

}  // namespace

CONFORM_TEST(requester_write_pack, "R-PACK-2:requester R-PACK-3 R-PACK-4 R-PACK-1:sender R-DATA-6:pack R-CMPL-2:pack",
             "5 small WRITEs posted together toward a peer advertising accepts_pack travel as one WRITE_PACK (entries, "
             "msg_seq 0..4, bytes); unacknowledged, it is resent under the same CSN with identical payload; its ACK "
             "completes the 4 signaled WRITEs in order; toward a peer that does not advertise, the same posts travel "
             "as 5 WRITEs, never opcode 10") {
    const auto cfg = iut_cfg({{"initial_rto_us", "30000"}, {"min_rto_us", "30000"}, {"max_rto_us", "1000000"}});
    {
        // R-PACK-2: no accepts_pack in our CONNECT_REQ: one WRITE per message (the default 1 s RTO:
        // nothing is resent while the test collects them).
        Env e = setup(t);
        post_small_writes(e);
        auto f = e.p().collect_n(is_data(), kSmall, 1000 * kMs);
        for (const auto& p : e.p().collect(is_data(), 20 * kMs)) f.push_back(p);
        check_eq(f.size(), kSmall, "DATA packets toward a peer that did not advertise accepts_pack (one per WRITE)");
        for (size_t i = 0; i < kSmall; ++i)
            check(f[i].d().opcode == Opcode::write && f[i].d().msg_seq == i && f[i].d().msg_len == kSmallWrites[i].len,
                  "WRITE msg_seq " + std::to_string(i) + " alone (never WRITE_PACK toward a peer that did not advertise)",
                  f[i].str());
        e.p().ack_all(f);
        check_small_completions(e.completions(kSmall - 1));
        e.no_completion(20);
    }
    Setup s{.iut = cfg};
    s.cp.flags = wire::kConnAcceptsPack;
    Env e = setup(t, s);
    post_small_writes(e);
    // R-PACK-3: queued together, they leave as one packet.
    const RxPkt first = e.p().wait(is_data(), 1000 * kMs, "the WRITE_PACK of the 5 queued WRITEs");
    const auto& d = first.d();
    check(d.opcode == Opcode::write_pack && d.msg_seq == 0 && d.msg_len == kSmall && d.offset == 0 && d.stream_id == 1,
          "one WRITE_PACK: stream 1, msg_seq 0 (the first message), msg_len 5 (the entry count), offset 0", first.str());
    check(d.csn == e.p().theirs.initial_csn && d.imm == 0 && d.recv_seq == 0 &&
              (d.dflags & (wire::kDataRetransmit | wire::kDataVoid)) == 0,
          "the first CSN, no imm, no retransmit or void flag", first.str());
    check_pack_entries(first, 0x4242);
    // R-PACK-4: not acknowledged, it is resent (RTO 30 ms): the same CSN and header, byte-identical payload.
    const RxPkt again = e.p().wait(is_data(), 1000 * kMs, "the WRITE_PACK resent after its RTO");
    const auto& r = again.d();
    check(r.opcode == Opcode::write_pack && r.csn == d.csn && r.msg_seq == d.msg_seq && r.msg_len == d.msg_len &&
              r.stream_id == d.stream_id && r.psn != d.psn && (r.dflags & wire::kDataRetransmit),
          "the retransmission: WRITE_PACK, the same CSN " + std::to_string(d.csn) +
              ", msg_seq and msg_len, a new PSN, the retransmit flag",
          again.str());
    check(std::equal(first.payload().begin(), first.payload().end(), again.payload().begin(), again.payload().end()),
          "the resent payload byte-identical to the first transmission's", again.str());
    e.p().quiet(is_data(), 10 * kMs, "nothing else sent: the 5 messages are the one packet");
    e.no_completion(10);
    e.p().record(again);
    e.p().ack_path(0);
    check_small_completions(e.completions(kSmall - 1));
    e.no_completion(20);
}

}  // namespace mroce::conform
