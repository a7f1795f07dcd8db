// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// DpdkTransport: the native API's Transport over one DpdkPort per plane
// (dpdk::PlanePorts; one plane: one port), for DeviceConfig::driver == "dpdk". Part of the device factory (lib/api cannot
// see drivers/, and drivers/dpdk does not know the native API).
//
// The EAL can be initialised once per process: the first dpdk device does it
// from its eal_args and lcores keys, later devices must name the same ones
// (and another port); it is shut down at process exit.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_pause.h>

#include "mroce/api.hpp"
#include "mroce/dpdk/cc_stage.hpp"
#include "mroce/dpdk/eal.hpp"
#include "mroce/dpdk/lcores.hpp"
#include "mroce/dpdk/planes.hpp"
#include "mroce/dpdk/loop.hpp"
#include "mroce/dpdk/pipeline.hpp"
#include "mroce/dpdk/port.hpp"

namespace mroce {

namespace {

std::string trim_blanks(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t");
    if (a == std::string::npos) return {};
    return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

std::vector<std::string> split_blanks(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string a; in >> a;) out.push_back(a);
    return out;
}

// A PCI address among the EAL arguments (-a/--allow, the legacy -w), for the NIC's NUMA node.
std::string pci_of(const std::vector<std::string>& args, const std::string& port) {
    const auto is_pci = [](const std::string& s) {
        return s.find(':') != std::string::npos && s.find('.') != std::string::npos && s.rfind("net_", 0) != 0;
    };
    if (is_pci(port)) return port;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string v;
        if ((args[i] == "-a" || args[i] == "-w" || args[i] == "--allow") && i + 1 < args.size()) v = args[i + 1];
        else if (args[i].rfind("--allow=", 0) == 0) v = args[i].substr(8);
        else if (args[i].rfind("-a", 0) == 0 && args[i].size() > 2) v = args[i].substr(2);
        if (!v.empty()) return v.substr(0, v.find(','));   // drop devargs
    }
    // A vdev over a kernel interface (net_af_packet, net_af_xdp: iface=NAME): the
    // PCI device behind it, if any (a veth has none: NUMA node unknown).
    for (const auto& a : args) {
        const size_t at = a.rfind("--vdev", 0) == 0 ? a.find("iface=") : std::string::npos;
        if (at == std::string::npos) continue;
        const std::string ifname = a.substr(at + 6, a.find(',', at) - (at + 6));
        std::error_code ec;
        const auto dev = std::filesystem::read_symlink("/sys/class/net/" + ifname + "/device", ec);
        if (!ec && is_pci(dev.filename().string())) return dev.filename().string();
    }
    return {};
}

struct EalSession {
    std::mutex mu;
    bool ours = false;
    std::string eal_args, lcores, owner;
    std::vector<std::string> used;
};
EalSession& eal_session() {
    static EalSession s;
    return s;
}

void eal_at_exit() { dpdk::eal_cleanup(); }

// Brings the EAL up for this device (or checks it is up with the same arguments).
void ensure_eal(const DeviceConfig& cfg, const std::string& who) {
    EalSession& s = eal_session();
    std::lock_guard<std::mutex> g(s.mu);
    if (dpdk::eal_initialised()) {
        if (s.ours && (s.eal_args != cfg.dpdk.eal_args || s.lcores != cfg.dpdk.lcores))
            throw Error(who + ": the EAL is already initialised in this process by device '" + s.owner +
                        "' with other eal_args/lcores (DPDK initialises once per process: give both the same)");
        return;   // up, ours with the same arguments, or brought up by the embedding program
    }
    std::vector<std::string> args = split_blanks(cfg.dpdk.eal_args);
    if (const std::string bad = dpdk::memif_buffer_problem(args, 14 + 20 + 8 + 72 + cfg.engine.max_payload);
        !bad.empty())
        throw Error(who + ": key 'eal_args': " + bad);
    // Plane 0's port places the lcore (one lcore drives every plane).
    const std::string pci = pci_of(args, trim_blanks(cfg.dpdk.port.substr(0, cfg.dpdk.port.find(','))));
    // One busy lcore: manual progress and the automatic engine thread both drive
    // the engine from one thread (the EAL main lcore in manual mode); the
    // pipeline arrangement adds one per stage (placement, CC).
    const PipelineMode pm = cfg.dpdk.pipeline;
    const unsigned want = 1 + (pm != PipelineMode::none) + (pm == PipelineMode::placement_cc);
    std::string placement;
    if (cfg.dpdk.lcores == "auto") {
        const dpdk::Topology topo = dpdk::machine_topology(pci);
        const dpdk::LcoreChoice ch = dpdk::choose_lcores(topo, want);
        if (ch.cpus.empty()) throw Error(who + ": lcores = auto: no CPU found to run on");
        const auto a = ch.eal_args();
        args.insert(args.begin(), a.begin(), a.end());
        placement = "auto: " + ch.describe(topo);
    } else if (cfg.dpdk.lcores.find_first_of("@(") != std::string::npos) {
        // An lcore map (lcore sets @ CPU sets): the EAL's --lcores checks it.
        args.insert(args.begin(), {"--lcores", cfg.dpdk.lcores});
        placement = "from configuration (lcores = " + cfg.dpdk.lcores + ", an lcore map)";
    } else {
        try {
            dpdk::parse_core_list(cfg.dpdk.lcores);
        } catch (const std::exception& e) {
            throw Error(who + ": key 'lcores': " + e.what());
        }
        args.insert(args.begin(), {"-l", cfg.dpdk.lcores});
        placement = "from configuration (lcores = " + cfg.dpdk.lcores + ")";
    }
    dpdk::EalConfig ec;
    ec.program = "mroce";
    ec.args = args;
    ec.memory_mb = cfg.dpdk.eal_memory_mb;
    try {
        s.used = dpdk::eal_init(ec);
    } catch (const std::exception& e) {
        // The EAL does not say which argument it refused: name both keys that built them.
        throw Error(who + ": keys 'eal_args' / 'lcores': " + e.what());
    }
    s.ours = true;
    s.eal_args = cfg.dpdk.eal_args;
    s.lcores = cfg.dpdk.lcores;
    s.owner = cfg.name;
    std::atexit(eal_at_exit);
    std::string joined;
    for (const auto& a : s.used) joined += (joined.empty() ? "" : " ") + a;
    std::fprintf(stderr, "mroce dpdk: lcores %s\nmroce dpdk: EAL %s\n", placement.c_str(), joined.c_str());
}

// The ethdev of one plane: a name (net_memif0, a PCI address) or a port id;
// empty: the only port there is.
uint16_t find_port(const std::string& p, const std::string& who) {
    std::string names;
    uint16_t id;
    RTE_ETH_FOREACH_DEV(id) {
        char name[RTE_ETH_NAME_MAX_LEN] = {};
        rte_eth_dev_get_name_by_port(id, name);
        names += fmt::format("{}{} ({})", names.empty() ? "" : ", ", id, name);
    }
    if (names.empty()) names = "none";
    if (p.empty()) {
        if (rte_eth_dev_count_avail() != 1)
            throw Error(who + ": key 'dpdk_port' is needed: " + std::to_string(rte_eth_dev_count_avail()) +
                        " ports available: " + names);
        return uint16_t(rte_eth_find_next(0));
    }
    if (std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        const unsigned long v = std::strtoul(p.c_str(), nullptr, 10);
        if (v >= RTE_MAX_ETHPORTS || !rte_eth_dev_is_valid_port(uint16_t(v)))
            throw Error(who + ": key 'dpdk_port': no port " + p + " (ports: " + names + ")");
        return uint16_t(v);
    }
    uint16_t pid = 0;
    if (rte_eth_dev_get_port_by_name(p.c_str(), &pid) != 0)
        throw Error(who + ": key 'dpdk_port': no port named '" + p + "' (ports: " + names + ")");
    return pid;
}

std::vector<dpdk::Neighbour> parse_neighbours(const std::string& s) {
    std::vector<dpdk::Neighbour> out;
    std::istringstream in(s);
    for (std::string entry; std::getline(in, entry, ',');) {
        std::istringstream e(entry);
        std::string ip, mac;
        if (!(e >> ip >> mac)) continue;
        out.push_back({dpdk::parse_ipv4(ip), dpdk::parse_mac(mac)});
    }
    return out;
}

// One plane of the device: its ethdev, claimed for this device.
struct PlanePort {
    std::string name;   // ethdev name
    int claimed = -1;
    std::unique_ptr<dpdk::DpdkPort> port;
};

class DpdkTransport final : public Transport {
public:
    // The EAL comes first: the TSC clock member needs it.
    explicit DpdkTransport(const DeviceConfig& cfg)
        : who_("device '" + cfg.name + "' (dpdk)"), eal_up_((ensure_eal(cfg, who_), true)) {
        const DpdkDeviceConfig& d = cfg.dpdk;
        // R-PLANE-1: one ethdev, local address and neighbour table per plane
        // (parse_config checked the counts; a DeviceConfig built in code is checked here).
        const size_t np = std::max<size_t>(1, cfg.planes.size());
        const std::vector<std::string> addrs = cfg.planes.empty() ? std::vector<std::string>{cfg.address} : cfg.planes;
        std::vector<std::string> names = np > 1 ? split_config_list(d.port, ',') : std::vector<std::string>{d.port};
        std::vector<std::string> tables = np > 1 ? split_config_list(d.neighbours, '|') : std::vector<std::string>{d.neighbours};
        std::vector<std::string> macs = np > 1 ? split_config_list(d.mac, ',') : std::vector<std::string>{d.mac};
        if (np > 1 && d.mac.empty()) macs.assign(np, {});
        if (names.size() != np || tables.size() != np || macs.size() != np)
            throw Error(who_ + ": " + std::to_string(np) + " planes need one entry per plane in keys 'dpdk_port' (" +
                        std::to_string(names.size()) + " given), 'neighbours' (" + std::to_string(tables.size()) +
                        " tables, separated by '|') and 'mac' (" + std::to_string(macs.size()) + ", or none)");
        planes_.resize(np);
        try {
            for (size_t p = 0; p < np; ++p) open_plane(cfg, p, names[p], addrs[p], tables[p], macs[p]);
        } catch (...) {
            close_planes();
            throw;
        }
        std::vector<dpdk::DpdkPort*> ports;
        for (auto& pl : planes_) ports.push_back(pl.port.get());
        planes_io_ = std::make_unique<dpdk::PlanePorts>(std::move(ports));
        if (np == 1 && planes_[0].port->config().rx_queues == 1) rx_single_ = rx_direct_ = planes_[0].port.get();
        spin_ns_ = Time(cfg.spin_us) * 1000;
        dcfg_ = d;
        origin_.resize(1024);
        for (auto& pl : planes_) at_open_.push_back(pl.port->pool_usage());
    }

