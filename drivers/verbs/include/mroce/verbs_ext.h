/* SPDX-License-Identifier: BSD-3-Clause */
/* Copyright (c) 2026 The mroce authors */
/*
 * mroce's extension to verbs (doc/verbs.md "Extension API"): what plain
 * verbs cannot say about an mroce QP: the connection it is a stream of, that
 * connection's paths (UDP source ports, planes) with their per-path state,
 * the device's planes with their traffic counters, and the receiver's
 * inbound capacity its fair-share hints divide.
 *
 * Exported by libmroce-verbs.so (version node MROCE_VERBS_1.0). Link against
 * it, or resolve with dlsym: a program that runs on other providers too
 * calls mroce_is_mroce_device() first. Every call returns 0 or an errno:
 * ENODEV for an object that is not mroce's, ENOTCONN for a QP before RTR,
 * EINVAL for an index out of range.
 */
#ifndef MROCE_VERBS_EXT_H
#define MROCE_VERBS_EXT_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum mroce_path_state { MROCE_PATH_ACTIVE = 0, MROCE_PATH_FAILED = 1 };

struct mroce_conn_info {
	uint32_t conn_id;          /* the engine's connection id on this device */
	uint32_t stream_id;        /* the QP's stream on that connection */
	uint16_t num_paths;        /* paths this end sends on */
	uint16_t num_planes;       /* planes those paths span: min(ours, the peer's) (R-PLANE-2) */
	uint32_t rate_hint_kbps;   /* the peer's last fair-share hint (0: none yet) */
	uint64_t tx_data_packets, tx_payload_bytes, rx_data_packets, rx_payload_bytes;
	uint64_t retransmits, duplicates, naks_sent, naks_received;
	char peer[64];             /* the peer device, "a.b.c.d:port" */
};

struct mroce_path_info {
	uint16_t index;
	uint16_t entropy;          /* the path's ECMP entropy (changes when it is re-routed) */
	uint16_t udp_src_port;     /* the UDP source port that entropy sends from */
	uint16_t plane;
	uint8_t state;             /* enum mroce_path_state */
	uint8_t reserved[3];
	double cwnd;               /* packets */
	uint32_t inflight;
	uint64_t srtt_ns, min_rtt_ns, rto_ns;
	uint64_t tx_packets, tx_bytes, retransmits, losses, timeouts, ce_marks, rerouted;
};

/* One plane of a device (R-PLANE-1, R-PLANE-5): its local address and the
 * packets and UDP payload bytes the device sent and received on it. */
struct mroce_plane_info {
	uint16_t index;
	uint16_t num_planes;       /* the device's planes (config key planes; 1 without it) */
	uint32_t reserved;
	char address[48];          /* local IPv4 address, "a.b.c.d" */
	uint64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
};

/* 1 if the device is an mroce device, 0 if not. */
int mroce_is_mroce_device(struct ibv_device *device);
int mroce_query_conn(struct ibv_qp *qp, struct mroce_conn_info *out);
int mroce_query_path(struct ibv_qp *qp, uint16_t path, struct mroce_path_info *out);
/* Plane `plane` of the device (EINVAL past its last plane). */
int mroce_query_plane(struct ibv_context *context, uint16_t plane, struct mroce_plane_info *out);
/* This device's inbound capacity (config key rx_capacity_mbps), Mbit/s. */
int mroce_query_rx_capacity(struct ibv_context *context, uint64_t *mbps);

#ifdef __cplusplus
}
#endif

#endif /* MROCE_VERBS_EXT_H */
