// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Completion channels through the native API over real UDP sockets on
// 127.0.0.1 (doc/spec.md R-NOTIFY-*): armed CQs signal the channel's event
// fd, seen by poll(); nothing when not armed; one event per arming; a
// channel serving two CQs; get_event driving manual progress. Also the work
// request buffers the verbs provider needs, through Connection: a
// scatter/gather list and an inline send (R-SGE-*, R-INLINE-*).
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "mroce/api.hpp"

using namespace mroce;

namespace {

std::unique_ptr<Device> device_at(uint16_t port, ProgressMode pm) {
    DeviceConfig d;
    d.port = port;
    d.progress = pm;
    d.path_port_span = 8;
    d.engine.conn_timeout = 300'000'000;
    return open_device(d);
}

// True once fd is readable, progressing the manual device meanwhile; false
// after limit_ns (poll() itself waits 1 ms at a time).
bool readable(int fd, Device& progress, Time limit_ns) {
    const Time end = progress.now() + limit_ns;
    for (;;) {
        progress.progress();
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 1) > 0 && (p.revents & POLLIN)) return true;
        if (progress.now() > end) return false;
    }
}

// Progresses dev until n completions of cq arrived (appended to got).
bool completions(Device& dev, Device& progress, uint32_t cq, size_t n, std::vector<Completion>& got) {
    const Time end = progress.now() + 3'000'000'000;
    got.clear();
    while (got.size() < n) {
        if (progress.now() > end) return false;
        Completion w[16];
        got.insert(got.end(), w, w + dev.poll_cq(cq, w, 16));
        progress.idle(progress.progress() != 0);
    }
    return true;
}

}  // namespace

