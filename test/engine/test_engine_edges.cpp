// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The engine at its edges: queues and CQs of depths that are not powers of
// two across the 32-bit wrap of their counters (R-WRAP-1; the same depths
// with traffic, every counter wrapping, are the integrity matrix's wrap
// axis), keys and connection ids that do not come back (R-KEY-1), and the
// longest message (R-SEG-5).
#include <catch2/catch.hpp>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <unordered_set>
#include <vector>

#include "mroce/engine.hpp"
#include "pair_link.hpp"

using namespace mroce;

namespace {

// One engine with a connection still CONNECTING (nothing is transmitted, so
// posted work stays queued) and one stream on it; every counter starts half
// a depth below 2^32.
struct QueueRig {
    Engine eng;
    uint32_t conn = 0, pd = 0, send_cq = 0, recv_cq = 0;
    static constexpr uint32_t kStream = 7;

    static EngineConfig config(uint32_t depth) {
        EngineConfig cfg;
        cfg.stream_depth = depth;
        cfg.recv_depth = depth;
        cfg.test_seq_base = 0u - depth / 2 - 1;
        return cfg;
    }
    explicit QueueRig(uint32_t depth) : eng(config(depth)) {
        pd = eng.alloc_pd();
        REQUIRE(eng.create_cq(depth, send_cq) == Status::ok);
        REQUIRE(eng.create_cq(depth, recv_cq) == Status::ok);
        REQUIRE(eng.connect(1, conn) == Status::ok);
        REQUIRE(eng.create_stream(conn, kStream, pd, send_cq, recv_cq) == Status::ok);
    }
    Status send(uint64_t wr_id) {
        SendWr w;
        w.wr_id = wr_id;
        w.op = OpKind::write;  // 0 bytes: no local region needed
        return eng.post_send(conn, kStream, w);
    }
    Status recv(uint64_t wr_id) {
        RecvWr r;
        r.wr_id = wr_id;
        return eng.post_recv(conn, kStream, r);
    }
    // A send WR whose lkey names no region: loc_prot_err, the stream enters ERROR (R-STREAM-2).
    void fail_stream() {
        SendWr w;
        w.wr_id = 999'999;
        w.length = 8;
        w.local_addr = 64;
        w.lkey = 0xdead;
        REQUIRE(eng.post_send(conn, kStream, w) == Status::ok);
    }
    std::vector<Completion> poll(uint32_t cq, size_t max = ~size_t(0)) {
        std::vector<Completion> out;
        Completion c[37];  // batches that do not divide the depths
        while (out.size() < max) {
            const size_t n = eng.poll_cq(cq, c, std::min<size_t>(37, max - out.size()));
            if (!n) break;
            out.insert(out.end(), c, c + n);
        }
        return out;
    }
};

}  // namespace

TEST_CASE("send queue: exactly its depth, flushed in post order across the counter wrap", "[engine][edges][wrap]") {
    const uint32_t depth = GENERATE(3u, 500u, 1000u);
    INFO("depth " << depth);
    QueueRig r(depth);
    for (uint32_t i = 0; i < depth; ++i) REQUIRE(r.send(i) == Status::ok);
    CHECK(r.send(depth) == Status::queue_full);  // R-STREAM-5: the depth the user chose
    REQUIRE(r.eng.disconnect(r.conn) == Status::ok);  // before ESTABLISHED: closes, flushes (R-CONN-9)
    const auto got = r.poll(r.send_cq);  // a full CQ of the same depth
    REQUIRE(got.size() == depth);
    for (uint32_t i = 0; i < depth; ++i) {
        CHECK(got[i].wr_id == i);
        CHECK(got[i].status == WcStatus::wr_flush_err);
    }
    CHECK(r.eng.stats().cq_overflows == 0);
}

