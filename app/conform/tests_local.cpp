// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// What the IUT's application interface must do, driven through the control
// protocol and observed on the wire: memory registration, checks at post,
// message size, scatter/gather lists, inline sends, stream attributes and
// error state, shared receive queues, CQ notification (spec 4.3, 4.4.1,
// 4.7, 4.8, 7).
#include <cstring>
#include <thread>

#include "fixture.hpp"

namespace mroce::conform {
namespace {

using wire::Opcode;
using wire::PacketType;
using wire::Syndrome;

std::string sge(std::initializer_list<std::tuple<uint64_t, uint32_t, uint32_t>> l) {
    std::string s = "sge=";
    bool first = true;
    for (const auto& [a, n, k] : l) {
        s += (first ? "" : ",") + hex(a) + ":" + std::to_string(n) + ":" + std::to_string(k);
        first = false;
    }
    return s;
}

DataSpec send_msg(uint32_t stream, uint32_t msg_seq, uint32_t recv_seq, const std::vector<uint8_t>& bytes, uint8_t flags = 0) {
    DataSpec d;
    d.op = Opcode::send;
    d.stream = stream;
    d.msg_seq = msg_seq;
    d.recv_seq = recv_seq;
    d.msg_len = uint32_t(bytes.size());
    d.payload = bytes;
    d.flags = flags;
    return d;
}

uint64_t events(Control& c, uint32_t cq) { return parse_u64(c.call("cq_events " + std::to_string(cq)).at(0)); }

}  // namespace

CONFORM_TEST(memory_registration, "R-MEM-1 R-MEM-2 R-KEY-1",
             "remote write or atomic without local write is refused; keys are nonzero and a deregistered key is not issued "
             "again; its use fails remotely (rkey_invalid) and locally (loc_prot_err)") {
    Env e = setup(t);
    for (const char* acc : {"w", "a", "wr"}) {
        const Answer a = t.ctl.try_call("mr " + std::to_string(e.pd) + " 4096 " + acc);
        check(!a.ok && a.status() == "invalid_argument", std::string("access '") + acc + "' refused invalid_argument", a.line);
    }
    const Mr old = t.ctl.mr(e.pd, 4096, "lwr");
    check(old.rkey != 0 && old.lkey != 0, "nonzero keys", "lkey " + std::to_string(old.lkey) + " rkey " + std::to_string(old.rkey));
    t.ctl.call("mr_dereg " + std::to_string(old.lkey));
    const Answer again = t.ctl.try_call("mr_dereg " + std::to_string(old.lkey));
    check(!again.ok && again.status() == "no_such_object", "a second deregistration: no_such_object", again.line);
    std::set<uint32_t> keys = {e.mr.rkey, old.rkey};
    for (int i = 0; i < 20; ++i) {
        const Mr m = t.ctl.mr(e.pd, 64, "lw");
        check(!keys.count(m.rkey), "a key never issued before", "key " + std::to_string(m.rkey) + " again");
        keys.insert(m.rkey);
        t.ctl.call("mr_dereg " + std::to_string(m.lkey));
    }
    DataSpec d = write_seg(e, 0, 0, 16, 0, pattern(16, 1));
    d.rkey = old.rkey;
    d.raddr = old.addr;
    const Sent s = e.p().send(d);
    wait_nak(e.p(), Syndrome::rkey_invalid, s.csn);
    t.ctl.stream(e.conn, 2, e.pd, e.cq, e.cq);
    e.post("write", wr_args(5, old.addr, 16, old.lkey), 2);
    check_wc(e.completions(1)[0], 5, "loc_prot_err", "a WRITE from a deregistered lkey");
}

CONFORM_TEST(local_check_at_post, "R-MEM-4 R-STREAM-2:local R-STREAM-3",
             "a WRITE outside its lkey's region completes loc_prot_err, nothing is sent, the stream is in error: later posts "
             "complete wr_flush_err at once") {
    Env e = setup(t);
    e.post("write", wr_args(1, e.mr.addr + 1024 * 1024, 64, e.mr.lkey));
    check_wc(e.completions(1)[0], 1, "loc_prot_err", "the WRITE");
    e.p().quiet(is_data(), 20 * kMs, "nothing transmitted for a WR that failed its local check");
    e.post("write", wr_args(2, e.at(0), 64, e.mr.lkey));
    e.post_recv(3, e.at(0), 64);
    const auto wc = e.completions(2);
    check_wc(wc[0], 2, "wr_flush_err", "a WRITE posted after the error");
    check_wc(wc[1], 3, "wr_flush_err", "a receive posted after the error");
    e.p().quiet(is_data(), 10 * kMs, "nothing transmitted");
}

CONFORM_TEST(message_size_limit, "R-SEG-5",
             "a WR longer than 2^31 bytes is refused message_too_long before taking a msg_seq; the stream stays usable") {
    Env e = setup(t);
    const Answer a = e.try_post("write", wr_args(1, e.at(0), 0, e.mr.lkey) + " len=2147483649");
    check(!a.ok && a.status() == "message_too_long", "refused message_too_long", a.line);
    e.post("write", wr_args(2, e.at(0), 64, e.mr.lkey));
    const auto p = e.p().wait(is_data(), 1000 * kMs, "the next WRITE");
    check_eq(p.d().msg_seq, 0u, "msg_seq of the next WRITE (the refused one took none)");
    e.p().ack_all({p});
    check_wc(e.completions(1)[0], 2, "success", "the WRITE");
}

CONFORM_TEST(gather_list_segments, "R-SGE-1 R-SGE-2 R-SGE-3 R-SEG-2:list",
             "a WRITE gathered from entries of 500, 0 and 900 bytes is cut at the entry boundary (two packets); too many "
             "entries are refused; a bad entry fails the WR with nothing sent") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"max_inline", "0"}})});
    t.ctl.mem_write(e.at(0), pattern(500, 1));
    t.ctl.mem_write(e.at(4096), pattern(900, 2));
    e.post("write", "wr=1 raddr=0x10000 rkey=0x4242 " +
                        sge({{e.at(0), 500, e.mr.lkey}, {e.at(2048), 0, 0}, {e.at(4096), 900, e.mr.lkey}}));
    auto f = e.p().collect_n(is_data(), 2, 1000 * kMs);
    check_eq(f.size(), size_t(2), "packets (one per entry of nonzero length)");
    std::sort(f.begin(), f.end(), [](const RxPkt& a, const RxPkt& b) { return a.d().offset < b.d().offset; });
    check(f[0].d().offset == 0 && f[0].d().payload_len == 500 && f[1].d().offset == 500 && f[1].d().payload_len == 900 &&
              f[0].d().msg_len == 1400,
          "segments [0,500) and [500,1400) of a 1400-byte message", f[0].str() + " " + f[1].str());
    const auto a = pattern(500, 1), b = pattern(900, 2);
    check(std::equal(a.begin(), a.end(), f[0].payload().begin()) && std::equal(b.begin(), b.end(), f[1].payload().begin()),
          "each entry's bytes", "other bytes");
    e.p().ack_all(f);
    const auto wc = e.completions(1);
    check(wc[0].status == "success" && wc[0].byte_len == 1400, "success with byte_len 1400 (the list's sum)", wc[0].str());
    const Answer many = e.try_post("write", "wr=2 raddr=0x10000 rkey=0x4242 " +
                                                sge({{e.at(0), 8, e.mr.lkey}, {e.at(8), 8, e.mr.lkey}, {e.at(16), 8, e.mr.lkey},
                                                     {e.at(24), 8, e.mr.lkey}, {e.at(32), 8, e.mr.lkey}}));
    check(!many.ok && many.status() == "invalid_argument", "5 entries (max_send_sge 4) refused invalid_argument", many.line);
    t.ctl.stream(e.conn, 2, e.pd, e.cq, e.cq);
    e.post("write", "wr=3 raddr=0x10000 rkey=0x4242 " + sge({{e.at(0), 100, e.mr.lkey}, {e.at(100), 100, 0x7ff00001}}), 2);
    check_wc(e.completions(1)[0], 3, "loc_prot_err", "a list with an invalid entry");
    e.p().quiet(is_data(), 20 * kMs, "nothing of it transmitted");
}

