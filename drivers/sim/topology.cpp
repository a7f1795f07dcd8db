// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include <stdexcept>
#include <string>

#include "fabric.hpp"

namespace mroce::sim {

namespace {

LinkConfig named(LinkConfig cfg, std::string name) {
    cfg.name = std::move(name);
    return cfg;
}

// Host ids need not be dense; routers index their tables by position.
std::vector<uint32_t> host_index(std::span<const HostId> hosts) {
    HostId max_id = 0;
    for (HostId h : hosts) max_id = std::max(max_id, h);
    std::vector<uint32_t> index(size_t(max_id) + 1, UINT32_MAX);
    for (size_t i = 0; i < hosts.size(); ++i) {
        if (index[hosts[i]] != UINT32_MAX) throw std::invalid_argument("sim topology: host listed twice");
        index[hosts[i]] = uint32_t(i);
    }
    return index;
}

uint32_t lookup(const std::vector<uint32_t>& index, HostId h) {
    return h < index.size() ? index[h] : UINT32_MAX;
}

}  // namespace

uint16_t ecmp_pick(uint64_t seed, uint16_t plane, HostId src, HostId dst, uint16_t entropy,
                   uint16_t choices) noexcept {
    const uint64_t tuple = (uint64_t(src) << 32 | dst) ^ (uint64_t(entropy) << 16 | plane) * 0x9e3779b97f4a7c15ull;
    return uint16_t(splitmix64(seed ^ splitmix64(tuple)) % choices);
}

// --- pair with parallel paths ---

void PairTopology::set_path_up(Fabric& fab, size_t path, bool up) const {
    fab.link(forward.at(path)).set_up(up);
    fab.link(reverse.at(path)).set_up(up);
}

PairTopology build_pair(Fabric& fab, HostId a, HostId b, const PairConfig& cfg) {
    if (cfg.paths == 0) throw std::invalid_argument("sim pair: paths must be > 0");
    if (!cfg.per_path.empty() && cfg.per_path.size() != cfg.paths)
        throw std::invalid_argument("sim pair: per_path must have one entry per path");
    if (a == b) throw std::invalid_argument("sim pair: hosts must differ");
    PairTopology t;
    t.a = a;
    t.b = b;
    for (uint16_t i = 0; i < cfg.paths; ++i) {
        const LinkConfig& lc = cfg.per_path.empty() ? cfg.link : cfg.per_path[i];
        t.forward.push_back(fab.add_link(named(lc, "path" + std::to_string(i) + ".fwd")));
        t.reverse.push_back(fab.add_link(named(lc, "path" + std::to_string(i) + ".rev")));
    }
    fab.set_router([a, b, fwd = t.forward, rev = t.reverse](HostId src, HostId dst, uint16_t path, uint16_t,
                                                             LinkId* out) -> size_t {
        const size_t p = path == kControlPathIndex ? 0 : path % fwd.size();
        if (src == a && dst == b) out[0] = fwd[p];
        else if (src == b && dst == a) out[0] = rev[p];
        else return 0;
        return 1;
    });
    return t;
}

// --- incast star ---

StarTopology build_star(Fabric& fab, std::span<const HostId> senders, HostId receiver, const StarConfig& cfg) {
    if (senders.empty()) throw std::invalid_argument("sim star: no senders");
    StarTopology t;
    t.senders.assign(senders.begin(), senders.end());
    t.receiver = receiver;
    for (HostId s : senders) {
        if (s == receiver) throw std::invalid_argument("sim star: receiver listed as a sender");
        t.access.push_back(fab.add_link(named(cfg.access, "access" + std::to_string(s))));
        t.downlink.push_back(fab.add_link(named(cfg.reverse, "down" + std::to_string(s))));
    }
    t.bottleneck = fab.add_link(named(cfg.bottleneck, "bottleneck"));
    t.uplink = fab.add_link(named(cfg.reverse, "uplink"));
    fab.set_router([index = host_index(senders), receiver, access = t.access, down = t.downlink,
                    bottleneck = t.bottleneck, uplink = t.uplink](HostId src, HostId dst, uint16_t, uint16_t,
                                                                  LinkId* out) -> size_t {
        const uint32_t si = lookup(index, src), di = lookup(index, dst);
        if (si != UINT32_MAX && dst == receiver) {
            out[0] = access[si];
            out[1] = bottleneck;
        } else if (src == receiver && di != UINT32_MAX) {
            out[0] = uplink;
            out[1] = down[di];
        } else if (si != UINT32_MAX && di != UINT32_MAX && si != di) {
            out[0] = access[si];
            out[1] = down[di];
        } else {
            return 0;
        }
        return 2;
    });
    return t;
}

// --- multi-plane leaf-spine, two- or three-tier ---

std::vector<LinkId> PlanesTopology::plane_links(uint16_t plane) const {
    if (plane >= planes) throw std::out_of_range("sim planes: no such plane");
    std::vector<LinkId> out;
    for (size_t h = 0; h < hosts.size(); ++h) {
        out.push_back(up[h * planes + plane]);
        out.push_back(down[h * planes + plane]);
    }
    const size_t per_plane = size_t(leaves) * spines;
    out.insert(out.end(), leaf_spine.begin() + plane * per_plane, leaf_spine.begin() + (plane + 1) * per_plane);
    out.insert(out.end(), spine_leaf.begin() + plane * per_plane, spine_leaf.begin() + (plane + 1) * per_plane);
    const size_t cores = size_t(pods) * spines * cores_per_agg;
    if (tiers == 3) {
        out.insert(out.end(), agg_core.begin() + plane * cores, agg_core.begin() + (plane + 1) * cores);
        out.insert(out.end(), core_agg.begin() + plane * cores, core_agg.begin() + (plane + 1) * cores);
    }
    return out;
}

void PlanesTopology::set_plane_up(Fabric& fab, uint16_t plane, bool is_up) const {
    for (LinkId l : plane_links(plane)) fab.link(l).set_up(is_up);
}

PlanesTopology build_planes(Fabric& fab, std::span<const HostId> hosts, const PlanesConfig& cfg) {
    if (hosts.empty() || cfg.planes == 0 || cfg.spines == 0 || cfg.hosts_per_leaf == 0)
        throw std::invalid_argument("sim planes: hosts, planes, spines and hosts_per_leaf must be > 0");
    if (cfg.tiers != 2 && cfg.tiers != 3) throw std::invalid_argument("sim planes: tiers must be 2 or 3");
    if (cfg.tiers == 3 && (cfg.leaves_per_pod == 0 || cfg.cores_per_agg == 0))
        throw std::invalid_argument("sim planes: tiers = 3 needs leaves_per_pod and cores_per_agg > 0");
    PlanesTopology t;
    t.hosts.assign(hosts.begin(), hosts.end());
    t.planes = cfg.planes;
    t.spines = cfg.spines;
    t.hosts_per_leaf = cfg.hosts_per_leaf;
    t.leaves = uint32_t((hosts.size() + cfg.hosts_per_leaf - 1) / cfg.hosts_per_leaf);
    t.tiers = cfg.tiers;
    t.leaves_per_pod = cfg.tiers == 3 ? cfg.leaves_per_pod : t.leaves;
    t.pods = (t.leaves + t.leaves_per_pod - 1) / t.leaves_per_pod;
    t.cores_per_agg = cfg.tiers == 3 ? cfg.cores_per_agg : 0;
    for (size_t h = 0; h < hosts.size(); ++h) {
        for (uint16_t p = 0; p < cfg.planes; ++p) {
            const std::string tag = "p" + std::to_string(p) + ".h" + std::to_string(hosts[h]);
            t.up.push_back(fab.add_link(named(cfg.host_link, tag + ".up")));
            t.down.push_back(fab.add_link(named(cfg.host_link, tag + ".down")));
        }
    }
    t.leaf_spine.resize(size_t(cfg.planes) * t.leaves * cfg.spines);
    t.spine_leaf.resize(t.leaf_spine.size());
    for (uint16_t p = 0; p < cfg.planes; ++p)
        for (uint32_t l = 0; l < t.leaves; ++l)
            for (uint16_t s = 0; s < cfg.spines; ++s) {
                const std::string tag =
                    "p" + std::to_string(p) + ".leaf" + std::to_string(l) + ".spine" + std::to_string(s);
                t.leaf_spine[(size_t(p) * t.leaves + l) * cfg.spines + s] = fab.add_link(named(cfg.spine_link, tag + ".up"));
                t.spine_leaf[(size_t(p) * cfg.spines + s) * t.leaves + l] =
                    fab.add_link(named(cfg.spine_link, tag + ".down"));
            }
    const size_t cores = size_t(t.pods) * t.spines * t.cores_per_agg;
    t.agg_core.resize(cfg.planes * cores);
    t.core_agg.resize(t.agg_core.size());
    for (uint16_t p = 0; p < cfg.planes; ++p)
        for (uint32_t pod = 0; pod < t.pods; ++pod)
            for (uint16_t s = 0; s < t.spines; ++s)
                for (uint16_t c = 0; c < t.cores_per_agg; ++c) {
                    const std::string tag = "p" + std::to_string(p) + ".pod" + std::to_string(pod) + ".agg" +
                                            std::to_string(s) + ".core" + std::to_string(s) + "." + std::to_string(c);
                    t.agg_core[((size_t(p) * t.pods + pod) * t.spines + s) * t.cores_per_agg + c] =
                        fab.add_link(named(cfg.spine_link, tag + ".up"));
                    t.core_agg[((size_t(p) * t.spines + s) * t.cores_per_agg + c) * t.pods + pod] =
                        fab.add_link(named(cfg.spine_link, tag + ".down"));
                }
    t.ecmp_seed = splitmix64(fab.seed() ^ 0xec3bull);
    fab.set_router([index = host_index(hosts), t, seed = t.ecmp_seed, core_seed = splitmix64(t.ecmp_seed ^ 0xc0eull)](
                       HostId src, HostId dst, uint16_t path, uint16_t entropy, LinkId* out) -> size_t {
        const uint32_t si = lookup(index, src), di = lookup(index, dst);
        if (si == UINT32_MAX || di == UINT32_MAX || si == di) return 0;
        const uint16_t plane = path == kControlPathIndex ? 0 : uint16_t(path % t.planes);
        const uint32_t leaf_s = si / t.hosts_per_leaf, leaf_d = di / t.hosts_per_leaf;
        out[0] = t.up[size_t(si) * t.planes + plane];
        if (leaf_s == leaf_d) {
            out[1] = t.down[size_t(di) * t.planes + plane];
            return 2;
        }
        const uint16_t spine = ecmp_pick(seed, plane, src, dst, entropy, t.spines);
        out[1] = t.leaf_spine[(size_t(plane) * t.leaves + leaf_s) * t.spines + spine];
        const uint32_t pod_s = leaf_s / t.leaves_per_pod, pod_d = leaf_d / t.leaves_per_pod;
        size_t n = 2;
        if (pod_s != pod_d) {
            const uint16_t core = ecmp_pick(core_seed, plane, src, dst, entropy, t.cores_per_agg);
            out[n++] = t.agg_core[((size_t(plane) * t.pods + pod_s) * t.spines + spine) * t.cores_per_agg + core];
            out[n++] = t.core_agg[((size_t(plane) * t.spines + spine) * t.cores_per_agg + core) * t.pods + pod_d];
        }
        out[n++] = t.spine_leaf[(size_t(plane) * t.spines + spine) * t.leaves + leaf_d];
        out[n++] = t.down[size_t(di) * t.planes + plane];
        return n;
    });
    return t;
}

}  // namespace mroce::sim
