// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The boundary between the engine and every driver (UDP sockets, DPDK, the
// simulated fabric). The engine emits headers plus a reference to payload in
// registered memory (scatter-gather, never copied on transmit); drivers hand
// it received datagrams (UDP payload, in one span or two) plus the IP ECN bits.
#pragma once

#include <cstdint>

#include "mroce/wire.hpp"

namespace mroce {

using Time = uint64_t;  // nanoseconds on the driver's clock; the engine has no clock of its own

// TxPacket::path value for connection control (CONNECT_*, DISCONNECT_*): the
// driver sends it from the device's well-known address and port, so the peer
// learns where to send (R-CONN-2). Data, acks, NAKs and probes use a path index.
inline constexpr uint16_t kControlPath = 0xFFFF;

struct TxPacket {
    uint32_t peer = 0;       // driver's peer handle (address), as given to Engine::connect / seen on rx
    uint16_t path = 0;       // sender path index; drivers map it to a source port (and plane)
    uint16_t entropy = 0;    // ECMP entropy of the path (R-PATH-8); changes when the path is re-routed
    uint16_t hdr_len = 0;
    uint8_t ect = 1;         // 1: send with ECT(0) (data packets), 0: Not-ECT (R-ECN-1)
    // Plane to leave on (R-PLANE-2..4): the driver sends from its socket(s) on
    // this plane to the peer's address on the same plane; 0 on one-plane devices.
    uint8_t plane = 0;
    uint32_t payload_len = 0;
    const uint8_t* payload = nullptr;  // registered memory; stays valid until the op completes
    alignas(8) uint8_t hdr[wire::kMaxHeaderLen];
};

struct RxPacket {
    // The UDP payload: data[0, len), then, when the driver received it in two
    // pieces (a header segment and a payload segment, e.g. an mbuf chain),
    // data2[0, len2). A second span is only valid if the first holds the
    // whole mroce header (at least wire::kMaxHeaderLen bytes, or the whole
    // datagram): the engine drops and counts any other split
    // (EngineStats::rx_split_header); the driver linearises those itself.
    // len2 == 0 (the default, data2 unused) is the contiguous datagram of
    // every driver but a chained DPDK frame, and costs the engine one test.
    // Inline placement (the default): only read during Engine::rx_burst.
    // Deferred placement: a PlaceJob may point into either span, and then both
    // must stay valid until the job's token is passed to Engine::placed.
    const uint8_t* data = nullptr;
    uint32_t len = 0;
    uint32_t peer = 0;              // driver's peer handle for the source address
    uint16_t local_path = 0;        // index of the local port/socket it arrived on (informational)
    uint8_t ce = 0;                 // 1 if the IP header carried CE (R-ECN-2)
    uint8_t plane = 0;              // local plane it arrived on (informational, R-PLANE-2)
    uint32_t cookie = 0;            // driver's handle for the buffer; copied into PlaceJob::cookie
    const uint8_t* data2 = nullptr; // second span (the rest of the datagram), or unused
    uint32_t len2 = 0;              // 0: the datagram is data[0, len) alone
    uint32_t pad2_ = 0;
};

// Deferred placement (EngineConfig::deferred_placement): a payload copy the
// engine validated and deduplicated but left to a placement stage (another
// thread or lcore). The stage copies len bytes from src to dst, may then
// release the received buffer, and returns token to Engine::placed(). The
// engine acknowledges and completes nothing that depends on the copy before.
// A payload split over the datagram's two spans: the engine copies the part
// in the first span itself (in practice none or a few bytes: drivers split
// at the end of the header segment) and the job covers the second span's part.
struct PlaceJob {
    uint8_t* dst = nullptr;         // final place in registered memory
    const uint8_t* src = nullptr;   // inside the received datagram: src[0, len) lies in one of its spans
    uint32_t len = 0;
    // Offset of src in the datagram as one byte sequence (second span: RxPacket::len
    // + offset in data2), for drivers that read the frame (chain), not the pointer.
    uint32_t src_off = 0;
    uint32_t cookie = 0;            // RxPacket::cookie of the datagram
    uint32_t token = 0;             // hand back to Engine::placed
};

}  // namespace mroce
