// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Packed WRITEs (doc/spec.md R-PACK-*): small WRITEs queued together leave
// in WRITE_PACK packets toward a peer that accepts them, and every message
// keeps the semantics of a lone WRITE: its bytes, its completion in order,
// its error and the flush behind it, under loss, duplication, reordering
// and a second delivery of a refused packet.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine_fixture.hpp"
#include "mroce/wire.hpp"

using namespace mroce;
using mroce::test::Fixture;
using mroce::test::Side;
using mroce::test::write_wr;

namespace {

bool is_data(const TxPacket& t) {
    return t.hdr_len == wire::kDataLen && t.hdr[1] == uint8_t(wire::PacketType::data);
}
bool is_pack(const TxPacket& t) { return is_data(t) && t.hdr[24] == uint8_t(wire::Opcode::write_pack); }
uint32_t entries_of(const TxPacket& t) { return wire::detail::get32(t.hdr + 36); }

// Counts the data packets A sends and the WRITE_PACKs among them (with their entries).
struct Census {
    uint64_t data = 0, packs = 0, packed = 0;
    void see(int from, const TxPacket& t) {
        if (from != 0 || !is_data(t)) return;
        ++data;
        if (is_pack(t)) {
            ++packs;
            packed += entries_of(t);
        }
    }
};

// The messages' sources and destinations: message i of len[i] bytes at
// A's and B's offset 512 * i.
constexpr size_t kSlot = 512;

void post_writes(Fixture& f, const std::vector<uint32_t>& len, uint32_t signal_every = 1,
                 const std::vector<uint32_t>& bad_rkey = {}) {
    for (size_t i = 0; i < len.size(); ++i) {
        mroce::test::fill(f.a.mem, kSlot * i, len[i], uint32_t(i + 1));
        SendWr w = write_wr(f.a, kSlot * i, len[i], f.b, kSlot * i, 1000 + i);
        w.signaled = (i + 1) % signal_every == 0 || i + 1 == len.size();
        if (std::find(bad_rkey.begin(), bad_rkey.end(), uint32_t(i)) != bad_rkey.end()) w.rkey += 0x100;
        REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    }
}

bool landed(const Fixture& f, size_t i, uint32_t len) {
    return std::memcmp(f.a.mem.data() + kSlot * i, f.b.mem.data() + kSlot * i, len) == 0;
}
bool untouched(const Fixture& f, size_t i, uint32_t len) {
    for (uint32_t k = 0; k < len; ++k)
        if (f.b.mem[kSlot * i + k] != 0) return false;
    return true;
}

// Every signaled message in order with success; every byte in place.
void check_all_success(Fixture& f, const std::vector<uint32_t>& len, uint32_t signal_every) {
    size_t want = 0;
    for (size_t i = 0; i < len.size(); ++i) want += (i + 1) % signal_every == 0 || i + 1 == len.size();
    const auto got = f.wait(f.a, want);
    REQUIRE(got.size() == want);
    size_t k = 0;
    for (size_t i = 0; i < len.size(); ++i) {
        if (!((i + 1) % signal_every == 0 || i + 1 == len.size())) continue;
        CHECK(got[k].wr_id == 1000 + i);
        CHECK(got[k].status == WcStatus::success);
        ++k;
    }
    for (size_t i = 0; i < len.size(); ++i) CHECK(landed(f, i, len[i]));
}

}  // namespace

TEST_CASE("R-PACK-3: small WRITEs queued together leave packed, each lands and completes in order",
          "[engine][pack]") {
    EngineConfig cfg;
    cfg.num_paths = 3;
    Fixture f(cfg);
    ConnStats cs{};
    REQUIRE(f.a.eng.conn_stats(f.ca, cs) == Status::ok);
    CHECK(cs.packing);  // R-PACK-2: both ends accept
    Census n;
    f.link.drop_if = [&](int from, const TxPacket& t) {
        n.see(from, t);
        return false;
    };
    const std::vector<uint32_t> len(37, 64);  // not a multiple of any cap
    post_writes(f, len, 3);                    // every third signaled
    check_all_success(f, len, 3);
    CHECK(n.packs >= 1);
    CHECK(n.packed >= 30);
    CHECK(n.data < len.size());  // fewer packets than messages
    REQUIRE(f.a.eng.conn_stats(f.ca, cs) == Status::ok);
    CHECK(cs.tx_packed_messages == n.packed);
}