CONFORM_TEST(scatter_into_receive_list, "R-SGE-4 R-SEND-2:list",
             "a 1000-byte SEND into a receive of two entries (300 + 700, apart): a segment straddling them is split; the gap "
             "and the bytes past the message stay untouched") {
    Env e = setup(t);
    t.ctl.mem_write(e.at(0), std::vector<uint8_t>(2048, 0xcc));
    t.ctl.call("recv " + std::to_string(e.conn) + " 1 wr=4 " + sge({{e.at(0), 300, e.mr.lkey}, {e.at(1000), 800, e.mr.lkey}}));
    const auto msg = pattern(1000, 9);
    DataSpec a = send_msg(1, 0, 0, std::vector<uint8_t>(msg.begin() + 600, msg.end()));
    a.msg_len = 1000;
    a.offset = 600;
    e.p().send(a);
    DataSpec b = send_msg(1, 0, 0, std::vector<uint8_t>(msg.begin(), msg.begin() + 600));
    b.msg_len = 1000;
    e.p().send(b);
    const auto wc = e.completions(1);
    check(wc[0].wr_id == 4 && wc[0].status == "success" && wc[0].byte_len == 1000, "receive 4, 1000 bytes", wc[0].str());
    const auto m = t.ctl.mem_read(e.at(0), 2048);
    check(std::equal(msg.begin(), msg.begin() + 300, m.begin()), "bytes [0,300) in the first entry", "other bytes");
    check(std::equal(msg.begin() + 300, msg.end(), m.begin() + 1000), "bytes [300,1000) in the second entry", "other bytes");
    check(std::all_of(m.begin() + 300, m.begin() + 1000, [](uint8_t x) { return x == 0xcc; }), "the gap between entries untouched",
          "written");
    check(std::all_of(m.begin() + 1700, m.end(), [](uint8_t x) { return x == 0xcc; }), "the list's bytes past the message untouched",
          "written");
}

