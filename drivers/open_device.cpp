// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// open_device(): the one place that maps DeviceConfig::driver to a concrete
// driver, so lib/ (the engine and the native API) never depends on drivers/.
// DpdkTransport is in open_device_dpdk.cpp (built when DPDK is found).
#include <arpa/inet.h>

#include <algorithm>
#include <string>
#include <system_error>

#include "mroce/api.hpp"
#include "mroce/udp/loop.hpp"
#include "mroce/udp/port.hpp"

namespace mroce {

namespace {

class UdpTransport final : public Transport {
public:
    UdpTransport(const udp::UdpConfig& uc, udp::IdlePolicy ip) : port_(uc), io_(port_, ip) {}
    Time now() noexcept override { return io_.now(); }
    size_t recv_burst(RxPacket* out, size_t max) override { return io_.recv_burst(out, max); }
    size_t send_burst(const TxPacket* pkts, size_t n, uint32_t* unsent) override {
        return io_.send_burst(pkts, n, unsent);
    }
    bool idle(bool active, Time now, Time deadline) override { return io_.idle(active, now, deadline); }
    void wake() override { io_.wake(); }
    uint32_t resolve_peer(const std::string& ip, uint16_t port) override {
        try {
            return port_.add_peer(ip, port);
        } catch (const std::exception& e) {
            throw Error("peer address " + ip + ":" + std::to_string(port) + ": " + e.what());
        }
    }
    uint32_t resolve_peer(const std::vector<PeerAddress>& planes, uint8_t& known) override {
        std::vector<sockaddr_in> sa(planes.size());
        for (size_t i = 0; i < planes.size(); ++i) {
            sa[i].sin_family = AF_INET;
            sa[i].sin_port = htons(planes[i].port);
            if (inet_pton(AF_INET, planes[i].ip.c_str(), &sa[i].sin_addr) != 1)
                throw Error("peer address " + planes[i].ip + ": not IPv4");
        }
        try {
            const uint32_t h = port_.add_peer(sa.data(), sa.size());
            known = uint8_t(std::max<size_t>(1, port_.peer_planes(h)));
            return h;
        } catch (const std::exception& e) {
            throw Error("peer address " + planes.at(0).ip + ":" + std::to_string(planes.at(0).port) + ": " + e.what());
        }
    }
    std::string peer_name(uint32_t peer) const override {
        sockaddr_in sa{};
        if (!port_.peer_address(peer, sa)) return "peer#" + std::to_string(peer);
        char buf[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
        return std::string(buf) + ":" + std::to_string(ntohs(sa.sin_port));
    }
    PeerNetError peer_error(uint32_t peer) const override {
        const udp::PeerError e = port_.peer_error(peer);
        return PeerNetError{udp::describe_peer_error(e.err), e.count};
    }
    TransportStats stats() const override {
        const auto& s = port_.stats();
        TransportStats t;
        t.tx_packets = s.tx_packets;
        t.tx_bytes = s.tx_bytes;
        t.tx_errors = s.tx_errors;
        t.tx_syscalls = s.tx_syscalls;
        t.rx_packets = s.rx_packets;
        t.rx_bytes = s.rx_bytes;
        t.rx_truncated = s.rx_truncated;
        t.rx_errors = s.rx_errors;
        t.rx_syscalls = s.rx_syscalls;
        return t;
    }
    uint32_t link_mtu() const noexcept override { return port_.link_mtu(); }
    size_t num_planes() const noexcept override { return port_.num_planes(); }
    PlaneInfo plane_info(size_t plane) const override {
        PlaneInfo i;
        if (plane >= port_.num_planes()) return i;
        char buf[INET_ADDRSTRLEN] = {};
        const in_addr a = port_.plane_address(plane);
        inet_ntop(AF_INET, &a, buf, sizeof buf);
        i.address = buf;
        const udp::PlaneCounters& c = port_.stats().plane[plane];
        i.tx_packets = c.tx_packets;
        i.tx_bytes = c.tx_bytes;
        i.rx_packets = c.rx_packets;
        i.rx_bytes = c.rx_bytes;
        return i;
    }
    std::string describe() const override {
        std::string d = "udp " + port_.config().local_ip + ":" + std::to_string(port_.config().listen_port);
        if (port_.num_planes() > 1) d += " (" + std::to_string(port_.num_planes()) + " planes)";
        if (port_.link_mtu()) d += " via " + port_.link_name() + " (MTU " + std::to_string(port_.link_mtu()) + ")";
        return d;
    }

private:
    udp::UdpPort port_;
    udp::UdpDrivePort io_;   // what the drive loop would use directly: sockets, idle policy, clock
};

// R-PLANE-1: the engine announces the planes' addresses in its handshakes
// (every driver: udp sockets or dpdk ports, one address per plane).
void announce_planes(DeviceConfig& c) {
    if (c.planes.size() < 2) return;
    c.engine.num_planes = uint8_t(std::min(c.planes.size(), wire::kMaxPlanes));
    for (size_t p = 0; p < c.engine.num_planes; ++p) {
        in_addr a{};
        if (inet_pton(AF_INET, c.planes[p].c_str(), &a) != 1)
            throw Error("device '" + c.name + "': plane " + std::to_string(p) + " address '" + c.planes[p] +
                        "' is not IPv4");
        c.engine.planes[p] = wire::PlaneAddr{ntohl(a.s_addr), c.port};
    }
}

}  // namespace

#ifdef MROCE_HAVE_DPDK
std::unique_ptr<Transport> make_dpdk_transport(const DeviceConfig& cfg);   // open_device_dpdk.cpp
#endif

std::unique_ptr<Device> open_device(const DeviceConfig& cfg) {
    if (cfg.driver == "udp") {
        udp::UdpConfig uc;
        uc.local_ip = cfg.address;
        uc.plane_ips = cfg.planes;
        uc.listen_port = cfg.port;
        uc.path_port_base = cfg.path_port_base ? cfg.path_port_base : uint16_t(cfg.port + 1);
        uc.path_port_span = cfg.path_port_span;
        uc.rx_batch = cfg.rx_batch;
        uc.gso = cfg.gso;
        uc.gro = cfg.gro;
        // Every path socket up front: a lazy bind failing mid-run would show up as silent loss.
        uc.open_paths = cfg.path_port_span;
        udp::IdlePolicy ip;
        ip.spin_ns = Time(cfg.spin_us) * 1000;
        ip.yield = cfg.spin_yield;
        std::unique_ptr<Transport> t;
        try {
            t = std::make_unique<UdpTransport>(uc, ip);
        } catch (const std::exception& e) {
            throw Error("device '" + cfg.name + "' (udp " + cfg.address + ":" + std::to_string(cfg.port) +
                        "): " + e.what());
        }
        DeviceConfig c = cfg;
        announce_planes(c);
        return std::make_unique<Device>(c, std::move(t));
    }
    if (cfg.driver == "dpdk") {
#ifdef MROCE_HAVE_DPDK
        DeviceConfig c = cfg;
        if (c.engine.max_payload == kMaxPayloadAuto) c.engine.max_payload = kDpdkAutoMaxPayload;
        announce_planes(c);
        return std::make_unique<Device>(c, make_dpdk_transport(c));
#else
        throw Error("device '" + cfg.name + "': driver dpdk: this build has no DPDK (meson option dpdk)");
#endif
    }
    throw Error("device '" + cfg.name + "': unknown driver '" + cfg.driver + "'");
}

}  // namespace mroce
