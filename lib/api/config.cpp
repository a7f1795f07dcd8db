// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The configuration format (config/mroce.conf is the documented example):
// INI-like, '#' or ';' comments, "key = value" lines, sections [engine]
// (knobs applied to every device) and [device NAME]. Parsed here by hand so the
// library takes no dependency for it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

#include "mroce/api.hpp"

namespace mroce {

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
    std::string key;
    [[noreturn]] void bad(const std::string& why, const std::string& value) const {
        throw ConfigError(origin + ":" + std::to_string(line) + ": key '" + key + "': " + why + " (got '" + value +
                          "')");
    }
};

uint64_t parse_uint(const Where& w, const std::string& v, uint64_t lo, uint64_t hi) {
    if (v.empty() || v[0] == '-' || v[0] == '+')
        w.bad("expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi), v);
    errno = 0;
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
    if (errno || *end) w.bad("expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi), v);
    if (x < lo || x > hi) w.bad("out of range " + std::to_string(lo) + ".." + std::to_string(hi), v);
    return x;
}

bool parse_bool(const Where& w, const std::string& v) {
    if (v == "true" || v == "yes" || v == "on" || v == "1") return true;
    if (v == "false" || v == "no" || v == "off" || v == "0") return false;
    w.bad("expected true or false", v);
}

// A probability: a decimal fraction in [0, 1].
double parse_probability(const Where& w, const std::string& v) {
    errno = 0;
    char* end = nullptr;
    const double x = v.empty() ? -1 : std::strtod(v.c_str(), &end);
    if (v.empty() || errno || *end || !(x >= 0 && x <= 1)) w.bad("expected a probability in 0..1", v);
    return x;
}

// Engine knobs: valid in [engine] (every device) and in [device NAME] (that one).
bool engine_key(const Where& w, const std::string& k, const std::string& v, EngineConfig& e) {
    constexpr uint64_t kU32 = std::numeric_limits<uint32_t>::max();
    if (k == "paths") e.num_paths = uint16_t(parse_uint(w, v, 1, 256));
    else if (k == "max_payload") {
        if (v == "auto") e.max_payload = kMaxPayloadAuto;
        else if (v.empty() || v[0] < '0' || v[0] > '9') w.bad("expected auto or an integer in 64..9000", v);
        else e.max_payload = uint16_t(parse_uint(w, v, 64, 9000));
    }
    else if (k == "rx_capacity_mbps") e.rx_capacity_mbps = uint32_t(parse_uint(w, v, 1, kU32));
    else if (k == "stream_depth") e.stream_depth = uint32_t(parse_uint(w, v, 1, 65536));
    else if (k == "recv_depth") e.recv_depth = uint32_t(parse_uint(w, v, 1, 1u << 20));
    else if (k == "max_send_sge") e.max_send_sge = uint32_t(parse_uint(w, v, 1, kMaxSge));
    else if (k == "max_recv_sge") e.max_recv_sge = uint32_t(parse_uint(w, v, 1, kMaxSge));
    else if (k == "max_inline") e.max_inline = uint32_t(parse_uint(w, v, 0, kMaxInline));
    else if (k == "csn_window") {
        const uint64_t x = parse_uint(w, v, 64, 1u << 20);
        if (x & (x - 1)) w.bad("must be a power of two", v);
        e.csn_window = uint32_t(x);
    } else if (k == "rate_hints") e.rate_hints = parse_bool(w, v);
    else if (k == "accept_incoming") e.accept_incoming = parse_bool(w, v);
    else if (k == "initial_rto_us") e.initial_rto = parse_uint(w, v, 1, 60'000'000) * 1000;
    else if (k == "min_rto_us") e.min_rto = parse_uint(w, v, 1, 60'000'000) * 1000;
    else if (k == "max_rto_us") e.max_rto = parse_uint(w, v, 1, 600'000'000) * 1000;
    else if (k == "fail_after_timeouts") e.fail_after_timeouts = uint32_t(parse_uint(w, v, 1, 1000));
    else if (k == "probe_interval_us") e.probe_interval = parse_uint(w, v, 1, 60'000'000) * 1000;
    else if (k == "probe_max_interval_us") e.probe_max_interval = parse_uint(w, v, 1, 60'000'000) * 1000;
    else if (k == "probe_rate") e.probe_rate = uint32_t(parse_uint(w, v, 0, 10'000'000));
    else if (k == "keepalive_ms") e.keepalive_interval = parse_uint(w, v, 0, 3'600'000) * 1'000'000;
    else if (k == "peer_gone_wait_ms") e.peer_gone_wait = parse_uint(w, v, 0, 3'600'000) * 1'000'000;
    else if (k == "conn_timeout_ms") e.conn_timeout = parse_uint(w, v, 1, 3'600'000) * 1'000'000;
    else if (k == "connect_retry_ms") e.connect_retry = parse_uint(w, v, 1, 60'000) * 1'000'000;
    else if (k == "hint_interval_us") e.hint_interval = parse_uint(w, v, 0, 60'000'000) * 1000;
    else if (k == "ack_delay_us") e.ack_delay = parse_uint(w, v, 0, 1'000'000) * 1000;
    else if (k == "tail_redundancy") e.tail_redundancy = parse_bool(w, v);  // R-TIMER-10
    else if (k == "pack_writes") e.pack_writes = parse_bool(w, v);  // R-PACK-2
    else if (k == "reroute_after_marks") e.reroute_after_marks = uint32_t(parse_uint(w, v, 0, 1'000'000));
    else return false;
    return true;
}


bool parse_mac_text(const std::string& s) {
    unsigned v[6];
    char tail;
    if (std::sscanf(s.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
        return false;
    return s.size() == 17;
}

// "IP MAC, IP MAC, ...": checked here so a typo names its key and line, not a
// DPDK error at open time.
void check_neighbours(const Where& w, const std::string& table, const std::string& v) {
    std::istringstream in(table);
    std::string entry;
    std::vector<std::string> seen;
    while (std::getline(in, entry, ',')) {
        std::istringstream e(entry);
        std::string ip, mac, extra;
        e >> ip >> mac;
        if (ip.empty() && mac.empty())
            w.bad("empty entry (expected 'IP MAC' entries separated by commas; with planes, one such table per plane "
                  "separated by '|')", v);
        in_addr a{};
        if (inet_pton(AF_INET, ip.c_str(), &a) != 1) w.bad("'" + ip + "' is not an IPv4 address", v);
        if (!parse_mac_text(mac)) w.bad("'" + mac + "' is not a MAC address (xx:xx:xx:xx:xx:xx)", v);
        if (e >> extra) w.bad("entry '" + trim(entry) + "' has more than 'IP MAC'", v);
        for (const auto& s : seen)
            if (s == ip) w.bad("neighbour " + ip + " listed twice", v);
        seen.push_back(ip);
    }
}

// An EAL core list: "N", "N,M", "N-M" combinations.
bool core_list(const std::string& v) {
    if (v.empty()) return false;
    bool digit = false;
    for (char c : v) {
        if (c >= '0' && c <= '9') digit = true;
        else if ((c == ',' || c == '-') && digit) digit = false;
        else return false;
    }
    return digit;
}

// An EAL lcore map (the EAL's --lcores): "(0,1,2)@(0,1)", "0@0,1@1,2@0":
// lcore sets, each optionally @ a CPU set. Checked for its alphabet and
// parentheses here; the EAL checks the rest at open (naming key 'lcores').
bool lcore_map(const std::string& v) {
    if (v.find_first_of("@(") == std::string::npos) return false;
    int depth = 0;
    for (char c : v) {
        if (c == '(') ++depth;
        else if (c == ')') --depth;
        else if (!((c >= '0' && c <= '9') || c == ',' || c == '-' || c == '@')) return false;
        if (depth < 0 || depth > 1) return false;
    }
    return depth == 0 && v.back() != '@' && v.front() != '@';
}

// driver = dpdk keys. Returns false for a key that is not one of them.
bool dpdk_key(const Where& w, const std::string& k, const std::string& v, DpdkDeviceConfig& p) {
    if (k == "eal_args") {
        // Core and memory options have their own keys, so the two cannot disagree.
        std::istringstream in(v);
        for (std::string a; in >> a;) {
            const bool short_core = a.size() >= 2 && a[0] == '-' && (a[1] == 'l' || a[1] == 'c');   // -l, -l0, -c0x3
            if (short_core || a == "--lcores" || a.rfind("--lcores=", 0) == 0)
                w.bad("choose cores with key 'lcores', not " + a + " in eal_args", v);
            if (a == "--file-prefix" || a.rfind("--file-prefix=", 0) == 0)
                w.bad("the file prefix is per process (mroce-<pid>); do not set it", v);
        }
        p.eal_args = v;
    } else if (k == "eal_memory_mb") p.eal_memory_mb = uint32_t(parse_uint(w, v, 16, 1u << 20));
    else if (k == "dpdk_port") {
        // One ethdev per plane, plane 0 first ("net_memif0, net_memif1"); empty: the only port (checked at open).
        const std::vector<std::string> ports = split_config_list(v, ',');
        for (size_t i = 0; i < ports.size() && ports.size() > 1; ++i) {
            if (ports[i].empty()) w.bad("empty entry (expected one ethdev name or port id per plane, separated by commas)", v);
            for (size_t j = 0; j < i; ++j)
                if (ports[j] == ports[i]) w.bad("port " + ports[i] + " listed for planes " + std::to_string(j) +
                                                    " and " + std::to_string(i) + " (each plane is its own port)", v);
        }
        p.port = v;
    } else if (k == "neighbours") {
        // One table per plane, separated by '|', plane 0 first.
        const std::vector<std::string> tables = split_config_list(v, '|');
        for (size_t i = 0; i < tables.size(); ++i) {
            if (tables.size() > 1 && tables[i].empty())
                w.bad("empty entry: plane " + std::to_string(i) + "'s neighbour table (expected one 'IP MAC, ...' "
                      "table per plane, separated by '|')", v);
            check_neighbours(w, tables[i], v);
        }
        p.neighbours = v;
    } else if (k == "mac") {
        // One per plane, separated by commas (or nothing: each port's own).
        const std::vector<std::string> macs = split_config_list(v, ',');
        for (const std::string& m : macs)
            if (!v.empty() && !parse_mac_text(m))
                w.bad("expected a MAC address (xx:xx:xx:xx:xx:xx) per plane, separated by commas, or nothing", v);
        p.mac = v;
    } else if (k == "lcores") {
        if (v != "auto" && !core_list(v) && !lcore_map(v))
            w.bad("expected auto, a core list such as 2 or 2,3 or 2-3, or an EAL lcore map such as (0,1,2)@(0,1)", v);
        p.lcores = v;
    } else if (k == "pipeline") {
        if (v == "none") p.pipeline = PipelineMode::none;
        else if (v == "placement") p.pipeline = PipelineMode::placement;
        else if (v == "placement+cc") p.pipeline = PipelineMode::placement_cc;
        else w.bad("expected none, placement or placement+cc", v);
    } else if (k == "placement_lcore") p.placement_lcore = v.empty() ? -1 : int32_t(parse_uint(w, v, 0, 1023));
    else if (k == "cc_lcore") p.cc_lcore = v.empty() ? -1 : int32_t(parse_uint(w, v, 0, 1023));
    else if (k == "rx_queues") p.rx_queues = uint16_t(parse_uint(w, v, 1, 64));
    else if (k == "tx_queues") p.tx_queues = uint16_t(parse_uint(w, v, 1, 64));
    else if (k == "rx_desc") p.rx_desc = uint16_t(parse_uint(w, v, 64, 32768));
    else if (k == "tx_desc") p.tx_desc = uint16_t(parse_uint(w, v, 64, 32768));
    else if (k == "rx_mbufs") p.rx_mbufs = uint32_t(parse_uint(w, v, 0, 1u << 24));
    else if (k == "hdr_mbufs") p.hdr_mbufs = uint32_t(parse_uint(w, v, 0, 1u << 24));
    else if (k == "ext_mbufs") p.ext_mbufs = uint32_t(parse_uint(w, v, 0, 1u << 24));
    else if (k == "mbuf_cache") p.mbuf_cache = uint32_t(parse_uint(w, v, 0, 512));
    else if (k == "rx_data_room") p.rx_data_room = uint32_t(parse_uint(w, v, 0, 65535));
    else if (k == "tx_max_l3") p.tx_max_l3 = uint32_t(parse_uint(w, v, 0, 65535));
    else return false;
    return true;
}

bool device_key(const Where& w, const std::string& k, const std::string& v, DeviceConfig& d) {
    if (k == "driver") {
        if (v != "udp" && v != "dpdk") w.bad("expected udp or dpdk", v);
        d.driver = v;
    } else if (k == "address") {
        in_addr a{};
        if (inet_pton(AF_INET, v.c_str(), &a) != 1) w.bad("expected an IPv4 address", v);
        d.address = v;
    } else if (k == "planes") {
        // R-PLANE-1: "A, B, C": one IPv4 address per plane, plane 0 first.
        d.planes.clear();
        std::istringstream in(v);
        std::string entry;
        while (std::getline(in, entry, ',')) {
            const std::string ip = trim(entry);
            in_addr a{};
            if (ip.empty()) w.bad("empty entry (expected IPv4 addresses separated by commas)", v);
            if (inet_pton(AF_INET, ip.c_str(), &a) != 1) w.bad("'" + ip + "' is not an IPv4 address", v);
            for (const auto& s : d.planes)
                if (s == ip) w.bad("plane address " + ip + " listed twice", v);
            d.planes.push_back(ip);
            if (d.planes.size() > wire::kMaxPlanes)
                w.bad("more than " + std::to_string(wire::kMaxPlanes) + " planes", v);
        }
        if (!v.empty() && v.back() == ',') w.bad("empty entry (expected IPv4 addresses separated by commas)", v);
        if (d.planes.empty()) w.bad("expected one or more IPv4 addresses separated by commas", v);
        d.address = d.planes.front();
    } else if (k == "port") d.port = uint16_t(parse_uint(w, v, 1, 65535));
    else if (k == "path_port_base") d.path_port_base = uint16_t(parse_uint(w, v, 0, 65535));
    else if (k == "path_port_span") d.path_port_span = uint16_t(parse_uint(w, v, 1, 4096));
    else if (k == "progress") {
        if (v == "manual") d.progress = ProgressMode::manual;
        else if (v == "auto") d.progress = ProgressMode::automatic;
        else w.bad("expected manual or auto", v);
    } else if (k == "spin_us") d.spin_us = uint32_t(parse_uint(w, v, 0, 1'000'000));
    else if (k == "spin_yield") d.spin_yield = parse_bool(w, v);
    else if (k == "drive_handoff_us") d.drive_handoff_us = uint32_t(parse_uint(w, v, 0, 1'000'000));
    else if (k == "rx_batch") d.rx_batch = uint32_t(parse_uint(w, v, 1, 1024));
    else if (k == "gso") d.gso = parse_bool(w, v);
    else if (k == "gro") d.gro = parse_bool(w, v);
    else if (k == "verbs_part_id") d.verbs_part_id = uint32_t(parse_uint(w, v, 0, 0xffffffffu));
    else if (k == "inject_loss") d.inject_loss = parse_probability(w, v);
    else if (k == "inject_ce") d.inject_ce = parse_probability(w, v);
    else if (k == "inject_seed") d.inject_seed = parse_uint(w, v, 0, std::numeric_limits<uint64_t>::max());
    else if (dpdk_key(w, k, v, d.dpdk)) return true;
    else return engine_key(w, k, v, d.engine);
    return true;
}

void check_device(const std::string& origin, const DeviceConfig& d) {
    const auto bad = [&](const std::string& key, const std::string& why) {
        throw ConfigError(origin + ": device '" + d.name + "': key '" + key + "': " + why);
    };
    const uint32_t base = d.path_port_base ? d.path_port_base : uint32_t(d.port) + 1;
    if (base + d.path_port_span - 1 > 65535) bad("path_port_span", "path ports run past 65535");
    if (d.port >= base && d.port < base + d.path_port_span) bad("path_port_base", "path ports overlap the listen port");
    if (d.engine.min_rto > d.engine.max_rto) bad("min_rto_us", "larger than max_rto_us");
    if (std::max<size_t>(d.planes.size(), 1) * (size_t(d.path_port_span) + 1) > 32767)
        bad("path_port_span", "planes x (path_port_span + 1) sockets exceed 32767");
    if (d.engine.probe_interval > d.engine.probe_max_interval) bad("probe_interval_us", "larger than probe_max_interval_us");
    if (d.driver == "dpdk") {
        const DpdkDeviceConfig& p = d.dpdk;
        if (p.rx_data_room && p.rx_data_room <= 128)
            bad("rx_data_room", "must exceed the 128 B mbuf headroom (0: derived from max_payload)");
        // IPv4 + UDP + the largest mroce header + one segment must fit a sent frame.
        const uint32_t mp = d.engine.max_payload == kMaxPayloadAuto ? kDpdkAutoMaxPayload : d.engine.max_payload;
        const uint32_t l3 = 28 + 72 + mp;
        if (p.tx_max_l3 && p.tx_max_l3 < l3)
            bad("tx_max_l3", std::to_string(p.tx_max_l3) + " B cannot carry max_payload " + std::to_string(mp) +
                                 " (needs " + std::to_string(l3) + ")");
    }
}

// driver = dpdk with planes (R-PLANE-1): each plane is its own ethdev with
// its own neighbour table, so dpdk_port, neighbours and mac (when given)
// have one entry per plane, plane 0 first.
template <class Kv>
void check_dpdk_planes(const std::string& origin, const std::string& name, const DeviceConfig& d,
                       const std::vector<Kv>& kvs, const Kv* planes_kv) {
    const size_t np = std::max<size_t>(1, d.planes.size());
    const std::string planes_at = planes_kv ? " (key 'planes' at line " + std::to_string(planes_kv->line) + ")" : "";
    for (const auto& kv : kvs) {
        size_t n = 0;
        std::string what;
        if (kv.v.empty() && (np == 1 || kv.k == "dpdk_port")) continue;   // one plane: the only port, no neighbours
        if (kv.k == "dpdk_port") n = split_config_list(kv.v, ',').size(), what = "ethdev names or port ids, separated by commas";
        else if (kv.k == "neighbours") n = split_config_list(kv.v, '|').size(), what = "neighbour tables, separated by '|'";
        else if (kv.k == "mac" && !kv.v.empty()) n = split_config_list(kv.v, ',').size(), what = "MAC addresses, separated by commas";
        else continue;
        if (n != np)
            throw ConfigError(origin + ":" + std::to_string(kv.line) + ": key '" + kv.k + "': " + std::to_string(n) +
                              (n == 1 ? " entry" : " entries") + " for " + std::to_string(np) +
                              (np == 1 ? " plane" : " planes") + planes_at + " in device '" + name +
                              "': give one per plane, plane 0 first (" + what + ")");
    }
    if (np > 1 && d.dpdk.port.empty())
        throw ConfigError(origin + ":" + std::to_string(planes_kv->line) + ": key 'dpdk_port': needed with " +
                          std::to_string(np) + " planes in device '" + name +
                          "': one ethdev per plane, plane 0 first (e.g. net_memif0, net_memif1)");
}

// The stage lcores name stages the key pipeline runs, and two stages never share an lcore.
template <class Kv>
void check_pipeline(const std::string& origin, const std::string& name, const DeviceConfig& d,
                    const std::vector<Kv>& kvs) {
    const DpdkDeviceConfig& p = d.dpdk;
    for (const auto& kv : kvs) {
        const auto bad = [&](const std::string& why) {
            throw ConfigError(origin + ":" + std::to_string(kv.line) + ": key '" + kv.k + "': " + why + " (device '" +
                              name + "')");
        };
        if (kv.v.empty()) continue;   // unset: the EAL's worker lcores in order
        if (kv.k == "placement_lcore" && p.pipeline == PipelineMode::none)
            bad("no placement stage with pipeline = none (give pipeline = placement or placement+cc)");
        if (kv.k == "cc_lcore" && p.pipeline != PipelineMode::placement_cc)
            bad(std::string("no CC stage with pipeline = ") + to_string(p.pipeline) + " (give pipeline = placement+cc)");
        if (kv.k == "cc_lcore" && p.placement_lcore == p.cc_lcore)
            bad("lcore " + std::to_string(p.cc_lcore) + " is the placement stage's too (placement_lcore): each stage "
                "runs on an lcore of its own");
    }
}

}  // namespace

// "a, b" (sep ',') or "t0 | t1" (sep '|'): entries trimmed; a trailing
// separator gives an empty last entry.
std::vector<std::string> split_config_list(const std::string& v, char sep) {
    std::vector<std::string> out;
    std::istringstream in(v);
    for (std::string e; std::getline(in, e, sep);) out.push_back(trim(e));
    if (!v.empty() && v.back() == sep) out.push_back({});
    return out;
}

const DeviceConfig& Config::device(const std::string& name) const {
    if (devices.empty()) throw ConfigError(origin + ": no device configured");
    if (name.empty()) return devices.front();
    for (const auto& d : devices)
        if (d.name == name) return d;
    throw ConfigError(origin + ": no device named '" + name + "'");
}

Config parse_config(std::string_view text, const std::string& origin) {
    Config cfg;
    cfg.origin = origin;
    // [engine] keys apply to every device whatever the order of the sections,
    // so they are replayed before each device's own keys.
    struct Kv {
        size_t line;
        std::string k, v;
    };
    std::vector<Kv> engine_kvs;
    std::vector<std::pair<std::string, std::vector<Kv>>> devs;
    enum { none, engine, device } sec = none;
    size_t engine_line = 0;   // where [engine] was opened (a second one is refused)
    std::vector<size_t> dev_lines;
    // Keys of the section being read, with their lines: a key given twice
    // would otherwise silently take the last value.
    std::map<std::string, size_t> keys_seen;
    std::string sec_name;
    size_t lineno = 0;
    std::istringstream in{std::string(text)};
    std::string raw;
    while (std::getline(in, raw)) {
        ++lineno;
        std::string line = trim(raw);
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line[0] == '[') {
            if (line.back() != ']')
                throw ConfigError(origin + ":" + std::to_string(lineno) + ": section header without ']'");
            const std::string name = trim(std::string_view(line).substr(1, line.size() - 2));
            keys_seen.clear();
            if (name == "engine") {
                if (engine_line)
                    throw ConfigError(origin + ":" + std::to_string(lineno) +
                                      ": section [engine] repeated (first at line " + std::to_string(engine_line) +
                                      "); give each key once, in one [engine]");
                engine_line = lineno;
                sec = engine;
                sec_name = "[engine]";
            } else if (name == "device" || name.rfind("device ", 0) == 0 || name.rfind("device\t", 0) == 0) {
                std::string dn = trim(std::string_view(name).substr(6));
                if (dn.empty()) dn = "default";
                for (size_t i = 0; i < devs.size(); ++i)
                    if (devs[i].first == dn)
                        throw ConfigError(origin + ":" + std::to_string(lineno) + ": device '" + dn +
                                          "' defined twice (first at line " + std::to_string(dev_lines[i]) + ")");
                devs.emplace_back(dn, std::vector<Kv>{});
                dev_lines.push_back(lineno);
                sec = device;
                sec_name = "[device " + dn + "]";
            } else
                throw ConfigError(origin + ":" + std::to_string(lineno) + ": unknown section [" + name +
                                  "] (expected [engine] or [device NAME])");
            continue;
        }
        const size_t eq = line.find('=');
        if (eq == std::string::npos)
            throw ConfigError(origin + ":" + std::to_string(lineno) + ": expected 'key = value', got '" + line + "'");
        std::string k = trim(std::string_view(line).substr(0, eq));
        std::string v = trim(std::string_view(line).substr(eq + 1));
        if (const size_t h = v.find(" #"); h != std::string::npos) v = trim(std::string_view(v).substr(0, h));
        if (k.empty()) throw ConfigError(origin + ":" + std::to_string(lineno) + ": empty key");
        if (sec == none)
            throw ConfigError(origin + ":" + std::to_string(lineno) + ": key '" + k +
                              "' outside a section ([engine] or [device NAME])");
        if (const auto [it, fresh] = keys_seen.emplace(k, lineno); !fresh)
            throw ConfigError(origin + ":" + std::to_string(lineno) + ": key '" + k + "': repeated in " + sec_name +
                              " (first at line " + std::to_string(it->second) + ")");
        if (sec == engine) {
            EngineConfig scratch;
            if (!engine_key(Where{origin, lineno, k}, k, v, scratch))
                throw ConfigError(origin + ":" + std::to_string(lineno) + ": key '" + k +
                                  "': unknown in [engine]");
            engine_kvs.push_back({lineno, k, v});
        } else
            devs.back().second.push_back({lineno, k, v});
    }
    if (devs.empty()) devs.emplace_back("default", std::vector<Kv>{});
    for (const auto& [name, kvs] : devs) {
        DeviceConfig d;
        d.name = name;
        for (const auto& kv : engine_kvs) engine_key(Where{origin, kv.line, kv.k}, kv.k, kv.v, d.engine);
        const Kv* dpdk_only = nullptr;
        const Kv* address_kv = nullptr;
        const Kv* planes_kv = nullptr;
        for (const auto& kv : kvs) {
            if (kv.k == "address") address_kv = &kv;
            if (kv.k == "planes") planes_kv = &kv;
            if (!device_key(Where{origin, kv.line, kv.k}, kv.k, kv.v, d))
                throw ConfigError(origin + ":" + std::to_string(kv.line) + ": key '" + kv.k +
                                  "': unknown in [device " + name + "]");
            DpdkDeviceConfig scratch;
            if (!dpdk_only && dpdk_key(Where{origin, kv.line, kv.k}, kv.k, kv.v, scratch)) dpdk_only = &kv;
        }
        if (address_kv && planes_kv)
            throw ConfigError(origin + ":" + std::to_string(std::max(address_kv->line, planes_kv->line)) +
                              ": key '" + (address_kv->line > planes_kv->line ? "address" : "planes") +
                              "': give either address (one plane) or planes (one address per plane), not both "
                              "(device '" + name + "')");
        if (d.driver == "dpdk") check_dpdk_planes(origin, name, d, kvs, planes_kv);
        if (d.driver == "dpdk") check_pipeline(origin, name, d, kvs);
        if (dpdk_only && d.driver != "dpdk")
            throw ConfigError(origin + ":" + std::to_string(dpdk_only->line) + ": key '" + dpdk_only->k +
                              "': only for driver = dpdk (device '" + name + "' uses " + d.driver + ")");
        check_device(origin, d);
        cfg.devices.push_back(std::move(d));
    }
    return cfg;
}

Config load_config_file(const std::string& path) {
    // open + fstat + read rather than an ifstream: a stream opens a directory
    // and reads it as an empty file (every key at its default), and says
    // nothing of why a file could not be read.
    const auto fail = [&](const std::string& why) -> Config {
        throw ConfigError(path + ": cannot read configuration file: " + why);
    };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail(std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat sb{};
    if (::fstat(fd, &sb) != 0) return fail(std::strerror(errno));
    if (S_ISDIR(sb.st_mode)) return fail("it is a directory");
    if (!S_ISREG(sb.st_mode) && !S_ISFIFO(sb.st_mode) && !S_ISCHR(sb.st_mode))
        return fail("not a regular file");
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            text.append(buf, size_t(n));
            if (text.size() > (16u << 20)) return fail("larger than 16 MiB");
        } else if (n == 0) {
            break;
        } else if (errno != EINTR) {
            return fail(std::strerror(errno));
        }
    }
    return parse_config(text, path);
}

Config load_config(const std::string& path) {
    if (!path.empty()) return load_config_file(path);
    if (const char* env = std::getenv("MROCE_CONFIG"); env && *env) return load_config_file(env);
    Config c = parse_config("", "built-in defaults");
    return c;
}

}  // namespace mroce