TEST_CASE("api: armed CQ events seen through poll() on the channel's fd (R-NOTIFY-*)", "[api][notify]") {
    const uint16_t base = uint16_t(32100 + (uint32_t(::getpid()) * 37u) % 20000u);
    auto srv = device_at(base, ProgressMode::automatic);   // its loop posts events from its own thread
    auto cli = device_at(uint16_t(base + 20), ProgressMode::manual);
    std::vector<uint8_t> smem(1 << 16), cmem(1 << 16);
    const uint32_t spd = srv->alloc_pd(), cpd = cli->alloc_pd();
    CompletionChannel& ch = srv->create_comp_channel();
    const uint32_t srecv = srv->create_cq(64, &ch), ssend = srv->create_cq(64, &ch);
    const uint32_t plain = srv->create_cq(64);
    const uint32_t ccq = cli->create_cq(64);
    const uint32_t all = kAccessLocalWrite | kAccessRemoteWrite;
    const MemoryRegion smr = srv->register_mr(spd, smem.data(), smem.size(), all);
    const MemoryRegion cmr = cli->register_mr(cpd, cmem.data(), cmem.size(), all);
    srv->set_accept_streams({StreamSpec{5, spd, ssend, srecv}});
    Connection c = cli->connect("127.0.0.1", base);
    Connection s = srv->accept(1'000'000'000);
    c.create_stream(5, cpd, ccq, ccq);
    for (uint64_t i = 0; i < 8; ++i) s.post_recv(5, RecvWr{100 + i, smr.iova(1024 * i), 1024, smr.lkey});
    uint64_t id = 1;
    auto send = [&](OpKind op, bool solicited) {
        SendWr w = Connection::send_wr(id++, cmr, cmr.iova(), 64);
        w.op = op;
        w.solicited = solicited;
        c.post_send(5, w);
    };
    std::vector<Completion> got;
    pollfd p{ch.fd(), POLLIN, 0};

    // Not armed: the completion arrives, the fd stays quiet.
    send(OpKind::send, true);
    REQUIRE(completions(*srv, *cli, srecv, 1, got));
    CHECK(!readable(ch.fd(), *cli, 20'000'000));

    // Armed for all: one event, which names the CQ; then disarmed.
    srv->req_notify_cq(srecv);
    CHECK(::poll(&p, 1, 0) == 0);  // arming alone signals nothing
    send(OpKind::send, false);
    REQUIRE(readable(ch.fd(), *cli, 3'000'000'000));
    uint32_t cq = 0;
    REQUIRE(ch.get_event(cq, 0));
    CHECK(cq == srecv);
    CHECK(!ch.get_event(cq, 0));  // exactly one
    CHECK(::poll(&p, 1, 0) == 0);
    CHECK(srv->unacked_cq_events(srecv) == 1);
    srv->ack_cq_events(srecv, 1);
    CHECK(srv->unacked_cq_events(srecv) == 0);
    CHECK_THROWS_AS(srv->ack_cq_events(srecv, 1), Error);  // more than were taken
    REQUIRE(completions(*srv, *cli, srecv, 1, got));
    send(OpKind::send, false);  // one-shot: this one signals nothing
    REQUIRE(completions(*srv, *cli, srecv, 1, got));
    CHECK(!readable(ch.fd(), *cli, 20'000'000));

    // Solicited-only: an unsolicited SEND is not enough, a solicited one is.
    srv->req_notify_cq(srecv, true);
    send(OpKind::send, false);
    REQUIRE(completions(*srv, *cli, srecv, 1, got));
    CHECK(!readable(ch.fd(), *cli, 20'000'000));
    send(OpKind::send_imm, true);
    REQUIRE(readable(ch.fd(), *cli, 3'000'000'000));
    REQUIRE(ch.get_event(cq, 0));
    CHECK(cq == srecv);
    REQUIRE(completions(*srv, *cli, srecv, 1, got));
    CHECK(got[0].has_imm);

    // One channel, two CQs: the server's send CQ and its receive CQ both fire.
    srv->req_notify_cq(srecv);
    srv->req_notify_cq(ssend);
    s.post_send(5, Connection::write_wr(77, smr, smr.iova(), 32, cmr.iova(4096), cmr.rkey));
    send(OpKind::send, false);
    std::set<uint32_t> fired;
    for (int k = 0; k < 2; ++k) {
        REQUIRE(readable(ch.fd(), *cli, 3'000'000'000));
        REQUIRE(ch.get_event(cq, 0));
        fired.insert(cq);
    }
    CHECK(fired == std::set<uint32_t>{srecv, ssend});
    srv->ack_cq_events(srecv, 2);
    srv->ack_cq_events(ssend, 1);
    CHECK(srv->unacked_cq_events(srecv) + srv->unacked_cq_events(ssend) == 0);

    CHECK_THROWS_AS(srv->req_notify_cq(plain), Error);   // no channel to signal
    CHECK_THROWS_AS(srv->req_notify_cq(999), Error);
    c.disconnect();
}

// Manual progress: the application's thread is the only one, so get_event
// runs the device's progress while it waits.
TEST_CASE("api: get_event with manual progress drives the device", "[api][notify]") {
    const uint16_t base = uint16_t(32140 + (uint32_t(::getpid()) * 37u) % 20000u);
    auto srv = device_at(base, ProgressMode::automatic);
    auto cli = device_at(uint16_t(base + 20), ProgressMode::manual);
    std::vector<uint8_t> smem(1 << 16), cmem(1 << 16);
    const uint32_t spd = srv->alloc_pd(), cpd = cli->alloc_pd();
    const uint32_t scq = srv->create_cq(64);
    CompletionChannel& ch = cli->create_comp_channel();
    const uint32_t ccq = cli->create_cq(64, &ch);
    const MemoryRegion smr = srv->register_mr(spd, smem.data(), smem.size(), kAccessLocalWrite | kAccessRemoteWrite);
    const MemoryRegion cmr = cli->register_mr(cpd, cmem.data(), cmem.size(), kAccessLocalWrite);
    srv->set_accept_streams({StreamSpec{2, spd, scq, scq}});
    Connection c = cli->connect("127.0.0.1", base);
    c.create_stream(2, cpd, ccq, ccq);
    uint32_t cq = 0;
    CHECK(!ch.get_event(cq, 0));
    CHECK(!ch.get_event(cq, 20'000'000));  // armed nothing: times out

    // Through the API, the buffers a verbs program posts: a list and an inline send.
    for (size_t i = 0; i < 4096; ++i) cmem[i] = uint8_t(i * 13 + 1);
    const std::vector<Sge> sg = {{cmr.iova(3000), 1000, cmr.lkey}, {cmr.iova(0), 2000, cmr.lkey}};
    SendWr w = Connection::write_wr(1, cmr, 0, 0, smr.iova(100), smr.rkey);
    w.sg_list = sg.data();
    w.num_sge = 2;
    cli->req_notify_cq(ccq);
    c.post_send(2, w);
    REQUIRE(ch.get_event(cq, 3'000'000'000));
    CHECK(cq == ccq);
    cli->ack_cq_events(ccq, 1);
    Completion got[4];
    REQUIRE(cli->poll_cq(ccq, got, 4) == 1);
    CHECK(got[0].status == WcStatus::success);
    CHECK(got[0].byte_len == 3000);
    CHECK(std::memcmp(smem.data() + 100, cmem.data() + 3000, 1000) == 0);
    CHECK(std::memcmp(smem.data() + 1100, cmem.data(), 2000) == 0);

    char text[] = "inline through the API";
    SendWr in = Connection::write_wr(2, cmr, uint64_t(reinterpret_cast<uintptr_t>(text)), sizeof text,
                                     smr.iova(8000), smr.rkey);
    in.lkey = 0;  // not registered, not checked
    in.inline_data = true;
    cli->req_notify_cq(ccq, true);  // solicited-only: a successful write does not fire
    c.post_send(2, in);
    std::memset(text, 0, sizeof text);
    CHECK(!ch.get_event(cq, 100'000'000));
    REQUIRE(cli->poll_cq(ccq, got, 4) == 1);
    CHECK(got[0].status == WcStatus::success);
    CHECK(std::memcmp(smem.data() + 8000, "inline through the API", 23) == 0);
    // An error completion is solicited: a bad lkey fails at post, and notifies.
    c.post_send(2, Connection::write_wr(3, cmr, cmr.iova(), 8, smr.iova(), smr.rkey));
    SendWr bad = Connection::write_wr(4, cmr, cmr.iova(), 8, smr.iova(), smr.rkey);
    bad.lkey ^= 0x100;
    c.post_send(2, bad);
    REQUIRE(ch.get_event(cq, 1'000'000'000));
    CHECK(cq == ccq);
    c.disconnect();
}