TEST_CASE("receive queue: exactly its depth, flushed in post order across the counter wrap", "[engine][edges][wrap]") {
    const uint32_t depth = GENERATE(3u, 500u, 1000u);
    INFO("depth " << depth);
    QueueRig r(depth);
    for (uint32_t i = 0; i < depth; ++i) REQUIRE(r.recv(i) == Status::ok);
    CHECK(r.recv(depth) == Status::queue_full);
    r.fail_stream();  // R-STREAM-2: the posted receives are flushed, in order
    const auto got = r.poll(r.recv_cq);
    REQUIRE(got.size() == depth);
    for (uint32_t i = 0; i < depth; ++i) {
        CHECK(got[i].wr_id == i);
        CHECK(got[i].status == WcStatus::wr_flush_err);
        CHECK(got[i].opcode == WcOpcode::recv);
    }
    const auto failed = r.poll(r.send_cq);
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].status == WcStatus::loc_prot_err);
}

TEST_CASE("CQ: holds exactly its depth, in order, through many wraps of its slots and one of its counters",
          "[engine][edges][wrap]") {
    const uint32_t depth = GENERATE(3u, 500u, 1000u);
    INFO("depth " << depth);
    QueueRig r(depth);
    r.fail_stream();
    REQUIRE(r.poll(r.send_cq).size() == 1);
    // Posts to a stream in ERROR complete at once (R-STREAM-3): each is one
    // completion. Keep the CQ between nearly empty and full while its
    // counters pass 2^32, polling uneven amounts.
    uint64_t next_id = 0, want_id = 0;
    uint32_t live = 0;
    for (int round = 0; round < 12; ++round) {
        const uint32_t add = depth - live;  // fill it
        for (uint32_t i = 0; i < add; ++i) REQUIRE(r.send(next_id++) == Status::ok);
        live += add;
        if (round == 5) {
            // R-CMPL-5: one more than the depth is lost and counted.
            REQUIRE(r.send(~uint64_t(0)) == Status::ok);
            CHECK(r.eng.stats().cq_overflows == 1);
        }
        const uint32_t take = round % 3 == 2 ? live : 1 + (live * 5 + uint32_t(round)) / 7 % live;
        const auto got = r.poll(r.send_cq, take);
        REQUIRE(got.size() == std::min(take, live));
        for (const Completion& c : got) {
            CHECK(c.wr_id == want_id);
            CHECK(c.status == WcStatus::wr_flush_err);
            ++want_id;
        }
        live -= uint32_t(got.size());
    }
    const auto rest = r.poll(r.send_cq);
    CHECK(rest.size() == live);
    for (const Completion& c : rest) CHECK(c.wr_id == want_id++);
    CHECK(want_id == next_id);
    CHECK(r.eng.stats().cq_overflows == 1);
}