    ~DpdkTransport() override {
        planes_io_->rx_release_all();
        for (size_t p = 0; p < planes_.size(); ++p) {
            const dpdk::PoolUsage u = planes_[p].port->pool_usage();
            const dpdk::PoolUsage& a = at_open_[p];
            if (u != a)
                std::fprintf(stderr, "mroce dpdk: %s: port %s: mbufs in use at close rx %u hdr %u ext %u, at open "
                             "%u %u %u\n", who_.c_str(), planes_[p].name.c_str(), u.rx, u.hdr, u.ext, a.rx, a.hdr, a.ext);
        }
        planes_io_.reset();
        close_planes();
    }

    Time now() noexcept override { return clock_.now(); }
    // All planes' ports and all their queues from this one thread: per-path TX
    // queues on the packet's plane, RX from every queue of every plane.
    size_t recv_burst(RxPacket* out, size_t max) override {
        // One plane, one RX queue, no placement stage (every ping-pong's
        // device): the port's receive at once, without the plane and queue
        // dispatch in front of every poll (round 43).
        // The rest out of line: inlined, its saved registers were saved
        // before this test too.
        if (rx_direct_) [[likely]] return rx_direct_->rx_burst(0, out, max);
        return recv_planes(out, max);
    }
    [[gnu::noinline]] size_t recv_planes(RxPacket* out, size_t max) noexcept {
        if (!staged_) return planes_io_->rx_burst(out, max);
        const size_t n = planes_io_->rx_burst(out, std::min(max, origin_.size()));
        // Where each datagram's mbuf is, for the placement stage (rx_take):
        // each (plane, queue) polled gave one run of the burst, in order.
        const bool planes = planes_.size() > 1;
        size_t start = 0;
        for (size_t x = 0; x < n; ++x) {
            const uint8_t plane = planes ? out[x].plane : 0;
            const uint16_t q = out[x].local_path;
            if (x && (plane != origin_[x - 1].plane || q != origin_[x - 1].queue)) start = x;
            origin_[x] = Origin{plane, q, uint32_t(x - start)};
        }
        return n;
    }
    std::unique_ptr<PipelineStages> start_stages(PipelineMode mode, const EngineConfig& engine) override;
    // Pipeline: the mbuf of datagram i of the last recv_burst, out of what the
    // next receive frees (the caller owns it); *payload_off: the UDP payload's offset in the frame.
    rte_mbuf* take_rx(uint32_t i, uint32_t* payload_off) noexcept {
        if (i >= origin_.size()) return nullptr;
        const Origin& o = origin_[i];
        return planes_[o.plane].port->rx_take(o.queue, o.idx, payload_off);
    }
    void set_staged(bool on) noexcept {
        staged_ = on;
        rx_direct_ = on ? nullptr : rx_single_;
    }
    size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) override {
        return planes_io_->tx_burst(pkts, n, unsent);
    }
    // Busy-poll for spin_us after activity (an lcore is dedicated to this),
    // then nap at most 50 us at a time so an idle device yields a shared CPU;
    // wake() therefore needs no file descriptor: a nap ends on its own.
    bool idle(bool active, Time now, Time deadline) override {
        // The flag read before it is cleared: a spinning poller's every
        // empty pass did a locked exchange (round 33).
        if (active || (woken_.load(std::memory_order_relaxed) && woken_.exchange(false, std::memory_order_relaxed))) {
            spin_.reopen();  // now unused after work (DrivePort)
            return false;
        }
        if (spin_.idle_for(now) < spin_ns_) {
            rte_pause();
            return false;
        }
        const Time nap = std::min<Time>(deadline > now ? deadline - now : 0, 50'000);
        if (nap < 2'000) return false;
        const timespec ts{0, long(nap)};
        ::nanosleep(&ts, nullptr);
        return true;
    }
    void wake() override { woken_.store(true, std::memory_order_relaxed); }
    uint32_t resolve_peer(const std::string& ip, uint16_t port) override {
        uint8_t known = 1;
        return resolve_peer(std::vector<PeerAddress>{PeerAddress{ip, port}}, known);
    }
    // R-PLANE-6: the peer on each of its planes, plane 0 first.
    uint32_t resolve_peer(const std::vector<PeerAddress>& planes, uint8_t& known) override {
        const uint16_t own = planes_[0].port->config().udp_port;
        std::vector<uint32_t> ips;
        for (const PeerAddress& a : planes) {
            if (a.port != own)
                throw Error(fmt::format("peer {}:{}: a dpdk device sends to its own UDP port {} (every device of "
                                        "one DPDK fabric uses the same port, each its own address)",
                                        a.ip, a.port, own));
            try {
                ips.push_back(dpdk::parse_ipv4(a.ip));
            } catch (const std::exception& e) {
                throw Error(std::string("peer address: ") + e.what());
            }
        }
        try {
            return planes_io_->add_peer(ips.data(), ips.size(), known);
        } catch (const std::exception& e) {
            throw Error(e.what());
        }
    }
    std::string peer_name(uint32_t peer) const override {
        uint32_t ip = 0;
        size_t plane = 0;
        if (!planes_io_->peer_address(peer, ip, plane)) return "peer#" + std::to_string(peer);
        return dpdk::format_ipv4(ip) + ":" + std::to_string(planes_[0].port->config().udp_port);
    }
    TransportStats stats() const override {
        dpdk::PortStats s;
        for (const auto& pl : planes_) s += pl.port->stats();
        TransportStats t;
        t.tx_packets = s.tx_packets;
        t.tx_bytes = s.tx_bytes;
        t.tx_errors = s.tx_bad_peer + s.tx_bad_len + s.tx_no_mbuf;
        t.tx_syscalls = s.tx_bursts;
        t.rx_packets = s.rx_packets;
        t.rx_bytes = s.rx_bytes;
        t.rx_truncated = s.rx_too_big;
        t.rx_errors = s.rx_dropped() - s.rx_too_big;
        return t;
    }
    // R-PLANE-5: each plane is its port; its counters are the port's.
    size_t num_planes() const noexcept override { return planes_.size(); }
    uint32_t tx_payload_held(Time wait_ns) override {
        const Time end = clock_.now() + wait_ns;
        uint32_t held = 0;
        for (auto& pl : planes_) {
            const Time now = clock_.now();
            held += pl.port->tx_payload_held(end > now ? (end - now) / 1000 : 0);
        }
        return held;
    }
    PlaneInfo plane_info(size_t plane) const override {
        PlaneInfo i;
        if (plane >= planes_.size()) return i;
        const dpdk::DpdkPort& p = *planes_[plane].port;
        const dpdk::PortStats s = p.stats();
        i.address = dpdk::format_ipv4(p.config().local_ip);
        i.tx_packets = s.tx_packets;
        i.tx_bytes = s.tx_bytes;
        i.rx_packets = s.rx_packets;
        i.rx_bytes = s.rx_bytes;
        return i;
    }
    std::string describe() const override {
        std::string out;
        for (size_t pl = 0; pl < planes_.size(); ++pl) {
            const dpdk::DpdkPort& port = *planes_[pl].port;
            const auto& c = port.config();
            const auto& caps = port.caps();
            const auto mac = port.mac();
            if (planes_.size() > 1) out += fmt::format("{}plane {}: ", pl ? "; " : "", pl);
            out += fmt::format("dpdk {} (port {}, {}) {}:{} mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, {} neighbours, "
                               "tx up to {} B, {} rx / {} tx queues{}", planes_[pl].name, c.port_id, caps.driver,
                               dpdk::format_ipv4(c.local_ip), c.udp_port, mac[0], mac[1], mac[2], mac[3], mac[4], mac[5],
                               c.neighbours.size(), caps.tx_max_l3, c.rx_queues, c.tx_queues,
                               c.rx_queues > 1 ? (caps.rss_udp ? " (RSS on UDP ports)"
                                                               : " (no RSS: queue = peer's TX queue)")
                                               : "");
        }
        return out;
    }

private:
    static std::vector<uint16_t>& ports_in_use() {
        static std::vector<uint16_t> v;
        return v;
    }

    void open_plane(const DeviceConfig& cfg, size_t p, const std::string& port, const std::string& address,
                    const std::string& table, const std::string& mac) {
        const DpdkDeviceConfig& d = cfg.dpdk;
        PlanePort& pl = planes_[p];
        const std::string who = planes_.size() > 1 ? who_ + ", plane " + std::to_string(p) : who_;
        dpdk::PortConfig pc;
        pc.port_id = find_port(port, who);
        char name[RTE_ETH_NAME_MAX_LEN] = {};
        rte_eth_dev_get_name_by_port(pc.port_id, name);
        pl.name = name;
        {
            EalSession& s = eal_session();
            std::lock_guard<std::mutex> g(s.mu);
            // Its queues are this device's: a second device (or plane) on it would steal frames.
            for (uint16_t u : ports_in_use())
                if (u == pc.port_id)
                    throw Error(who + ": key 'dpdk_port': port " + pl.name + " is already used by another " +
                                "device or plane");
            ports_in_use().push_back(pc.port_id);
        }
        pl.claimed = pc.port_id;
        try {
            pc.local_ip = dpdk::parse_ipv4(address);
            pc.udp_port = cfg.port;
            if (!mac.empty()) {
                pc.local_mac_from_port = false;
                pc.local_mac = dpdk::parse_mac(mac);
            }
            pc.neighbours = parse_neighbours(table);
            pc.rx_queues = d.rx_queues;
            pc.tx_queues = d.tx_queues;
            pc.rx_desc = d.rx_desc;
            pc.tx_desc = d.tx_desc;
            pc.burst = uint16_t(std::min<uint32_t>(cfg.rx_batch, 1024));
            pc.tx_max_l3 = d.tx_max_l3;
            // Small payloads are copied into the header mbuf: the threshold up to
            // which the receiving engine places inline too (a copy that small is
            // cheaper than a second mbuf's alloc, attach and free).
            pc.tx_inline_max = uint16_t(std::min<uint32_t>(cfg.engine.place_inline_max, 1024));
            // One whole frame of the largest segment per RX mbuf: no chained frames, no linearising copy.
            const uint32_t frame = 14 + 20 + 8 + 72 + cfg.engine.max_payload;
            const uint32_t room = d.rx_data_room ? d.rx_data_room : RTE_PKTMBUF_HEADROOM + ((frame + 63) / 64) * 64;
            pc.pools.rx_data_room = uint16_t(std::min<uint32_t>(room, 65535));
            pc.pools.cache = d.mbuf_cache;
            const dpdk::PoolConfig need = dpdk::DpdkPort::min_pools(pc);
            // RX twice the minimum: a frame above one RX buffer (an rx_data_room set
            // below the frame size, or a PMD that splits) takes several.
            pc.pools.rx_mbufs = d.rx_mbufs ? d.rx_mbufs : 2 * need.rx_mbufs;
            // Pipeline: up to place_depth received mbufs wait for their copy,
            // and the placement lcore's own mempool cache holds some it freed.
            if (d.pipeline != PipelineMode::none && !d.rx_mbufs)
                pc.pools.rx_mbufs += cfg.engine.place_depth + 2 * d.mbuf_cache;
            pc.pools.hdr_mbufs = d.hdr_mbufs ? d.hdr_mbufs : need.hdr_mbufs;
            pc.pools.ext_mbufs = d.ext_mbufs ? d.ext_mbufs : need.ext_mbufs;
            pl.port = std::make_unique<dpdk::DpdkPort>(pc);
        } catch (const std::exception& e) {
            std::string hint;
            if (pl.name.rfind("net_memif", 0) == 0 && std::string(e.what()).find("rte_eth_dev_start") != std::string::npos)
                hint = " (a net_memif client starts only once its server's socket exists: start the server first)";
            throw Error(who + ", port " + pl.name + ": " + e.what() + hint);
        }
        const uint32_t l3 = 28 + 72 + cfg.engine.max_payload;
        if (const uint32_t max_l3 = pl.port->caps().tx_max_l3; max_l3 < l3)
            throw Error(who + ", port " + pl.name + ": key 'tx_max_l3': the port sends IPv4 datagrams up to " +
                        std::to_string(max_l3) + " B (MTU), max_payload " +
                        std::to_string(cfg.engine.max_payload) + " needs " + std::to_string(l3) +
                        " (raise the MTU, set tx_max_l3 for software PMDs, or lower max_payload)");
    }

    // In reverse: plane 0 last (its port was opened first).
    void close_planes() noexcept {
        for (size_t p = planes_.size(); p-- > 0;) {
            PlanePort& pl = planes_[p];
            pl.port.reset();
            if (pl.claimed < 0) continue;
            std::lock_guard<std::mutex> g(eal_session().mu);
            std::erase(ports_in_use(), uint16_t(pl.claimed));
            pl.claimed = -1;
        }
    }

    // Pipeline: where datagram x of the last recv_burst came from.
    struct Origin {
        uint8_t plane = 0;
        uint16_t queue = 0;
        uint32_t idx = 0;   // in that queue's rx_burst
    };
    std::string who_;
    bool eal_up_;
    DpdkDeviceConfig dcfg_;
    bool staged_ = false;
    // The port when the device has one plane with one RX queue, else null;
    // rx_direct_: the same while no placement stage needs origin_.
    dpdk::DpdkPort* rx_single_ = nullptr;
    dpdk::DpdkPort* rx_direct_ = nullptr;
    std::vector<Origin> origin_;
    std::vector<PlanePort> planes_;
    std::unique_ptr<dpdk::PlanePorts> planes_io_;
    dpdk::TscClock clock_;
    std::vector<dpdk::PoolUsage> at_open_;
    Time spin_ns_ = 0;
    SpinWindow spin_;
    std::atomic<bool> woken_{false};
};

// The pipeline arrangement of a dpdk device (key pipeline; architecture 4.2):
// the placement stage and, with placement+cc, the CC stage, each on an EAL
// worker lcore of its own (rte_eal_remote_launch through dpdk::StageLcore),
// over the driver's SP/SC rte_rings. A copy's received mbuf leaves the port's
// RX release (rx_take) when the loop submits the copy, in the pass that
// received it, and the placement lcore frees it after the copy.
class DpdkStages final : public PipelineStages {
public:
    // Errors are ConfigErrors naming the key (the Device adds its name).
    DpdkStages(DpdkTransport& t, PipelineMode mode, const EngineConfig& engine, const DpdkDeviceConfig& d)
        : t_(t), rings_(name("pl"), engine.place_depth) {
        const bool cc = mode == PipelineMode::placement_cc;
        if (cc) cc_rings_ = std::make_unique<dpdk::CcRings>(name("cc"), engine.cc);
        const unsigned main = rte_get_main_lcore();
        const auto lcores_seen = [&] {
            std::string l;
            unsigned lc;
            RTE_LCORE_FOREACH(lc) l += (l.empty() ? "" : ", ") + std::to_string(lc) + (lc == main ? " (main)" : "");
            return "the EAL's lcores: " + l + " (key 'lcores' = " + d.lcores + ")";
        };
        const unsigned first = rte_get_next_lcore(-1, 1, 0);
        const unsigned pl = d.placement_lcore >= 0 ? unsigned(d.placement_lcore) : first;
        unsigned cl = RTE_MAX_LCORE;
        if (cc) {
            cl = d.cc_lcore >= 0 ? unsigned(d.cc_lcore) : first;
            while (d.cc_lcore < 0 && cl == pl) cl = rte_get_next_lcore(cl, 1, 0);
        }
        const auto check = [&](unsigned lc, int32_t given, const char* key, const char* stage) {
            const std::string k = given >= 0 ? std::string("key '") + key + "'" : std::string("key 'lcores'");
            if (lc >= RTE_MAX_LCORE)
                throw ConfigError(k + ": pipeline = " + to_string(mode) + " needs " +
                                  std::to_string(cc ? 3 : 2) + " EAL lcores (the engine's and one per stage); " +
                                  lcores_seen());
            if (!rte_lcore_is_enabled(lc))
                throw ConfigError(k + ": the " + stage + " stage's lcore " + std::to_string(lc) +
                                  " is not an EAL lcore; " + lcores_seen());
            if (lc == main)
                throw ConfigError(k + ": the " + stage + " stage's lcore " + std::to_string(lc) +
                                  " is the EAL main lcore (the engine loop's); " + lcores_seen());
        };
        check(pl, d.placement_lcore, "placement_lcore", "placement");
        if (cc) check(cl, d.cc_lcore, "cc_lcore", "CC");
        place_.add(rings_);
        const auto launch_error = [&](const std::exception& e, const char* key, int32_t given) {
            return ConfigError(std::string("key '") + (given >= 0 ? key : "lcores") + "': " + e.what() +
                               " (an lcore runs one stage of one device)");
        };
        try {
            on_place_ = std::make_unique<dpdk::StageLcore<dpdk::PlacementStage>>(place_, pl);
        } catch (const dpdk::DpdkError& e) {
            throw launch_error(e, "placement_lcore", d.placement_lcore);
        }
        if (cc) {
            cc_.add(*cc_rings_);
            try {
                on_cc_ = std::make_unique<dpdk::StageLcore<dpdk::CcStage>>(cc_, cl);
            } catch (const dpdk::DpdkError& e) {
                on_place_.reset();
                throw launch_error(e, "cc_lcore", d.cc_lcore);
            }
        }
        where_ = "placement on lcore " + std::to_string(pl) + (cc ? ", CC on lcore " + std::to_string(cl) : "") +
                 ", the engine loop on the thread that drives the device (manual progress: the EAL main lcore " +
                 std::to_string(main) + ")";
        inline_done_.reserve(engine.place_depth);
        t_.set_staged(true);
    }
    ~DpdkStages() override {
        // Quiesce: each stage lcore empties its input ring (every copy made,
        // every mbuf freed) and returns, before the port can close.
        on_cc_.reset();
        on_place_.reset();
        t_.set_staged(false);
    }

    void submit(const PlaceJob* jobs, size_t n, Time now) override {
        size_t k = 0;
        for (size_t i = 0; i < n; ++i) {
            const PlaceJob& j = jobs[i];
            uint32_t off = 0;
            rte_mbuf* m = t_.take_rx(j.cookie, &off);
            if (!m) [[unlikely]] {
                // Not the port's to give (never expected): copy now, while the burst is valid.
                std::memcpy(j.dst, j.src, j.len);
                inline_done_.push_back(j.token);
                continue;
            }
            work_[k++] = dpdk::PlaceWork{j.dst, m, off + j.src_off, j.len, j.token, 0};
            if (k == kBurst) {
                rings_.submit(work_, k, now);
                k = 0;
            }
        }
        if (k) rings_.submit(work_, k, now);
    }
    size_t take_done(uint32_t* tokens, size_t max, Time now) override {
        size_t n = 0;
        while (!inline_done_.empty() && n < max) {
            tokens[n++] = inline_done_.back();
            inline_done_.pop_back();
        }
        return n + rings_.take_done(tokens + n, max - n, now);
    }
    size_t exchange(Engine& eng, Time now) override { return cc_rings_ ? cc_rings_->exchange(eng, now) : 0; }
    bool cc_pending() const noexcept override {
        return cc_rings_ && (rte_ring_count(cc_rings_->feedback()) || rte_ring_count(cc_rings_->views()));
    }
    uint64_t copies() const noexcept override { return place_.copies(); }
    uint64_t cc_records() const noexcept override { return cc_rings_ ? cc_.records() : 0; }
    std::string describe() const override { return where_; }

private:
    static constexpr size_t kBurst = 32;
    static std::string name(const char* what) {
        static std::atomic<unsigned> seq{0};
        return fmt::format("mroce_{}{}", what, seq.fetch_add(1));
    }
    DpdkTransport& t_;
    dpdk::PlacementRings rings_;
    std::unique_ptr<dpdk::CcRings> cc_rings_;
    dpdk::PlacementStage place_;
    dpdk::CcStage cc_;
    dpdk::PlaceWork work_[kBurst];
    std::vector<uint32_t> inline_done_;
    std::string where_;
    // Last: stopped first.
    std::unique_ptr<dpdk::StageLcore<dpdk::PlacementStage>> on_place_;
    std::unique_ptr<dpdk::StageLcore<dpdk::CcStage>> on_cc_;
};

std::unique_ptr<PipelineStages> DpdkTransport::start_stages(PipelineMode mode, const EngineConfig& engine) {
    if (mode == PipelineMode::none) return nullptr;
    return std::make_unique<DpdkStages>(*this, mode, engine, dcfg_);
}

}  // namespace

std::unique_ptr<Transport> make_dpdk_transport(const DeviceConfig& cfg) { return std::make_unique<DpdkTransport>(cfg); }

}  // namespace mroce
