// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Scenario files are parsed by hand, like config/mroce.conf, and their
// [engine] section is handed to mroce::parse_config itself so that engine
// keys mean exactly what they mean in mroce.conf (one parser for them).
#include "scenario.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace mroce::simapp {

namespace {

std::string trim(std::string_view s) {
    size_t a = 0, b = s.size();
    while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) ++a;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
    return std::string(s.substr(a, b - a));
}

struct Where {
    const std::string& origin;
    size_t line;
    const std::string& key;
    [[noreturn]] void bad(const std::string& why, const std::string& value) const {
        throw ConfigError(origin + ":" + std::to_string(line) + ": key '" + key + "': " + why + " (got '" + value +
                          "')");
    }
};

uint64_t parse_uint(const Where& w, const std::string& v, uint64_t lo, uint64_t hi) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long x = v.empty() || v[0] == '-' || v[0] == '+' ? 0 : std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || v[0] == '-' || v[0] == '+' || errno || *end)
        w.bad("expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi), v);
    if (x < lo || x > hi) w.bad("out of range " + std::to_string(lo) + ".." + std::to_string(hi), v);
    return x;
}

double parse_real(const Where& w, const std::string& v, double lo, double hi) {
    errno = 0;
    char* end = nullptr;
    const double x = v.empty() ? NAN : std::strtod(v.c_str(), &end);
    if (v.empty() || errno || *end || !(x >= lo && x <= hi))
        w.bad("expected a number in " + std::to_string(lo) + ".." + std::to_string(hi), v);
    return x;
}

bool parse_bool(const Where& w, const std::string& v) {
    if (v == "true" || v == "yes" || v == "on" || v == "1") return true;
    if (v == "false" || v == "no" || v == "off" || v == "0") return false;
    w.bad("expected true or false", v);
}

template <class E>
E parse_enum(const Where& w, const std::string& v, std::initializer_list<std::pair<const char*, E>> names) {
    std::string all;
    for (const auto& [n, e] : names) {
        if (v == n) return e;
        all += all.empty() ? n : std::string(", ") + n;
    }
    w.bad("expected one of " + all, v);
}

constexpr uint64_t kGiB = 1ull << 30;