// R-MEM-2, R-KEY-1: 100,000 registrations of one buffer, each deregistered
// before the next, beside regions that stay (the table is never empty).
// No key comes back, a stale key is refused every time, and WRITEs with
// stale rkeys are NAKed rkey_invalid while the live key still works.
TEST_CASE("keys: 100,000 register/deregister cycles, a stale key is refused every time", "[engine][edges][keys]") {
    EngineConfig cfg;
    cfg.stream_depth = 4;
    cfg.recv_depth = 4;
    Engine ea(cfg), eb(cfg);
    mroce::test::PairLink link(ea, eb, 5);
    uint32_t ca = 0, cb = 0;
    REQUIRE(mroce::test::connect_pair(link, ca, cb));
    const uint32_t pda = ea.alloc_pd(), pdb = eb.alloc_pd();
    uint32_t cqa, cqb;
    REQUIRE(ea.create_cq(4096, cqa) == Status::ok);
    REQUIRE(eb.create_cq(4096, cqb) == Status::ok);
    const uint32_t rw = kAccessLocalWrite | kAccessRemoteWrite;
    std::vector<uint8_t> src(4096, 0x3c), dst(4096, 0), other(4096);
    MrInfo msrc, keep[3], mr;
    REQUIRE(ea.register_mr(pda, src.data(), src.size(), rw, msrc) == Status::ok);
    for (MrInfo& k : keep) REQUIRE(eb.register_mr(pdb, other.data(), other.size(), rw, k) == Status::ok);

    constexpr uint32_t kCycles = 100'000;
    std::vector<uint32_t> stale;
    stale.reserve(kCycles);
    std::unordered_set<uint32_t> issued;
    for (const MrInfo& k : keep) issued.insert(k.rkey);
    uint32_t reissued = 0, stale_accepted = 0;
    REQUIRE(eb.register_mr(pdb, dst.data(), dst.size(), rw, mr) == Status::ok);
    issued.insert(mr.rkey);
    for (uint32_t i = 0; i < kCycles; ++i) {
        REQUIRE(eb.deregister_mr(mr.lkey) == Status::ok);
        stale.push_back(mr.rkey);
        REQUIRE(eb.register_mr(pdb, dst.data(), dst.size(), rw, mr) == Status::ok);
        reissued += !issued.insert(mr.rkey).second;
        // A stale key names nothing: deregistering it again must not find
        // (and remove) the region that now holds its slot.
        stale_accepted += eb.deregister_mr(stale.back()) != Status::no_such_object;
    }
    CHECK(reissued == 0);
    CHECK(stale_accepted == 0);
    for (const MrInfo& k : keep) CHECK(eb.deregister_mr(k.lkey) == Status::ok);  // untouched by the churn

    // Through the wire: the last 300 stale rkeys (more than any 8-bit
    // generation spans) and the first, one WRITE each on its own stream
    // (the NAK ends the stream, R-STREAM-2), then the live key.
    std::vector<uint32_t> probe(stale.end() - 300, stale.end());
    probe.push_back(stale.front());
    const uint32_t live_stream = 100'000;
    auto write = [&](uint32_t stream, uint32_t rkey, uint64_t id) {
        REQUIRE(ea.create_stream(ca, stream, pda, cqa, cqa) == Status::ok);
        REQUIRE(eb.create_stream(cb, stream, pdb, cqb, cqb) == Status::ok);
        SendWr w;
        w.wr_id = id;
        w.op = OpKind::write;
        w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(src.data()));
        w.length = uint32_t(src.size());
        w.lkey = msrc.lkey;
        w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data()));
        w.rkey = rkey;
        REQUIRE(ea.post_send(ca, stream, w) == Status::ok);
    };
    for (uint32_t i = 0; i < probe.size(); ++i) write(1 + i, probe[i], i);
    write(live_stream, mr.rkey, 1u << 20);
    std::vector<Completion> got;
    REQUIRE(link.run([&] {
        Completion c[64];
        for (size_t n; (n = ea.poll_cq(cqa, c, 64)) > 0;) got.insert(got.end(), c, c + n);
        return got.size() == probe.size() + 1;
    }, 10'000'000'000ull));
    uint32_t refused = 0;
    for (const Completion& c : got) {
        if (c.wr_id == 1u << 20) {
            CHECK(c.status == WcStatus::success);
        } else {
            refused += c.status == WcStatus::rem_access_err;
        }
    }
    CHECK(refused == probe.size());
    CHECK(std::memcmp(dst.data(), src.data(), dst.size()) == 0);
    ConnStats sb;
    REQUIRE(eb.conn_stats(cb, sb) == Status::ok);
    CHECK(sb.naks_sent >= probe.size());

    // As lkeys (R-MEM-4): a send WR naming a stale key fails at post (on
    // streams of B's own: those above are in ERROR after their NAKs).
    uint32_t lkey_refused = 0;
    for (uint32_t i = 0; i < probe.size(); ++i) {
        const uint32_t stream = 200'000 + i;
        REQUIRE(eb.create_stream(cb, stream, pdb, cqb, cqb) == Status::ok);
        SendWr w;
        w.op = OpKind::write;
        w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data()));
        w.length = 8;
        w.lkey = probe[i];
        REQUIRE(eb.post_send(cb, stream, w) == Status::ok);
        Completion c;
        lkey_refused += eb.poll_cq(cqb, &c, 1) == 1 && c.status == WcStatus::loc_prot_err;
    }
    CHECK(lkey_refused == probe.size());
}