CONFORM_TEST(inline_sends, "R-INLINE-1 R-INLINE-2 R-INLINE-3",
             "an inline WRITE is copied at post (no lkey): overwritten buffer, the first transmission and the resend carry the "
             "posted bytes; longer or READ inline refused; a small list goes as one packet") {
    Env e = setup(t, Setup{.iut = iut_cfg({{"max_inline", "256"}, {"initial_rto_us", "30000"}, {"min_rto_us", "30000"}})});
    t.ctl.mem_write(e.at(0), pattern(100, 3));
    e.post("write", wr_args(1, e.at(0), 100, 0) + " inline=1");
    t.ctl.mem_write(e.at(0), pattern(100, 200));  // reused at once
    const auto p = e.p().wait(is_data(), 1000 * kMs, "the inline WRITE");
    const auto r = e.p().wait([&](const RxPkt& x) { return x.is(PacketType::data) && x.d().csn == p.d().csn; }, 1000 * kMs,
                              "its resend after the RTO");
    const auto want = pattern(100, 3);
    check(std::equal(want.begin(), want.end(), p.payload().begin()), "the posted bytes in the first transmission", "later bytes");
    check(std::equal(want.begin(), want.end(), r.payload().begin()), "the posted bytes in the resend", "later bytes");
    e.p().ack_all({p, r});
    check_wc(e.completions(1)[0], 1, "success", "the inline WRITE");
    Answer a = e.try_post("write", wr_args(2, e.at(0), 300, 0) + " inline=1");
    check(!a.ok && a.status() == "invalid_argument", "an inline WRITE above max_inline refused invalid_argument", a.line);
    a = e.try_post("read", wr_args(3, e.at(0), 64, e.mr.lkey) + " inline=1");
    check(!a.ok && a.status() == "invalid_argument", "an inline READ refused invalid_argument", a.line);
    e.post("write", "wr=4 raddr=0x20000 rkey=0x4242 " +
                        sge({{e.at(1000), 30, e.mr.lkey}, {e.at(2000), 30, e.mr.lkey}, {e.at(3000), 40, e.mr.lkey}}));
    auto f = e.p().collect([](const RxPkt& x) { return x.is(PacketType::data) && x.d().remote_addr == 0x20000; }, 30 * kMs);
    std::set<uint32_t> csns;  // resends after the 30 ms RTO may be among them
    for (const auto& x : f) {
        csns.insert(x.d().csn);
        check(x.d().payload_len == 100, "a packet of 100 bytes for a 3-entry list within max_inline", x.str());
    }
    check(csns.size() == 1, "one segment", std::to_string(csns.size()) + " CSNs");
    e.p().ack_all(f);
    e.completions(1);
}

