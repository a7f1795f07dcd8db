// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// libibverbs' string and sysfs helpers. The names are verbs' own (a program
// prints them); sysfs reads of a mroce device's path answer from the device,
// as the kernel's sysfs would for a real one (ibv_devinfo reads board_id).
#include <cstdio>
#include <cstring>

#include "exports.hpp"
#include "provider.hpp"
#include "real_verbs.hpp"

using namespace mroce::verbs;

extern "C" {

MROCE_EXPORT const char* ibv_wc_status_str(ibv_wc_status s) {
    static const char* const names[] = {
        "success", "local length error", "local QP operation error", "local EE context operation error",
        "local protection error", "Work Request Flushed Error", "memory management operation error",
        "bad response error", "local access error", "remote invalid request error", "remote access error",
        "remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
        "local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
        "invalid EE context state", "fatal error", "response timeout error", "general error",
        "TM error", "TM rendezvous error"};
    return unsigned(s) < sizeof names / sizeof *names ? names[s] : "unknown";
}

MROCE_EXPORT const char* ibv_node_type_str(ibv_node_type t) {
    switch (t) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
    }
}

MROCE_EXPORT const char* ibv_port_state_str(ibv_port_state s) {
    static const char* const names[] = {"no state change (NOP)", "down", "init", "armed", "active", "active deferred"};
    return unsigned(s) < sizeof names / sizeof *names ? names[s] : "unknown";
}

MROCE_EXPORT const char* ibv_event_type_str(ibv_event_type e) {
    static const char* const names[] = {
        "CQ error", "local work queue catastrophic error", "invalid request local work queue error",
        "local access violation work queue error", "communication established", "send queue drained",
        "path migrated", "path migration request error", "local catastrophic error", "port active",
        "port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
        "last WQE reached", "client reregistration", "GID table change", "WQ fatal"};
    return unsigned(e) < sizeof names / sizeof *names ? names[e] : "unknown";
}

MROCE_EXPORT int ibv_get_sysfs_path(char* buf, size_t size) {
    using F = int (*)(char*, size_t);
    if (auto f = real::fn<F>("ibv_get_sysfs_path", "IBVERBS_1.0")) return f(buf, size);
    std::snprintf(buf, size, "/sys");
    return 0;
}

MROCE_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
    for (DeviceSlot* s : slots()) {
        if (std::strcmp(dir, s->ibdev.ibdev_path) != 0) continue;
        const char* v = nullptr;
        if (std::strcmp(file, "board_id") == 0) v = "mroce";
        else if (std::strcmp(file, "node_desc") == 0) v = s->ibdev.name;
        if (!v) return -1;
        return std::snprintf(buf, size, "%s\n", v);
    }
    using F = int (*)(const char*, const char*, char*, size_t);
    auto f = real::fn<F>("ibv_read_sysfs_file", "IBVERBS_1.0");
    return f ? f(dir, file, buf, size) : -1;
}

// The kernel-ABI copy helpers belong to kernel devices only: passed through.
MROCE_EXPORT void ibv_copy_qp_attr_from_kern(void* dst, void* src) {
    using F = void (*)(void*, void*);
    if (auto f = real::fn<F>("ibv_copy_qp_attr_from_kern", "IBVERBS_1.0")) f(dst, src);
}
MROCE_EXPORT void ibv_copy_ah_attr_from_kern(void* dst, void* src) {
    using F = void (*)(void*, void*);
    if (auto f = real::fn<F>("ibv_copy_ah_attr_from_kern", "IBVERBS_1.1")) f(dst, src);
}
MROCE_EXPORT void ibv_copy_path_rec_from_kern(void* dst, void* src) {
    using F = void (*)(void*, void*);
    if (auto f = real::fn<F>("ibv_copy_path_rec_from_kern", "IBVERBS_1.0")) f(dst, src);
}
MROCE_EXPORT void ibv_copy_path_rec_to_kern(void* dst, void* src) {
    using F = void (*)(void*, void*);
    if (auto f = real::fn<F>("ibv_copy_path_rec_to_kern", "IBVERBS_1.0")) f(dst, src);
}

}  // extern "C"