// R-CONN-1, R-CONN-13, R-KEY-1: 100,000 connections opened and released;
// no id comes back, and once a live connection exists, a packet naming any
// of the released ids (from that connection's own peer id) is counted
// rx_unknown_conn and reaches no connection.
TEST_CASE("connection ids: 100,000 connect/release cycles, a stale id is unknown every time",
          "[engine][edges][keys]") {
    EngineConfig cfg;
    cfg.csn_window = 64;  // small connections: the churn allocates one per cycle
    cfg.num_paths = 1;
    Engine ea(cfg), eb(cfg);
    constexpr uint32_t kCycles = 100'000;
    std::vector<uint32_t> stale;
    stale.reserve(kCycles);
    std::unordered_set<uint32_t> issued;
    uint32_t reissued = 0, stale_known = 0;
    ConnEvent ev[64];
    for (uint32_t i = 0; i < kCycles; ++i) {
        uint32_t id = 0;
        REQUIRE(ea.connect(1, id) == Status::ok);
        reissued += !issued.insert(id).second;
        REQUIRE(ea.disconnect(id) == Status::ok);  // before ESTABLISHED: closed at once
        REQUIRE(ea.release_conn(id) == Status::ok);
        ConnStats st;
        stale_known += ea.conn_stats(id, st) != Status::no_such_object;
        stale_known += ea.release_conn(id) != Status::no_such_object;
        stale.push_back(id);
        while (ea.poll_events(ev, 64) == 64) {
        }
    }
    CHECK(reissued == 0);
    CHECK(stale_known == 0);
    CHECK(ea.conn_count() == 0);

    mroce::test::PairLink link(ea, eb, 9);
    uint32_t ca = 0, cb = 0;
    REQUIRE(mroce::test::connect_pair(link, ca, cb));
    CHECK(issued.count(ca) == 0);
    const uint64_t unknown_before = ea.stats().rx_unknown_conn;
    for (const uint32_t id : stale) {
        wire::CommonHeader h;
        h.type = wire::PacketType::probe;
        h.dst_conn = id;
        h.src_conn = cb;  // the live connection's peer: only the id can tell them apart
        uint8_t buf[64];
        const size_t len = wire::encode_probe({buf, sizeof buf}, h, wire::ProbeHeader{1, 1});
        REQUIRE(len > 0);
        RxPacket r;
        r.data = buf;
        r.len = uint32_t(len);
        r.peer = 1;
        ea.rx_burst(&r, 1, link.now);
    }
    CHECK(ea.stats().rx_unknown_conn - unknown_before == kCycles);
    TxPacket out[8];
    CHECK(ea.tx_burst(out, 8, link.now) == 0);  // no PROBE_REPLY: no connection took one
}

// R-CSN-2: the initial CSN and the cookie come from the kernel's generator,
// not from state an identical engine would share: two engines built alike
// announce different ones (a seeded generator repeats them), and one
// engine's connections all differ. (A false failure: about one run in a million.)
TEST_CASE("initial CSN and cookie are drawn afresh for every connection", "[engine][edges][keys]") {
    auto announce = [](Engine& e, uint32_t& csn, uint32_t& cookie) {
        uint32_t id = 0;
        REQUIRE(e.connect(1, id) == Status::ok);
        TxPacket out[4];
        REQUIRE(e.tx_burst(out, 4, 0) == 1);
        wire::Packet pk;
        REQUIRE(wire::decode_data({out[0].hdr, out[0].hdr_len}, pk) == wire::DecodeError::ok);
        REQUIRE(pk.common.type == wire::PacketType::connect_req);
        csn = pk.connect.initial_csn;
        cookie = pk.connect.cookie;
    };
    Engine ea, eb;
    std::unordered_set<uint32_t> csns, cookies;
    for (int i = 0; i < 64; ++i) {
        uint32_t csn_a, cookie_a, csn_b, cookie_b;
        announce(ea, csn_a, cookie_a);
        announce(eb, csn_b, cookie_b);
        CHECK(csn_a != csn_b);
        CHECK(cookie_a != cookie_b);
        csns.insert(csn_a);
        cookies.insert(cookie_a);
    }
    CHECK(csns.size() == 64);
    CHECK(cookies.size() == 64);
}