CONFORM_TEST(stream_attributes, "R-STREAM-9",
             "send_depth 3 and recv_depth 2 are the queue limits (any value); out-of-range attributes are refused") {
    Env e = setup(t, Setup{.stream_extra = "send_depth=3 recv_depth=2"});
    for (int i = 0; i < 3; ++i) e.post("write", wr_args(uint64_t(i), e.at(0), 8, e.mr.lkey));
    Answer a = e.try_post("write", wr_args(9, e.at(0), 8, e.mr.lkey));
    check(!a.ok && a.status() == "queue_full", "a 4th send WR refused queue_full", a.line);
    e.post_recv(1, e.at(0), 8);
    e.post_recv(2, e.at(0), 8);
    a = t.ctl.try_call("recv " + std::to_string(e.conn) + " 1 wr=3 addr=" + hex(e.at(0)) + " len=8 lkey=" + std::to_string(e.mr.lkey));
    check(!a.ok && a.status() == "queue_full", "a 3rd receive refused queue_full", a.line);
    a = t.ctl.try_call("stream " + std::to_string(e.conn) + " 2 " + std::to_string(e.pd) + " " + std::to_string(e.cq) + " " +
                       std::to_string(e.cq) + " send_depth=70000");
    check(!a.ok && a.status() == "invalid_argument", "send_depth 70000 refused invalid_argument", a.line);
    a = t.ctl.try_call("stream " + std::to_string(e.conn) + " 3 " + std::to_string(e.pd) + " " + std::to_string(e.cq) + " " +
                       std::to_string(e.cq) + " recv_depth=2000000");
    check(!a.ok && a.status() == "invalid_argument", "recv_depth 2000000 refused invalid_argument", a.line);
}

CONFORM_TEST(stream_error_on_demand, "R-STREAM-12 R-STREAM-7 R-STREAM-3",
             "set_stream_error flushes the outstanding WRs in order and the receives; later posts flush at once, incoming "
             "DATA gets stream_error; the stream stays in error until destroyed") {
    Env e = setup(t);
    e.post("write", wr_args(1, e.at(0), 8, e.mr.lkey));
    e.post("write", wr_args(2, e.at(0), 8, e.mr.lkey));
    e.post_recv(3, e.at(0), 8);
    e.p().collect_n(is_data(), 2, 1000 * kMs);
    t.ctl.call("stream_error " + std::to_string(e.conn) + " 1");
    auto wc = e.completions(3);
    // Send WRs in post order; the receive in any place (R-CMPL-7: no order between the two queues).
    std::vector<Wc> sends;
    for (const auto& w : wc) {
        if (w.opcode == "recv") check_wc(w, 3, "wr_flush_err", "the receive");
        else sends.push_back(w);
    }
    check_eq(sends.size(), size_t(2), "send completions");
    check_wc(sends[0], 1, "wr_flush_err", "first WR");
    check_wc(sends[1], 2, "wr_flush_err", "second WR");
    e.post("write", wr_args(4, e.at(0), 8, e.mr.lkey));
    check_wc(e.completions(1)[0], 4, "wr_flush_err", "a WRITE posted in error");
    const Sent s = e.p().send(write_seg(e, 0, 0, 8, 0, pattern(8, 1)));
    wait_nak(e.p(), Syndrome::stream_error, s.csn);
    t.ctl.call("stream_error " + std::to_string(e.conn) + " 1");  // no change
    e.no_completion(10);
    t.ctl.call("stream_destroy " + std::to_string(e.conn) + " 1");
    t.ctl.stream(e.conn, 1, e.pd, e.cq, e.cq);
    e.post("write", wr_args(5, e.at(0), 8, e.mr.lkey));
    const auto p = e.p().wait([](const RxPkt& r) { return r.is(PacketType::data) && (r.d().stream_id >> 24) == 1; },
                              1000 * kMs, "the new incarnation's WRITE");
    e.p().ack_all({p});
    check_wc(e.completions(1)[0], 5, "success", "the new incarnation's WRITE");
}

CONFORM_TEST(completion_notification, "R-NOTIFY-1",
             "armed solicited-only: an unsolicited SEND raises nothing, a solicited one one event, then disarmed; armed for all: "
             "any completion; completions already queued raise nothing") {
    Env e = setup(t);
    for (uint32_t i = 0; i < 5; ++i) e.post_recv(i, e.at(128 * i), 64);
    t.ctl.call("cq_arm " + std::to_string(e.cq) + " solicited");
    e.p().send(send_msg(1, 0, 0, pattern(8, 1)));
    e.completions(1);
    check_eq(events(t.ctl, e.cq), uint64_t(0), "events after an unsolicited SEND");
    e.p().send(send_msg(1, 1, 1, pattern(8, 1), wire::kDataSolicited));
    e.completions(1);
    check_eq(events(t.ctl, e.cq), uint64_t(1), "events after a solicited SEND");
    e.p().send(send_msg(1, 2, 2, pattern(8, 1), wire::kDataSolicited));
    e.completions(1);
    check_eq(events(t.ctl, e.cq), uint64_t(0), "events after another solicited SEND (one-shot: disarmed)");
    const Sent s = e.p().send(send_msg(1, 3, 3, pattern(8, 1)));
    wait_acked(e.p(), 0, s.psn);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    t.ctl.call("cq_arm " + std::to_string(e.cq) + " all");  // the completion is already queued
    check_eq(events(t.ctl, e.cq), uint64_t(0), "events for a completion queued before arming");
    e.completions(1);
    e.p().send(send_msg(1, 4, 4, pattern(8, 1)));
    e.completions(1);
    check_eq(events(t.ctl, e.cq), uint64_t(1), "events after any completion when armed for all");
}