TEST_CASE("R-PACK-2: no WRITE_PACK toward a peer that does not accept it, none from a device that does not pack",
          "[engine][pack]") {
    for (int side = 0; side < 2; ++side) {
        EngineConfig ca, cb;
        (side == 0 ? ca : cb).pack_writes = false;
        Side a(ca), b(cb);
        mroce::test::PairLink link(a.eng, b.eng);
        uint32_t ida = 0, idb = 0;
        mroce::test::connect_stream(link, a, b, 7, ida, idb);
        Census n;
        link.drop_if = [&](int from, const TxPacket& t) {
            n.see(from, t);
            return false;
        };
        for (uint32_t i = 0; i < 20; ++i) {
            mroce::test::fill(a.mem, kSlot * i, 64, i + 1);
            REQUIRE(a.eng.post_send(ida, 7, write_wr(a, kSlot * i, 64, b, kSlot * i, i)) == Status::ok);
        }
        size_t got = 0;
        REQUIRE(link.run([&] {
            Completion c[32];
            got += a.eng.poll_cq(a.cq, c, 32);
            return got == 20;
        }, 1'000'000'000));
        ConnStats cs{};
        REQUIRE(a.eng.conn_stats(ida, cs) == Status::ok);
        CHECK_FALSE(cs.packing);
        CHECK(n.packs == 0);
        CHECK(n.data == 20);  // one packet a message, as before packing
        CHECK(std::memcmp(a.mem.data(), b.mem.data(), kSlot * 20) == 0);
    }
}

TEST_CASE("R-PACK-3: a message alone is sent at once, alone", "[engine][pack]") {
    Fixture f;
    Census n;
    f.link.drop_if = [&](int from, const TxPacket& t) {
        n.see(from, t);
        return false;
    };
    for (uint32_t i = 0; i < 5; ++i) {
        post_writes(f, {64});
        const auto got = f.wait(f.a, 1);
        REQUIRE(got.size() == 1);
        CHECK(got[0].status == WcStatus::success);
        CHECK(landed(f, 0, 64));
    }
    CHECK(n.packs == 0);
    CHECK(n.data == 5);
}

TEST_CASE("R-PACK-3: mixed sizes: only runs of small WRITEs pack; every message lands", "[engine][pack]") {
    Fixture f;
    Census n;
    f.link.drop_if = [&](int from, const TxPacket& t) {
        n.see(from, t);
        return false;
    };
    // 300 and 500 bytes are above kPackEntryMax (256): they go alone, and
    // the runs between them pack; a 0-byte WRITE packs too.
    const std::vector<uint32_t> len = {64, 8, 300, 64, 0, 256, 500, 64, 1, 128, 200, 7, 64};
    post_writes(f, len, 2);
    check_all_success(f, len, 2);
    CHECK(n.packs >= 2);
    CHECK(n.data > n.packs);
}

TEST_CASE("R-PACK-4: a lost, duplicated or delayed WRITE_PACK is resent unchanged and placed once",
          "[engine][pack][hostile]") {
    const int mode = GENERATE(0, 1, 2);  // lose the first pack; duplicate every pack; hold the first pack back
    EngineConfig cfg;
    cfg.num_paths = 2;
    Fixture f(cfg);
    Census n;
    bool first = true;
    std::vector<std::vector<uint8_t>> copies;
    f.link.drop_if = [&](int from, const TxPacket& t) {
        n.see(from, t);
        if (from != 0 || !is_pack(t)) return false;
        if (mode == 0 && first) {
            first = false;
            return true;  // lost: an RTO or a SACK gap resends the same CSN
        }
        return false;
    };
    if (mode == 1) f.link.dup = 1.0;
    if (mode == 2) {
        f.link.delay_if = [&](int from, const TxPacket& t) -> Time {
            if (from != 0 || !is_pack(t) || !first) return 0;
            first = false;
            return 200'000;  // behind every later packet
        };
    }
    const std::vector<uint32_t> len(45, 40);
    post_writes(f, len, 1);
    check_all_success(f, len, 1);
    CHECK(n.packs >= 2);
    ConnStats cb{};
    REQUIRE(f.b.eng.conn_stats(f.cb, cb) == Status::ok);
    if (mode == 1) CHECK(cb.duplicates >= 1);  // R-CSN-3: acked again, never placed twice
}

TEST_CASE("R-PACK-5: a bad rkey or a range out of the region in the middle entry: before it placed, after it "
          "untouched; success, error, flush in order",
          "[engine][pack][hostile]") {
    const bool out_of_range = GENERATE(false, true);
    const bool lose_first_nak = GENERATE(false, true);
    Fixture f;
    Census n;
    bool nak_lost = false;
    f.link.drop_if = [&](int from, const TxPacket& t) {
        n.see(from, t);
        // R-NAK-8: a refused WRITE_PACK comes back (its NAK lost) and is refused again.
        if (lose_first_nak && !nak_lost && from == 1 && t.hdr[1] == uint8_t(wire::PacketType::nak)) {
            nak_lost = true;
            return true;
        }
        return false;
    };
    const std::vector<uint32_t> len(7, 48);
    std::vector<uint32_t> bad;
    if (!out_of_range) bad.push_back(3);
    for (size_t i = 0; i < len.size(); ++i) {
        mroce::test::fill(f.a.mem, kSlot * i, len[i], uint32_t(i + 1));
        SendWr w = write_wr(f.a, kSlot * i, len[i], f.b, kSlot * i, 1000 + i);
        if (i == 3) {
            if (out_of_range) w.remote_addr = f.b.addr(f.b.mem.size() - 16);  // runs past the region's end
            else w.rkey += 0x100;
        }
        REQUIRE(f.a.eng.post_send(f.ca, 7, w) == Status::ok);
    }
    const auto got = f.wait(f.a, len.size());
    REQUIRE(got.size() == len.size());
    for (size_t i = 0; i < len.size(); ++i) {
        CHECK(got[i].wr_id == 1000 + i);
        CHECK(got[i].status == (i < 3 ? WcStatus::success : i == 3 ? WcStatus::rem_access_err : WcStatus::wr_flush_err));
    }
    for (size_t i = 0; i < 3; ++i) CHECK(landed(f, i, len[i]));
    for (size_t i = 4; i < len.size(); ++i) CHECK(untouched(f, i, len[i]));
    CHECK(n.packs >= 1);
    if (lose_first_nak) CHECK(nak_lost);
}

TEST_CASE("R-PACK-6: a WRITE_PACK split across two spans lands byte-exact", "[engine][pack][split]") {
    Fixture f;
    Census n;
    f.link.drop_if = [&](int from, const TxPacket& t) {
        n.see(from, t);
        return false;
    };
    // Cut every data packet inside its payload at a point that moves
    // through entry heads and entry bytes alike.
    uint32_t cut = 0;
    f.link.split_at = [&](int, const std::vector<uint8_t>& b) -> uint32_t {
        if (b.size() <= wire::kDataLen + 1 || b[1] != uint8_t(wire::PacketType::data)) return 0;
        cut = (cut + 13) % uint32_t(b.size() - wire::kDataLen);
        return uint32_t(wire::kDataLen) + cut;
    };
    const std::vector<uint32_t> len = {33, 64, 5, 64, 64, 17, 100, 64, 64, 9, 64};
    post_writes(f, len, 1);
    check_all_success(f, len, 1);
    CHECK(n.packs >= 1);
    CHECK(f.link.split_seen > 0);
}

TEST_CASE("R-PACK-1: truncated and malformed WRITE_PACK packets are dropped and counted, nothing placed",
          "[engine][pack][hostile]") {
    Fixture f;
    std::vector<std::vector<uint8_t>> packs;
    f.link.drop_if = [&](int from, const TxPacket& t) {
        if (from == 0 && is_pack(t)) {
            std::vector<uint8_t> d(t.hdr, t.hdr + t.hdr_len);
            d.insert(d.end(), t.payload, t.payload + t.payload_len);
            packs.push_back(std::move(d));
            return true;  // captured, not delivered: the test sends the variants
        }
        return false;
    };
    const std::vector<uint32_t> len(4, 32);
    post_writes(f, len, 1);
    f.link.run([&] { return !packs.empty(); }, 1'000'000);
    REQUIRE(!packs.empty());
    const std::vector<uint8_t> good = packs.front();
    const uint32_t k = wire::detail::get32(good.data() + 36);
    REQUIRE(k >= 2);
    using wire::detail::get16;
    using wire::detail::put16;
    using wire::detail::put32;
    std::vector<std::vector<uint8_t>> bad;
    {
        auto b = good;  // one entry: a WRITE_PACK carries two or more
        put32(b.data() + 36, 1);
        bad.push_back(b);
    }
    {
        auto b = good;  // more entries than the payload holds
        put32(b.data() + 36, k + 1);
        bad.push_back(b);
    }
    {
        auto b = good;  // fewer: bytes left over after the last entry
        put32(b.data() + 36, k - 1 < 2 ? 2 : k - 1);
        if (k - 1 >= 2) bad.push_back(b);
    }
    {
        auto b = good;  // the first entry's length runs past payload_len
        put32(b.data() + wire::kDataLen + 4, 60000);
        bad.push_back(b);
    }
    {
        auto b = good;  // the datagram cut inside an entry's head, payload_len to match
        const size_t plen = wire::kPackEntryHead + 32 + 7;
        b.resize(wire::kDataLen + plen);
        put16(b.data() + 26, uint16_t(plen));
        bad.push_back(b);
    }
    {
        auto b = good;  // the destination wraps the address space
        wire::detail::put64(b.data() + wire::kDataLen + 8, ~uint64_t(0) - 4);
        bad.push_back(b);
    }
    {
        auto b = good;  // truncated: shorter than header + payload_len
        b.resize(b.size() - 3);
        bad.push_back(b);
    }
    (void)get16;
    const EngineStats before = f.b.eng.stats();
    for (const auto& b : bad) {
        RxPacket r;
        r.data = b.data();
        r.len = uint32_t(b.size());
        r.peer = 0;
        f.b.eng.rx_burst(&r, 1, f.link.now);
    }
    const EngineStats after = f.b.eng.stats();
    CHECK(after.rx_decode_errors - before.rx_decode_errors == bad.size());
    CHECK(after.rx_inconsistent - before.rx_inconsistent == bad.size() - 1);
    CHECK(after.rx_truncated - before.rx_truncated == 1);
    for (size_t i = 0; i < len.size(); ++i) CHECK(untouched(f, i, len[i]));
    // The real packet still goes through afterwards (its resend: captured ones were dropped).
    f.link.drop_if = nullptr;
    check_all_success(f, len, 1);
}

TEST_CASE("R-PACK-4: random loss, duplication and reordering over packed WRITEs of many sizes",
          "[engine][pack][hostile]") {
    const uint64_t seed = GENERATE(3, 4, 5);
    EngineConfig cfg;
    cfg.num_paths = 4;
    Fixture f(cfg);
    f.link.rng = mroce::test::SplitMix(seed);
    f.link.loss = 0.08;
    f.link.dup = 0.08;
    mroce::test::SplitMix r(seed * 11);
    std::vector<uint32_t> len(150);
    for (auto& l : len) l = uint32_t(r.next() % 290);  // some above kPackEntryMax
    post_writes(f, len, 5);
    check_all_success(f, len, 5);
}