namespace {

// len bytes of address space whose content repeats every period bytes (61
// pages: a misplaced segment lands on different bytes unless it moved by a
// multiple of 61 pages): one memfd mapped again and again, so a 2 GiB
// message source costs 244 KiB of memory (RssShmem counts the memfd's pages
// once per mapping; physically they are there once).
struct PeriodicSource {
    uint8_t* base = nullptr;
    size_t span = 0;
    int fd = -1;
    PeriodicSource(size_t len, uint64_t seed) {
        const size_t period = size_t(sysconf(_SC_PAGESIZE)) * 61;
        span = (len + period - 1) / period * period;
        fd = memfd_create("mroce-test-source", 0);
        REQUIRE(fd >= 0);
        std::vector<uint8_t> pattern(period);
        mroce::test::SplitMix rng(seed);
        for (uint8_t& b : pattern) b = uint8_t(rng.next());
        REQUIRE(pwrite(fd, pattern.data(), period, 0) == ssize_t(period));
        void* r = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        REQUIRE(r != MAP_FAILED);
        base = static_cast<uint8_t*>(r);
        for (size_t off = 0; off < span; off += period)
            REQUIRE(mmap(base + off, period, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == base + off);
    }
    ~PeriodicSource() {
        munmap(base, span);
        close(fd);
    }
};

// Fresh anonymous memory that the check gives back as it goes.
struct Sink {
    uint8_t* base = nullptr;
    size_t len = 0;
    explicit Sink(size_t n) : len(n) {
        void* r = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        REQUIRE(r != MAP_FAILED);
        base = static_cast<uint8_t*>(r);
    }
    ~Sink() { munmap(base, len); }
};

}  // namespace

// R-SEG-5: a message of exactly kMaxMessageSize (2^31 bytes, verbs'
// max_msg_sz) is carried end to end: 238,610 segments of 9000 bytes, the
// last one partial. Every destination byte is compared with the source in
// order as the segments land, and each checked MiB is given back, so the
// run holds only what the reordering window leaves unchecked.
TEST_CASE("a 2^31-byte WRITE lands whole", "[engine][edges][length]") {
    constexpr uint32_t len = kMaxMessageSize;
    EngineConfig cfg;
    cfg.max_payload = 9000;
    cfg.conn_timeout = 60'000'000'000ull;
    Engine ea(cfg), eb(cfg);
    mroce::test::PairLink link(ea, eb, 13);
    uint32_t ca = 0, cb = 0;
    REQUIRE(mroce::test::connect_pair(link, ca, cb));
    PeriodicSource src(len, 21);
    Sink dst(len);
    const uint32_t pda = ea.alloc_pd(), pdb = eb.alloc_pd();
    uint32_t cqa, cqb;
    REQUIRE(ea.create_cq(16, cqa) == Status::ok);
    REQUIRE(eb.create_cq(16, cqb) == Status::ok);
    MrInfo ms, md;
    REQUIRE(ea.register_mr(pda, src.base, len, 0, ms) == Status::ok);
    REQUIRE(eb.register_mr(pdb, dst.base, len, kAccessLocalWrite | kAccessRemoteWrite, md) == Status::ok);
    REQUIRE(ea.create_stream(ca, 1, pda, cqa, cqa) == Status::ok);
    REQUIRE(eb.create_stream(cb, 1, pdb, cqb, cqb) == Status::ok);
    SendWr w;
    w.wr_id = 42;
    w.op = OpKind::write;
    w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(src.base));
    w.length = len;
    w.lkey = ms.lkey;
    w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.base));
    w.rkey = md.rkey;
    REQUIRE(ea.post_send(ca, 1, w) == Status::ok);

    constexpr size_t kChunk = 1 << 20;
    size_t checked = 0;
    uint64_t checked_at = 0;
    auto check_landed = [&] {
        while (checked < len && std::memcmp(dst.base + checked, src.base + checked, kChunk) == 0) {
            REQUIRE(madvise(dst.base + checked, kChunk, MADV_DONTNEED) == 0);
            checked += kChunk;
        }
    };
    std::vector<Completion> got;
    const bool done = link.run([&] {
        if (link.delivered - checked_at >= 256) {  // about 2 MiB of segments since the last look
            checked_at = link.delivered;
            check_landed();
        }
        Completion c[4];
        for (size_t n; (n = ea.poll_cq(cqa, c, 4)) > 0;) got.insert(got.end(), c, c + n);
        return !got.empty();
    }, 100'000'000'000ull);
    REQUIRE(done);
    REQUIRE(got.size() == 1);
    CHECK(got[0].wr_id == 42);
    CHECK(got[0].status == WcStatus::success);
    CHECK(got[0].byte_len == len);
    check_landed();
    CHECK(checked == len);  // every byte, in its place
    ConnStats sa;
    REQUIRE(ea.conn_stats(ca, sa) == Status::ok);
    CHECK(sa.tx_payload_bytes == len);
    CHECK(sa.tx_data_packets == (uint64_t(len) + 8999) / 9000);
}