CONFORM_TEST(shared_receive_queue, "R-SRQ-1 R-SRQ-2 R-SRQ-3 R-SRQ-4 R-SRQ-5",
             "an SRQ of depth 3 serving two streams: entries bind in recv_seq order (an early SEND binds its predecessors' "
             "too), complete in order; empty SRQ is RNR; error flushes bound entries; limit event; destroy refused in use") {
    Env e = setup(t, Setup{.stream = false});
    const uint32_t srq = uint32_t(parse_u64(t.ctl.call("srq " + std::to_string(e.pd) + " 3").at(0)));
    t.ctl.stream(e.conn, 2, e.pd, e.cq, e.cq, "srq=" + std::to_string(srq));
    t.ctl.stream(e.conn, 3, e.pd, e.cq, e.cq, "srq=" + std::to_string(srq));
    Answer a = t.ctl.try_call("recv " + std::to_string(e.conn) + " 2 wr=1 addr=" + hex(e.at(0)) + " len=8 lkey=" +
                              std::to_string(e.mr.lkey));
    check(!a.ok && a.status() == "invalid_argument", "post_recv on an SRQ stream refused invalid_argument", a.line);
    for (uint32_t i = 0; i < 3; ++i)
        t.ctl.call("srq_post " + std::to_string(srq) + " wr=" + std::to_string(10 + i) + " addr=" + hex(e.at(1024 * i)) +
                   " len=512 lkey=" + std::to_string(e.mr.lkey));
    a = t.ctl.try_call("srq_post " + std::to_string(srq) + " wr=13 addr=" + hex(e.at(4096)) + " len=512 lkey=" +
                       std::to_string(e.mr.lkey));
    check(!a.ok && a.status() == "queue_full", "a 4th entry refused queue_full", a.line);
    t.ctl.call("srq_arm " + std::to_string(srq) + " 2");
    // Stream 2: recv_seq 1 first binds entries 10 (recv_seq 0) and 11 (recv_seq 1).
    const Sent s1 = e.p().send(send_msg(2, 1, 1, pattern(64, 1)));
    wait_acked(e.p(), 0, s1.psn);
    check(t.ctl.mem_read(e.at(1024), 64) == pattern(64, 1), "recv_seq 1 placed in the second-oldest entry (11)", "elsewhere");
    const auto ev = t.ctl.call("srq_events");
    check(ev.at(0) == "1" && ev.size() > 1 && ev[1] == std::to_string(srq), "one limit event naming the SRQ", "ok " + ev.at(0));
    e.no_completion(5);
    e.p().send(send_msg(2, 0, 0, pattern(32, 2)));
    auto wc = e.completions(2);
    check(wc[0].wr_id == 10 && wc[1].wr_id == 11 && wc[0].stream == 2 && wc[0].byte_len == 32 && wc[1].byte_len == 64,
          "entries 10 then 11 complete on stream 2 in recv_seq order", wc_list(wc));
    // Stream 3: recv_seq 1 binds entry 12 to recv_seq 0 and finds the SRQ empty: RNR.
    const Sent s3 = e.p().send(send_msg(3, 1, 1, pattern(16, 3)));
    wait_nak(e.p(), Syndrome::rnr, s3.csn);
    a = t.ctl.try_call("srq_destroy " + std::to_string(srq));
    check(!a.ok, "destroy_srq refused while streams use it", a.line);
    t.ctl.call("stream_error " + std::to_string(e.conn) + " 3");
    wc = e.completions(1);
    check(wc[0].wr_id == 12 && wc[0].status == "wr_flush_err" && wc[0].stream == 3,
          "the entry bound to stream 3's never-arrived message flushed", wc[0].str());
}

}  // namespace mroce::conform