// One key of one section; false if the section has no such key.
bool apply(Scenario& s, const std::string& sec, const Where& w, const std::string& k, const std::string& v) {
    FabricSpec& f = s.fabric;
    if (sec == "scenario") {
        if (k == "seed") s.seed = parse_uint(w, v, 0, UINT64_MAX);
        else if (k == "transport")
            s.transport = parse_enum<TransportKind>(w, v, {{"mroce", TransportKind::mroce}, {"roce", TransportKind::roce}});
        else if (k == "sample_us") s.sample_interval = parse_uint(w, v, 0, 10'000'000) * 1000;
        else if (k == "slice_ns") s.slice = parse_uint(w, v, 100, 1'000'000);
        else return false;
    } else if (sec == "fabric") {
        if (k == "topology")
            f.topology = parse_enum<TopologyKind>(
                w, v, {{"pair", TopologyKind::pair},
                        {"star", TopologyKind::star},
                        {"planes", TopologyKind::planes},
                        {"fat_tree", TopologyKind::fat_tree}});
        else if (k == "hosts") f.hosts = uint32_t(parse_uint(w, v, 2, 4096));
        else if (k == "planes") f.planes = uint16_t(parse_uint(w, v, 1, 64));
        else if (k == "spines") {
            f.spines = uint16_t(parse_uint(w, v, 1, 256));
            f.spines_given = true;
        } else if (k == "tiers") f.tiers = uint16_t(parse_uint(w, v, 2, 3));
        else if (k == "oversubscription") f.oversubscription = parse_real(w, v, 1, 256);
        else if (k == "leaves_per_pod") f.leaves_per_pod = uint32_t(parse_uint(w, v, 1, 4096));
        else if (k == "hosts_per_leaf") f.hosts_per_leaf = uint32_t(parse_uint(w, v, 1, 4096));
        else if (k == "paths") f.pair_paths = uint16_t(parse_uint(w, v, 1, 256));
        else if (k == "link_gbps") f.link_bps = uint64_t(parse_real(w, v, 0.001, 100'000) * 1e9);
        else if (k == "link_delay_ns") f.link_delay = parse_uint(w, v, 0, 1'000'000'000);
        else if (k == "buffer_bytes") f.buffer_bytes = parse_uint(w, v, 4096, 64 * kGiB);
        else if (k == "ecn_threshold_bytes") f.ecn_bytes = parse_uint(w, v, 0, 64 * kGiB);
        else if (k == "ecn_min_bytes") f.ecn_min_bytes = parse_uint(w, v, 0, 64 * kGiB);
        else if (k == "ecn_max_bytes") f.ecn_max_bytes = parse_uint(w, v, 0, 64 * kGiB);
        else if (k == "ecn_pmax") f.ecn_pmax = parse_real(w, v, 1e-9, 1);
        else if (k == "link_loss") f.link_loss = parse_real(w, v, 0, 1);
        else if (k == "path_loss") f.path_loss = parse_real(w, v, 0, 1);
        else if (k == "overhead_bytes") f.overhead_bytes = uint32_t(parse_uint(w, v, 0, 1024));
        else if (k == "pfc") f.pfc = parse_bool(w, v);
        else if (k == "pfc_xoff_bytes") f.pfc_xoff_bytes = parse_uint(w, v, 1, 64 * kGiB);
        else if (k == "pfc_xon_bytes") f.pfc_xon_bytes = parse_uint(w, v, 0, 64 * kGiB);
        else if (k == "hot_gbps") f.hot_bps = uint64_t(parse_real(w, v, 0, 100'000) * 1e9);
        else if (k == "hot_leaf") f.hot_leaf = uint32_t(parse_uint(w, v, 0, 4095));
        else if (k == "hot_spine") f.hot_spine = uint16_t(parse_uint(w, v, 0, 255));
        else if (k == "nic_ring_bytes") f.nic_ring_bytes = parse_uint(w, v, 0, kGiB);
        else if (k == "host_burst") f.host_burst = uint32_t(parse_uint(w, v, 1, 1024));
        else return false;
    } else if (sec == "roce") {
        if (k == "mtu") s.roce.mtu = uint32_t(parse_uint(w, v, 256, 9000));
        else if (k == "rto_us") s.roce.rto = parse_uint(w, v, 1, 10'000'000) * 1000;
        else if (k == "max_inflight") s.roce.max_inflight = uint32_t(parse_uint(w, v, 1, 1u << 20));
        else if (k == "dcqcn") s.roce.dcqcn = parse_bool(w, v);
        else return false;
    } else if (sec == "workload") {
        WorkloadSpec& wl = s.workload;
        if (k == "kind")
            wl.kind = parse_enum<WorkloadKind>(
                w, v,
                {{"ring_allreduce", WorkloadKind::ring_allreduce},
                 {"tree_allreduce", WorkloadKind::tree_allreduce},
                 {"incast", WorkloadKind::incast},
                 {"all_to_all", WorkloadKind::all_to_all},
                 {"permutation", WorkloadKind::permutation},
                 {"mix", WorkloadKind::mix}});
        else if (k == "bytes") wl.bytes = parse_uint(w, v, 1, 1024 * kGiB);
        else if (k == "chunk_bytes") wl.chunk_bytes = uint32_t(parse_uint(w, v, 4096, 1u << 30));
        else if (k == "conns_per_pair") wl.conns_per_pair = uint32_t(parse_uint(w, v, 1, 4096));
        else if (k == "slices") wl.slices = uint32_t(parse_uint(w, v, 1, 65536));
        else if (k == "slices_outstanding") wl.slices_outstanding = uint32_t(parse_uint(w, v, 0, 65536));
        else if (k == "streams") wl.streams = uint32_t(parse_uint(w, v, 1, 64));
        else if (k == "long_hosts") wl.long_hosts = uint32_t(parse_uint(w, v, 0, 4095));
        else if (k == "short_bytes") wl.short_bytes = parse_uint(w, v, 1, kGiB);
        else if (k == "short_flows") wl.short_flows = uint32_t(parse_uint(w, v, 0, 10'000'000));
        else if (k == "short_rate_per_us") wl.short_rate_per_us = parse_real(w, v, 1e-6, 1e6);
        else if (k == "time_limit_ms") wl.time_limit = parse_uint(w, v, 1, 3'600'000) * 1'000'000;
        else return false;
    } else if (sec == "event") {
        EventSpec& e = s.events.back();
        if (k == "at_us") e.at = parse_uint(w, v, 0, 3'600'000'000) * 1000;
        else if (k == "action")
            e.action = parse_enum<EventAction>(w, v,
                                               {{"plane_down", EventAction::plane_down},
                                                {"plane_up", EventAction::plane_up},
                                                {"link_down", EventAction::link_down},
                                                {"link_up", EventAction::link_up}});
        else if (k == "target") e.target = uint32_t(parse_uint(w, v, 0, 1u << 20));
        else return false;
    } else {
        return false;
    }
    return true;
}

const char* kSections = "[scenario], [fabric], [engine], [roce], [workload], [event]";

// The [engine] lines, handed to mroce::parse_config with every other line
// blank so its errors carry this file's line numbers.
EngineConfig engine_from(const std::vector<std::string>& engine_lines, const std::string& origin) {
    std::string text;
    for (const std::string& l : engine_lines) text += l + "\n";
    const Config c = parse_config(text, origin);
    EngineConfig e = c.devices.at(0).engine;
    // parse_config starts from the socket devices' defaults; a simulated host
    // has no descheduled peer, so what the file did not set is the engine's own.
    const EngineConfig native;
    auto given = [&](const char* key) {
        for (const std::string& l : engine_lines) {
            const std::string t = trim(l);
            if (t.rfind(key, 0) == 0 && trim(std::string_view(t).substr(std::string_view(key).size())).rfind('=', 0) == 0)
                return true;
        }
        return false;
    };
    if (!given("min_rto_us")) e.min_rto = native.min_rto;
    if (!given("initial_rto_us")) e.initial_rto = native.initial_rto;
    if (!given("max_payload") || e.max_payload == kMaxPayloadAuto) e.max_payload = native.max_payload;
    if (!given("rx_capacity_mbps")) e.rx_capacity_mbps = 0;  // filled in from the fabric (finish_engine)
    return e;
}

// A host's inbound capacity is what its links bring (one per plane), unless
// [engine] says otherwise: hints are shares of it (R-HINT-3).
void finish_engine(Scenario& s) {
    if (s.engine.rx_capacity_mbps != 0 && s.engine_rx_capacity_given) return;
    const uint64_t ports = leaf_spine(s.fabric) ? s.fabric.planes
                           : s.fabric.topology == TopologyKind::pair ? s.fabric.pair_paths
                                                                     : 1;
    s.engine.rx_capacity_mbps = uint32_t(std::min<uint64_t>(UINT32_MAX, s.fabric.link_bps / 1'000'000 * ports));
    s.engine_rx_capacity_given = false;
}

void check(Scenario& s) {
    FabricSpec& f = s.fabric;
    auto bad = [&](const std::string& why) { throw ConfigError(s.origin + ": " + why); };
    if (f.topology != TopologyKind::fat_tree) {
        if (f.tiers != 2) bad("key 'tiers': tiers are for topology = fat_tree");
        if (f.oversubscription != 1) bad("key 'oversubscription': oversubscription is for topology = fat_tree");
        if (f.leaves_per_pod) bad("key 'leaves_per_pod': pods are for topology = fat_tree, tiers = 3");
    } else {
        // Sizes derived from hosts and hosts_per_leaf; impossible ones refused naming the key.
        const std::string hpl = std::to_string(f.hosts_per_leaf);
        if (f.spines_given) bad("key 'spines': a fat_tree derives its spines (hosts_per_leaf / oversubscription)");
        if (f.hosts % f.hosts_per_leaf)
            bad("key 'hosts_per_leaf': " + hpl + " does not divide hosts = " + std::to_string(f.hosts));
        const uint32_t leaves = f.hosts / f.hosts_per_leaf;
        if (leaves < 2) bad("key 'hosts_per_leaf': a fat_tree needs at least 2 leaves (hosts / hosts_per_leaf)");
        const double up = double(f.hosts_per_leaf) / f.oversubscription;
        if (up < 1 || std::fabs(up - std::round(up)) > 1e-9 || up > 256)
            bad("key 'oversubscription': hosts_per_leaf / oversubscription (" + hpl + " / " +
                std::to_string(f.oversubscription) + ") must be a whole number of uplinks per leaf, 1..256");
        f.spines = uint16_t(std::lround(up));
        if (f.tiers == 2 && f.leaves_per_pod) bad("key 'leaves_per_pod': pods are for tiers = 3");
        if (f.tiers == 3) {
            const uint32_t lpp = f.leaves_per_pod ? f.leaves_per_pod : 2;
            if (leaves % lpp || leaves / lpp < 2)
                bad("key 'leaves_per_pod': " + std::to_string(lpp) + " leaves per pod must divide the " +
                    std::to_string(leaves) + " leaves into at least 2 pods");
            if (lpp > 65535) bad("key 'leaves_per_pod': at most 65535");
        }
    }
    if (f.topology == TopologyKind::pair && f.hosts != 2) bad("key 'hosts': topology = pair has exactly 2 hosts");
    if (!f.ecn_max_bytes && f.ecn_min_bytes) bad("key 'ecn_min_bytes': a RED ramp needs ecn_max_bytes too");
    if (!f.ecn_max_bytes && f.ecn_pmax != 1) bad("key 'ecn_pmax': a RED ramp needs ecn_max_bytes too");
    if (f.ecn_max_bytes && f.ecn_max_bytes <= f.ecn_min_bytes)
        bad("key 'ecn_max_bytes': must be above ecn_min_bytes (" + std::to_string(f.ecn_min_bytes) + ")");
    if (f.pfc && f.pfc_xon_bytes >= f.pfc_xoff_bytes) bad("key 'pfc_xon_bytes': must be below pfc_xoff_bytes");
    if (f.hot_bps && !leaf_spine(f)) bad("key 'hot_gbps': a hot link needs topology = planes or fat_tree");
    if (f.hot_bps && f.hot_spine >= f.spines)
        bad("key 'hot_spine': no spine " + std::to_string(f.hot_spine) + " (spines = " + std::to_string(f.spines) + ")");
    if (f.hot_bps && f.hot_leaf >= (f.hosts + f.hosts_per_leaf - 1) / f.hosts_per_leaf)
        bad("key 'hot_leaf': no leaf " + std::to_string(f.hot_leaf) + " (" +
            std::to_string((f.hosts + f.hosts_per_leaf - 1) / f.hosts_per_leaf) + " leaves)");
    const bool allreduce =
        s.workload.kind == WorkloadKind::ring_allreduce || s.workload.kind == WorkloadKind::tree_allreduce;
    if (s.workload.slices > 1 && !allreduce) bad("key 'slices': slices are for kind = ring_allreduce or tree_allreduce");
    {
        const WorkloadSpec& w = s.workload;
        const WorkloadSpec dflt;
        const bool mix = w.kind == WorkloadKind::mix;
        if (!mix && w.long_hosts != dflt.long_hosts) bad("key 'long_hosts': for kind = mix");
        if (!mix && w.short_bytes != dflt.short_bytes) bad("key 'short_bytes': for kind = mix");
        if (!mix && w.short_flows != dflt.short_flows) bad("key 'short_flows': for kind = mix");
        if (!mix && w.short_rate_per_us != dflt.short_rate_per_us) bad("key 'short_rate_per_us': for kind = mix");
        if (mix && w.long_hosts != dflt.long_hosts && w.long_hosts >= f.hosts)
            bad("key 'long_hosts': " + std::to_string(w.long_hosts) + " leaves no host for the short flows (hosts = " +
                std::to_string(f.hosts) + ")");
        if (mix && w.conns_per_pair != 1) bad("key 'conns_per_pair': kind = mix opens one connection per flow's host pair");
    }
    if (s.workload.streams > 1 && s.workload.kind != WorkloadKind::ring_allreduce)
        bad("key 'streams': streams are for kind = ring_allreduce");
    if (s.workload.kind == WorkloadKind::incast && f.topology == TopologyKind::pair && f.hosts != 2)
        bad("key 'kind': incast needs hosts >= 2");
    for (const EventSpec& e : s.events) {
        const bool plane = e.action == EventAction::plane_down || e.action == EventAction::plane_up;
        if (plane && !leaf_spine(f))
            throw ConfigError(s.origin + ":" + std::to_string(e.line) +
                              ": key 'action': plane events need topology = planes or fat_tree");
        if (plane && e.target >= f.planes)
            throw ConfigError(s.origin + ":" + std::to_string(e.line) + ": key 'target': no plane " +
                              std::to_string(e.target));
        if (!plane && e.target >= f.hosts)
            throw ConfigError(s.origin + ":" + std::to_string(e.line) + ": key 'target': no host " +
                              std::to_string(e.target));
    }
}

}  // namespace

const char* to_string(TransportKind k) noexcept { return k == TransportKind::mroce ? "mroce" : "roce"; }
const char* to_string(WorkloadKind k) noexcept {
    switch (k) {
        case WorkloadKind::ring_allreduce: return "ring_allreduce";
        case WorkloadKind::tree_allreduce: return "tree_allreduce";
        case WorkloadKind::incast: return "incast";
        case WorkloadKind::all_to_all: return "all_to_all";
        case WorkloadKind::permutation: return "permutation";
        case WorkloadKind::mix: return "mix";
    }
    return "?";
}

Scenario parse_scenario(std::string_view text, const std::string& origin) {
    Scenario s;
    s.origin = origin;
    std::vector<std::string> engine_lines;
    std::string sec;
    std::map<std::string, size_t> seen_sections, keys_seen;
    std::istringstream in{std::string(text)};
    std::string raw;
    size_t lineno = 0;
    auto where = [&](size_t line) { return origin + ":" + std::to_string(line) + ": "; };
    while (std::getline(in, raw)) {
        ++lineno;
        engine_lines.emplace_back();
        const std::string line = trim(raw);
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line[0] == '[') {
            if (line.back() != ']') throw ConfigError(where(lineno) + "section header without ']'");
            sec = trim(std::string_view(line).substr(1, line.size() - 2));
            keys_seen.clear();
            if (sec == "event") {
                s.events.push_back(EventSpec{lineno});
            } else if (sec == "scenario" || sec == "fabric" || sec == "engine" || sec == "roce" || sec == "workload") {
                if (auto [it, fresh] = seen_sections.emplace(sec, lineno); !fresh)
                    throw ConfigError(where(lineno) + "section [" + sec + "] repeated (first at line " +
                                      std::to_string(it->second) + ")");
            } else {
                throw ConfigError(where(lineno) + "unknown section [" + sec + "] (expected " + kSections + ")");
            }
            if (sec == "engine") engine_lines.back() = "[engine]";
            continue;
        }
        const size_t eq = line.find('=');
        if (eq == std::string::npos) throw ConfigError(where(lineno) + "expected 'key = value', got '" + line + "'");
        const std::string k = trim(std::string_view(line).substr(0, eq));
        std::string v = trim(std::string_view(line).substr(eq + 1));
        if (const size_t h = v.find(" #"); h != std::string::npos) v = trim(std::string_view(v).substr(0, h));
        if (sec.empty()) throw ConfigError(where(lineno) + "key '" + k + "' outside a section (" + kSections + ")");
        if (auto [it, fresh] = keys_seen.emplace(k, lineno); !fresh)
            throw ConfigError(where(lineno) + "key '" + k + "': repeated in [" + sec + "] (first at line " +
                              std::to_string(it->second) + ")");
        if (sec == "engine") {
            engine_lines.back() = raw;
            continue;
        }
        if (!apply(s, sec, Where{origin, lineno, k}, k, v))
            throw ConfigError(where(lineno) + "key '" + k + "': unknown in [" + sec + "]");
    }
    s.engine = engine_from(engine_lines, origin);
    s.engine_rx_capacity_given = s.engine.rx_capacity_mbps != 0;
    s.engine_lines = std::move(engine_lines);
    finish_engine(s);
    check(s);
    return s;
}

Scenario load_scenario(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw ConfigError(path + ": cannot read the scenario file");
    std::stringstream ss;
    ss << f.rdbuf();
    if (f.bad()) throw ConfigError(path + ": cannot read the scenario file");
    return parse_scenario(ss.str(), path);
}

void override_scenario(Scenario& s, const std::string& assignment) {
    static const std::string origin = "<command line>";
    const size_t eq = assignment.find('='), dot = assignment.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
        throw ConfigError(origin + ": expected section.key=value, got '" + assignment + "'");
    const std::string sec = assignment.substr(0, dot), k = assignment.substr(dot + 1, eq - dot - 1),
                      v = assignment.substr(eq + 1);
    if (sec == "engine") {
        // Through the same parser as the file's [engine]: the key's line is
        // replaced, or the key added to the section.
        std::vector<std::string> lines = s.engine_lines;
        bool replaced = false, has_section = false;
        for (std::string& l : lines) {
            const std::string t = trim(l);
            has_section = has_section || t == "[engine]";
            if (t.rfind(k, 0) == 0 && trim(std::string_view(t).substr(k.size())).rfind('=', 0) == 0) {
                l = k + " = " + v;
                replaced = true;
            }
        }
        if (!replaced) {
            if (!has_section) lines.push_back("[engine]");
            lines.push_back(k + " = " + v);
        }
        s.engine = engine_from(lines, s.origin);
        s.engine_rx_capacity_given = s.engine.rx_capacity_mbps != 0;
        s.engine_lines = std::move(lines);
        finish_engine(s);
        return;
    }
    if (sec == "event") throw ConfigError(origin + ": events are given in the scenario file only");
    if (!apply(s, sec, Where{origin, 1, k}, k, v))
        throw ConfigError(origin + ": key '" + k + "': unknown in [" + sec + "]");
    finish_engine(s);
    check(s);
}

}  // namespace mroce::simapp