// R-SEG-5: one byte more is refused at post, before the WR takes a
// msg_seq: the stream stays usable and the next WR completes normally.
TEST_CASE("a WR longer than 2^31 bytes is refused at post", "[engine][edges][length]") {
    Engine ea, eb;
    mroce::test::PairLink link(ea, eb, 17);
    uint32_t ca = 0, cb = 0;
    REQUIRE(mroce::test::connect_pair(link, ca, cb));
    const uint32_t pda = ea.alloc_pd(), pdb = eb.alloc_pd();
    uint32_t cqa, cqb;
    REQUIRE(ea.create_cq(16, cqa) == Status::ok);
    REQUIRE(eb.create_cq(16, cqb) == Status::ok);
    REQUIRE(ea.create_stream(ca, 1, pda, cqa, cqa) == Status::ok);
    REQUIRE(eb.create_stream(cb, 1, pdb, cqb, cqb) == Status::ok);
    Sink big(size_t(kMaxMessageSize) + 4096);  // never touched: the WRs are refused before any check
    MrInfo ma, mb;
    const uint32_t all = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead;
    REQUIRE(ea.register_mr(pda, big.base, big.len, all, ma) == Status::ok);
    std::vector<uint8_t> dst(4096);
    REQUIRE(eb.register_mr(pdb, dst.data(), dst.size(), all, mb) == Status::ok);
    for (const OpKind op : {OpKind::write, OpKind::send, OpKind::read}) {
        for (const uint32_t len : {kMaxMessageSize + 1, 0xffffffffu}) {
            INFO("op " << int(op) << " length " << len);
            SendWr w;
            w.op = op;
            w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(big.base));
            w.length = len;
            w.lkey = ma.lkey;
            w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data()));
            w.rkey = mb.rkey;
            CHECK(ea.post_send(ca, 1, w) == Status::message_too_long);
        }
    }
    // A gathered message's total counts (R-SGE-1): 2^31 + 1, and a sum past 2^32.
    const uint64_t at = uint64_t(reinterpret_cast<uintptr_t>(big.base));
    const std::vector<Sge> over = {{at, 1u << 30, ma.lkey}, {at, (1u << 30) + 1, ma.lkey}};
    const std::vector<Sge> wraps = {{at, 1u << 31, ma.lkey}, {at, 1u << 31, ma.lkey}, {at, 1u << 31, ma.lkey}};
    for (const std::vector<Sge>* list : {&over, &wraps}) {
        SendWr w;
        w.op = OpKind::write;
        w.sg_list = list->data();
        w.num_sge = uint32_t(list->size());
        w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data()));
        w.rkey = mb.rkey;
        CHECK(ea.post_send(ca, 1, w) == Status::message_too_long);
    }
    CHECK(std::string(to_string(Status::message_too_long)).find("2^31") != std::string::npos);
    SendWr w;
    w.wr_id = 7;
    w.op = OpKind::write;
    w.local_addr = uint64_t(reinterpret_cast<uintptr_t>(big.base));
    w.length = 4096;
    w.lkey = ma.lkey;
    w.remote_addr = uint64_t(reinterpret_cast<uintptr_t>(dst.data()));
    w.rkey = mb.rkey;
    REQUIRE(ea.post_send(ca, 1, w) == Status::ok);
    Completion c{};
    size_t n = 0;
    REQUIRE(link.run([&] { return (n += ea.poll_cq(cqa, &c, 1)) > 0; }, 1'000'000'000));
    CHECK(n == 1);
    CHECK(c.wr_id == 7);  // the refused WRs took no place in the queue
    CHECK(c.status == WcStatus::success);
    CHECK(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0; }));  // untouched source pages
}
