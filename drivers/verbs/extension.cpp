// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The extension API (mroce/verbs_ext.h): per-connection and per-path state
// of the stream behind a QP, from the native API's statistics.
#include <cstdio>
#include <cstring>

#include "exports.hpp"
#include "mroce/verbs_ext.h"
#include "provider.hpp"

using namespace mroce;
using namespace mroce::verbs;

extern "C" {

MROCE_EXPORT int mroce_is_mroce_device(ibv_device* d) { return is_ours(d) ? 1 : 0; }

MROCE_EXPORT int mroce_query_conn(ibv_qp* qp, mroce_conn_info* out) {
    if (!qp || !is_ours(qp->context)) return ENODEV;
    Qp& q = *qp_of(qp);
    if (!q.bound) return ENOTCONN;
    try {
        const ConnStats s = q.conn.stats();
        std::memset(out, 0, sizeof *out);
        out->conn_id = q.conn.id();
        out->stream_id = q.stream;
        out->num_paths = s.num_paths;
        out->num_planes = s.planes;
        out->rate_hint_kbps = s.rate_hint_kbps;
        out->tx_data_packets = s.tx_data_packets;
        out->tx_payload_bytes = s.tx_payload_bytes;
        out->rx_data_packets = s.rx_data_packets;
        out->rx_payload_bytes = s.rx_payload_bytes;
        out->retransmits = s.retransmits;
        out->duplicates = s.duplicates;
        out->naks_sent = s.naks_sent;
        out->naks_received = s.naks_received;
        std::snprintf(out->peer, sizeof out->peer, "%s", q.conn.peer_name().c_str());
    } catch (const std::exception&) {
        return ENOTCONN;
    }
    return 0;
}

MROCE_EXPORT int mroce_query_path(ibv_qp* qp, uint16_t path, mroce_path_info* out) {
    if (!qp || !is_ours(qp->context)) return ENODEV;
    Qp& q = *qp_of(qp);
    if (!q.bound) return ENOTCONN;
    try {
        if (path >= q.conn.num_paths()) return EINVAL;
        const PathStats p = q.conn.path_stats(path);
        std::memset(out, 0, sizeof *out);
        out->index = path;
        // The UDP driver's path source port for this entropy (UdpPort::path_port).
        const DeviceConfig& cfg = q.ctx->dev->config();
        const uint32_t base = cfg.path_port_base ? cfg.path_port_base : uint32_t(cfg.port) + 1;
        out->entropy = p.entropy;
        out->udp_src_port = uint16_t(base + p.entropy % cfg.path_port_span);
        out->plane = p.plane;
        out->state = p.state == PathStateKind::active ? MROCE_PATH_ACTIVE : MROCE_PATH_FAILED;
        out->cwnd = p.cwnd;
        out->inflight = p.inflight;
        out->srtt_ns = p.srtt;
        out->min_rtt_ns = p.min_rtt;
        out->rto_ns = p.rto;
        out->tx_packets = p.tx_packets;
        out->tx_bytes = p.tx_bytes;
        out->retransmits = p.retransmits;
        out->losses = p.losses;
        out->timeouts = p.timeouts;
        out->ce_marks = p.ce_marks;
        out->rerouted = p.rerouted;
    } catch (const std::exception&) {
        return ENOTCONN;
    }
    return 0;
}

MROCE_EXPORT int mroce_query_plane(ibv_context* ctx, uint16_t plane, mroce_plane_info* out) {
    if (!ctx || !is_ours(ctx)) return ENODEV;
    const Device& dev = *ctx_of(ctx)->dev;
    PlaneInfo pi;
    if (!dev.query_plane(plane, pi)) return EINVAL;
    std::memset(out, 0, sizeof *out);
    out->index = plane;
    out->num_planes = uint16_t(dev.num_planes());
    std::snprintf(out->address, sizeof out->address, "%s", pi.address.c_str());
    out->tx_packets = pi.tx_packets;
    out->tx_bytes = pi.tx_bytes;
    out->rx_packets = pi.rx_packets;
    out->rx_bytes = pi.rx_bytes;
    return 0;
}

MROCE_EXPORT int mroce_query_rx_capacity(ibv_context* ctx, uint64_t* mbps) {
    if (!is_ours(ctx)) return ENODEV;
    *mbps = ctx_of(ctx)->dev->config().engine.rx_capacity_mbps;
    return 0;
}

}  // extern "C"
