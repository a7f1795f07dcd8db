// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The native API end to end over real UDP sockets on 127.0.0.1: a server
// device in automatic progress (engine thread) and a client in manual progress,
// so both progress modes and the locking between the engine thread and
// application calls are exercised.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "mroce/api.hpp"

using namespace mroce;

namespace {

std::unique_ptr<Device> open_at(uint16_t port, ProgressMode pm) {
    DeviceConfig d;
    d.port = port;
    d.progress = pm;
    d.path_port_span = 8;
    d.engine.conn_timeout = 300'000'000;
    return open_device(d);
}

template <class Pred>
bool until(Device& dev, Pred&& p, Time limit = 3'000'000'000) {
    const Time end = dev.now() + limit;
    while (!p()) {
        if (dev.now() > end) return false;
        dev.idle(dev.progress() != 0);
    }
    return true;
}

// A link that sends everything into the void and receives nothing.
class StubTransport : public Transport {
public:
    Time now() noexcept override { return 0; }
    size_t recv_burst(RxPacket*, size_t) override { return 0; }
    size_t send_burst(const TxPacket*, size_t n, uint32_t*) override { return n; }
    bool idle(bool, Time, Time) override { return false; }
    void wake() override {}
    uint32_t resolve_peer(const std::string&, uint16_t) override { return 1; }
    std::string peer_name(uint32_t) const override { return "peer"; }
    TransportStats stats() const override { return {}; }
    std::string describe() const override { return "test link"; }
};

// A link that only reports its MTU: what Device makes of max_payload.
class MtuOnlyTransport final : public StubTransport {
public:
    explicit MtuOnlyTransport(uint32_t mtu) : mtu_(mtu) {}
    uint32_t link_mtu() const noexcept override { return mtu_; }

private:
    uint32_t mtu_;
};

// A zero-copy link whose NIC still holds `held` payload segments of sent packets.
class HeldPayloadTransport final : public StubTransport {
public:
    uint32_t held = 0;
    Time waited = 0;
    uint32_t tx_payload_held(Time wait_ns) override {
        waited = wait_ns;
        return held;
    }
};

// A link whose clock is set by hand and counts its reads, and whose wait
// policy records what it is given, blocking whenever the caller did no work.
class ClockTransport final : public StubTransport {
public:
    Time clock = 0;
    uint32_t reads = 0;
    std::vector<std::string> idles;
    Time now() noexcept override {
        ++reads;
        return clock;
    }
    bool idle(bool active, Time now, Time deadline) override {
        idles.push_back(std::to_string(active) + " " + std::to_string(now) + " " + std::to_string(deadline));
        return !active;
    }
};

std::string open_error(uint32_t mtu, uint16_t max_payload) {
    DeviceConfig d;
    d.engine.max_payload = max_payload;
    try {
        Device dev(d, std::make_unique<MtuOnlyTransport>(mtu));
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(accepted)";
}

uint16_t chosen(uint32_t mtu, uint16_t max_payload) {
    DeviceConfig d;
    d.engine.max_payload = max_payload;
    Device dev(d, std::make_unique<MtuOnlyTransport>(mtu));
    return dev.config().engine.max_payload;
}

}  // namespace

TEST_CASE("api: a device fits its segments to the link's MTU (R-SEG-4)", "[api]") {
    CHECK(chosen(65536, kMaxPayloadAuto) == 8192);
    CHECK(chosen(1500, kMaxPayloadAuto) == 1024);
    CHECK(chosen(0, kMaxPayloadAuto) == 4096);      // a transport that cannot tell
    CHECK(chosen(1500, 1400) == 1400);              // explicit, fits exactly
    CHECK(chosen(0, 9000) == 9000);
    CHECK(open_error(1500, 1400) == "(accepted)");
    CHECK_THAT(open_error(1500, 1401),
               Catch::Contains("key 'max_payload': 1401 needs 1501 B IPv4 datagrams, above the link's MTU of 1500 B "
                               "(test link); use max_payload <= 1400 or auto"));
    CHECK_THAT(open_error(1500, 4096), Catch::Contains("above the link's MTU of 1500 B"));
    CHECK_THAT(open_error(120, kMaxPayloadAuto), Catch::Contains("key 'max_payload': auto: the link's MTU of 120 B"));
    CHECK_THAT(open_error(120, 64), Catch::Contains("above the link's MTU of 120 B (test link)"));
}

TEST_CASE("api: a region stays registered while the driver's NIC still holds its sent payloads (R-MEM-6)", "[api]") {
    DeviceConfig d;
    auto t = std::make_unique<HeldPayloadTransport>();
    HeldPayloadTransport& link = *t;
    Device dev(d, std::move(t));
    std::vector<uint8_t> mem(4096);
    const uint32_t pd = dev.alloc_pd();
    const MemoryRegion mr = dev.register_mr(pd, mem.data(), mem.size(), kAccessLocalWrite | kAccessRemoteRead);
    link.held = 3;
    CHECK_THROWS_AS(dev.deregister_mr(mr), TimeoutError);
    CHECK_THROWS_WITH(dev.deregister_mr(mr),
                      Catch::Contains("deregister_mr: 3 payload segments of sent packets are still held by "
                                      "test link after 1 s") &&
                          Catch::Contains("the region stays registered"));
    CHECK(link.waited == 1'000'000'000);
    link.held = 0;
    CHECK_NOTHROW(dev.deregister_mr(mr));   // still registered: this one deregisters it
    CHECK_THROWS(dev.deregister_mr(mr));    // and only this one
}

// After work the port returns at once and uses no clock (DrivePort, SpinWindow),
// so idle() reads none there (round 42); without work the port may wait,
// timed from a clock read then, until the engine's deadline (R-TIMER-5).
TEST_CASE("api: Device::idle after a pass with work hands the port that pass's clock and reads none; without work "
          "a fresh clock and the engine's deadline (R-TIMER-5); it says whether it blocked", "[api]") {
    DeviceConfig d;
    auto t = std::make_unique<ClockTransport>();
    ClockTransport& link = *t;
    Device dev(d, std::move(t));
    link.clock = 1000;
    (void)dev.progress();
    link.clock = 5000;  // the pass's work took time
    const uint32_t reads = link.reads;
    CHECK_FALSE(dev.idle(true));
    CHECK(link.reads == reads);
    CHECK(link.idles == std::vector<std::string>{"1 1000 1000"});
    CHECK(dev.idle(false));
    CHECK(link.reads == reads + 1);
    CHECK(link.idles.back() == "0 5000 " + std::to_string(UINT64_MAX));  // no connection: no deadline
    CHECK(dev.device_stats().blocks == 1);
}

TEST_CASE("api: connect/accept, write, send, read, atomics, stats, peer loss", "[api]") {
    const uint16_t base = uint16_t(32000 + (uint32_t(::getpid()) * 37u) % 20000u);
    auto srv = open_at(base, ProgressMode::automatic);
    auto cli = open_at(uint16_t(base + 20), ProgressMode::manual);
    constexpr size_t N = 1 << 20;
    std::vector<uint8_t> smem(N), cmem(N);
    const uint32_t spd = srv->alloc_pd(), cpd = cli->alloc_pd();
    const uint32_t scq = srv->create_cq(256), ccq = cli->create_cq(256);
    constexpr uint32_t all = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    const MemoryRegion smr = srv->register_mr(spd, smem.data(), N, all);
    const MemoryRegion cmr = cli->register_mr(cpd, cmem.data(), N, all);
    srv->set_accept_streams({StreamSpec{3, spd, scq, scq}});

    Connection c = cli->connect("127.0.0.1", base);
    Connection s = srv->accept(1'000'000'000);
    CHECK(c.state() == ConnState::established);
    c.create_stream(3, cpd, ccq, ccq);

    std::vector<Completion> got;
    const auto wait_cq = [&](Device& d, uint32_t cq, size_t n) {
        got.clear();
        return until(*cli, [&] {
            Completion w[16];
            const size_t k = d.poll_cq(cq, w, 16);
            got.insert(got.end(), w, w + k);
            return got.size() >= n;
        });
    };

    // WRITE 256 KiB + 5
    const uint32_t len = (256u << 10) + 5;
    for (uint32_t i = 0; i < len; ++i) cmem[i] = uint8_t(i * 7 + 3);
    c.post_send(3, Connection::write_wr(1, cmr, cmr.iova(), len, smr.iova(100), smr.rkey));
    REQUIRE(wait_cq(*cli, ccq, 1));
    CHECK(got[0].status == WcStatus::success);
    CHECK(std::memcmp(cmem.data(), smem.data() + 100, len) == 0);

    // SEND into a posted receive
    s.post_recv(3, RecvWr{77, smr.iova(500000), 4096, smr.lkey});
    std::memcpy(cmem.data() + 9000, "hello mroce", 11);
    c.post_send(3, Connection::send_wr(2, cmr, cmr.iova(9000), 11));
    REQUIRE(wait_cq(*srv, scq, 1));
    CHECK(got[0].wr_id == 77);
    CHECK(got[0].byte_len == 11);
    CHECK(std::memcmp(smem.data() + 500000, "hello mroce", 11) == 0);
    REQUIRE(wait_cq(*cli, ccq, 1));

    // READ back
    std::memset(cmem.data() + 600000, 0, 4000);
    c.post_send(3, Connection::read_wr(3, cmr, cmr.iova(600000), 4000, smr.iova(100), smr.rkey));
    REQUIRE(wait_cq(*cli, ccq, 1));
    CHECK(got[0].opcode == WcOpcode::read);
    CHECK(std::memcmp(cmem.data() + 600000, cmem.data(), 4000) == 0);

    // Atomics on an aligned word
    uint64_t v = 40;
    std::memcpy(smem.data() + 800000, &v, 8);
    c.post_send(3, Connection::fadd_wr(4, cmr, cmr.iova(700000), smr.iova(800000), smr.rkey, 2));
    c.post_send(3, Connection::cas_wr(5, cmr, cmr.iova(700008), smr.iova(800000), smr.rkey, 42, 1000));
    REQUIRE(wait_cq(*cli, ccq, 2));
    uint64_t old0, old1;
    std::memcpy(&old0, cmem.data() + 700000, 8);
    std::memcpy(&old1, cmem.data() + 700008, 8);
    CHECK(old0 == 40);
    CHECK(old1 == 42);
    std::memcpy(&v, smem.data() + 800000, 8);
    CHECK(v == 1000);

    // A protection error is a completion status, not an exception
    c.post_send(3, Connection::write_wr(6, cmr, cmr.iova(), 64, smr.iova(N - 8), smr.rkey));
    REQUIRE(wait_cq(*cli, ccq, 1));
    CHECK(got[0].status == WcStatus::rem_access_err);

    const ConnStats cs = c.stats();
    CHECK(cli->config().engine.max_payload == 8192);   // max_payload = auto on loopback (MTU 65536)
    CHECK(cs.tx_data_packets > len / 8192);
    uint64_t tx = 0;
    for (uint16_t p = 0; p < cs.num_paths; ++p) tx += c.path_stats(p).tx_packets;
    CHECK(tx >= cs.tx_data_packets);
    CHECK_THROWS_AS(c.path_stats(999), Error);
    CHECK_THROWS_AS(cli->register_mr(999, cmem.data(), 64, all), Error);
    CHECK(srv->engine_stats().rx_decode_errors == 0);

    // Peer gone: a fresh stream's writes fail with transport_err within conn_timeout.
    srv.reset();
    c.create_stream(4, cpd, ccq, ccq);
    c.post_send(4, Connection::write_wr(7, cmr, cmr.iova(), 4096, smr.iova(), smr.rkey));
    const Time t0 = cli->now();
    REQUIRE(until(*cli, [&] { return c.state() == ConnState::error; }, 3'000'000'000));
    CHECK(cli->now() - t0 < 1'500'000'000);
    CHECK_THROWS_AS(c.check(), ConnectionError);
}

TEST_CASE("api: connect to a silent port times out with ConnectionError", "[api]") {
    const uint16_t base = uint16_t(32000 + (uint32_t(::getpid()) * 37u + 50u) % 20000u);
    auto cli = open_at(base, ProgressMode::manual);
    CHECK_THROWS_AS(cli->connect("127.0.0.1", uint16_t(base + 40), 200'000'000), ConnectionError);
    CHECK_THROWS_AS(cli->connect("not-an-ip", 1), Error);
}

TEST_CASE("api: a long-running server releases the connections it is done with (R-CONN-13)", "[api][release]") {
    const uint16_t base = uint16_t(32010 + (uint32_t(::getpid()) * 37u) % 20000u);
    auto srv = open_at(base, ProgressMode::automatic);
    auto cli = open_at(uint16_t(base + 20), ProgressMode::manual);
    std::vector<uint8_t> smem(1 << 16), cmem(1 << 16);
    const uint32_t spd = srv->alloc_pd(), cpd = cli->alloc_pd();
    const uint32_t scq = srv->create_cq(64), ccq = cli->create_cq(64);
    const MemoryRegion smr = srv->register_mr(spd, smem.data(), smem.size(), kAccessLocalWrite | kAccessRemoteWrite);
    const MemoryRegion cmr = cli->register_mr(cpd, cmem.data(), cmem.size(), kAccessLocalWrite);
    srv->set_accept_streams({StreamSpec{1, spd, scq, scq}});
    for (int round = 0; round < 5; ++round) {
        Connection c = cli->connect("127.0.0.1", base);
        Connection s = srv->accept(1'000'000'000);
        c.create_stream(1, cpd, ccq, ccq);
        std::memset(cmem.data(), 'a' + round, 4096);
        c.post_send(1, Connection::write_wr(uint64_t(round), cmr, cmr.iova(), 4096, smr.iova(), smr.rkey));
        Completion w[4];
        REQUIRE(until(*cli, [&] { return cli->poll_cq(ccq, w, 4) == 1; }));
        CHECK(w[0].status == WcStatus::success);
        CHECK(smem[4095] == uint8_t('a' + round));
        try {
            s.release();
            FAIL("release of an open connection did not throw");
        } catch (const Error& e) {
            CHECK(std::string(e.what()).find("established") != std::string::npos);
        }
        c.disconnect();
        REQUIRE(until(*cli, [&] { return c.state() == ConnState::closed && s.state() == ConnState::closed; }));
        s.release();
        c.release();
        {
            auto g = srv->lock();
            CHECK(srv->engine().conn_count() == 0);
        }
        CHECK(cli->engine().conn_count() == 0);
    }
}

TEST_CASE("api: stream attributes, a shared receive queue and its limit event, ERROR on demand, destroy and "
          "create again (R-STREAM-9..11, R-SRQ-*)",
          "[api][streams]") {
    const uint16_t base = uint16_t(32020 + (uint32_t(::getpid()) * 37u) % 20000u);
    auto srv = open_at(base, ProgressMode::automatic);
    auto cli = open_at(uint16_t(base + 20), ProgressMode::manual);
    std::vector<uint8_t> smem(1 << 16), cmem(1 << 16);
    const uint32_t spd = srv->alloc_pd(), cpd = cli->alloc_pd();
    const uint32_t scq = srv->create_cq(64), ccq = cli->create_cq(64);
    const MemoryRegion smr = srv->register_mr(spd, smem.data(), smem.size(), kAccessLocalWrite | kAccessRemoteWrite);
    const MemoryRegion cmr = cli->register_mr(cpd, cmem.data(), cmem.size(), kAccessLocalWrite);
    const uint32_t srq = srv->create_srq(spd, 6);
    for (uint32_t i = 0; i < 6; ++i) srv->post_srq_recv(srq, RecvWr{i, smr.iova(i * 4096), 4096, smr.lkey});
    CHECK_FALSE(srv->try_post_srq_recv(srq, RecvWr{9, smr.iova(), 8, smr.lkey}));  // depth 6
    srv->arm_srq_limit(srq, 3);
    srv->set_accept_streams({StreamSpec{.id = 1, .pd = spd, .send_cq = scq, .recv_cq = scq, .srq = srq},
                             StreamSpec{.id = 2, .pd = spd, .send_cq = scq, .recv_cq = scq, .srq = srq}});
    Connection c = cli->connect("127.0.0.1", base);
    Connection s = srv->accept(1'000'000'000);
    for (uint32_t id : {1u, 2u}) c.create_stream(StreamSpec{.id = id, .pd = cpd, .send_cq = ccq, .recv_cq = ccq, .send_depth = 3});
    CHECK_THROWS_AS(s.post_recv(1, RecvWr{0, smr.iova(), 8, smr.lkey}), Error);  // the SRQ's
    CHECK_THROWS_AS(srv->destroy_srq(srq), Error);                                // in use

    for (uint32_t k = 0; k < 4; ++k) std::memset(cmem.data() + k * 1000, 'A' + k, 1000);
    // send_depth 3: a fourth outstanding WR is refused until completions come back.
    CHECK(c.try_post_send(1, Connection::send_wr(0, cmr, cmr.iova(0), 1000)));
    CHECK(c.try_post_send(1, Connection::send_wr(1, cmr, cmr.iova(1000), 1000)));
    CHECK(c.try_post_send(1, Connection::send_wr(2, cmr, cmr.iova(2000), 1000)));
    CHECK_FALSE(c.try_post_send(1, Connection::send_wr(3, cmr, cmr.iova(3000), 1000)));
    c.post_send(2, Connection::send_wr(3, cmr, cmr.iova(3000), 1000));
    std::vector<Completion> sgot;
    REQUIRE(until(*cli, [&] {
        Completion w[8];
        const size_t n = srv->poll_cq(scq, w, 8);
        sgot.insert(sgot.end(), w, w + n);
        return sgot.size() >= 4;
    }));
    std::vector<uint64_t> entries;
    for (const Completion& w : sgot) {
        CHECK(w.status == WcStatus::success);
        CHECK(w.byte_len == 1000);
        entries.push_back(w.wr_id);
        // The entry holds the bytes of the message whose stream and place it completed at.
        const uint8_t want = w.stream == 2 ? 'D' : uint8_t('A' + std::count_if(sgot.begin(), sgot.begin() + (&w - sgot.data()),
                                                                            [](const Completion& x) { return x.stream == 1; }));
        CHECK(smem[w.wr_id * 4096] == want);
        CHECK(smem[w.wr_id * 4096 + 999] == want);
    }
    std::sort(entries.begin(), entries.end());
    CHECK(std::unique(entries.begin(), entries.end()) == entries.end());
    CHECK(srv->srq_posted(srq) == 2);
    uint32_t ev[4];
    REQUIRE(until(*cli, [&] { return srv->poll_srq_events(ev, 4) == 1; }));
    CHECK(ev[0] == srq);

    // ERROR on demand: the client's posted receive on stream 2 flushes.
    Completion w[8];
    size_t sent_done = 0;
    REQUIRE(until(*cli, [&] {
        sent_done += cli->poll_cq(ccq, w, 8);
        return sent_done >= 4;  // the four SENDs
    }));
    c.post_recv(2, RecvWr{55, cmr.iova(30000), 100, cmr.lkey});
    c.set_stream_error(2);
    REQUIRE(cli->poll_cq(ccq, w, 8) == 1);
    CHECK(w[0].wr_id == 55);
    CHECK(w[0].status == WcStatus::wr_flush_err);

    // Destroy and create again at both ends: the same id carries a new stream.
    c.destroy_stream(1);
    s.destroy_stream(1);
    CHECK_THROWS_AS(c.post_send(1, Connection::send_wr(9, cmr, cmr.iova(), 8)), Error);
    s.create_stream(StreamSpec{.id = 1, .pd = spd, .send_cq = scq, .recv_cq = scq, .srq = srq});
    c.create_stream(StreamSpec{.id = 1, .pd = cpd, .send_cq = ccq, .recv_cq = ccq});
    std::memset(cmem.data() + 5000, 'Z', 700);
    c.post_send(1, Connection::send_wr(10, cmr, cmr.iova(5000), 700));
    sgot.clear();
    REQUIRE(until(*cli, [&] {
        const size_t n = srv->poll_cq(scq, w, 8);
        sgot.insert(sgot.end(), w, w + n);
        return !sgot.empty();
    }));
    CHECK(sgot[0].status == WcStatus::success);
    CHECK(sgot[0].stream == 1);
    CHECK(sgot[0].byte_len == 700);
    CHECK(smem[sgot[0].wr_id * 4096 + 699] == 'Z');
}

TEST_CASE("api: two devices that connect to each other at the same moment share one connection (R-CONN-14)",
          "[api][connect]") {
    for (int round = 0; round < 4; ++round) {
        const uint16_t base = uint16_t(32030 + (uint32_t(::getpid()) * 37u + uint32_t(round) * 3u) % 20000u);
        auto da = open_at(base, ProgressMode::manual);
        auto db = open_at(uint16_t(base + 20), ProgressMode::automatic);
        std::vector<uint8_t> ma(1 << 16), mb(1 << 16);
        const uint32_t pa = da->alloc_pd(), pb = db->alloc_pd();
        const uint32_t qa = da->create_cq(64), qb = db->create_cq(64);
        const MemoryRegion ra = da->register_mr(pa, ma.data(), ma.size(), kAccessLocalWrite | kAccessRemoteWrite);
        const MemoryRegion rb = db->register_mr(pb, mb.data(), mb.size(), kAccessLocalWrite | kAccessRemoteWrite);
        Connection cb;
        std::thread t([&] { cb = db->connect("127.0.0.1", base); });
        Connection ca = da->connect("127.0.0.1", uint16_t(base + 20));
        t.join();
        REQUIRE(ca.valid());
        REQUIRE(cb.valid());
        CHECK(ca.stats().remote_conn == cb.id());  // one connection, named by both ends
        CHECK(cb.stats().remote_conn == ca.id());
        CHECK(da->engine().conn_count() == 1);
        {
            auto g = db->lock();
            CHECK(db->engine().conn_count() == 1);
        }
        CHECK_THROWS_AS(da->accept(20'000'000), TimeoutError);  // nothing incoming at either end
        CHECK_THROWS_AS(db->accept(20'000'000), TimeoutError);
        ca.create_stream(1, pa, qa, qa);
        cb.create_stream(1, pb, qb, qb);
        std::memset(ma.data(), 'a' + round, 1000);
        std::memset(mb.data(), 'A' + round, 1000);
        ca.post_send(1, Connection::write_wr(1, ra, ra.iova(), 1000, rb.iova(2000), rb.rkey));
        cb.post_send(1, Connection::write_wr(2, rb, rb.iova(), 1000, ra.iova(2000), ra.rkey));
        Completion w[4];
        size_t na = 0, nb = 0;
        REQUIRE(until(*da, [&] {
            na += da->poll_cq(qa, w, 4);
            nb += db->poll_cq(qb, w, 4);
            return na >= 1 && nb >= 1;
        }));
        CHECK(mb[2999] == uint8_t('a' + round));
        CHECK(ma[2999] == uint8_t('A' + round));
    }
}
