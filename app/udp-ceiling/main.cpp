// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-udp-ceiling: what plain UDP sockets on this host can do, the baseline
// mroce-perf over the UDP driver is compared with. A sender and a receiver
// process (forked, or started separately with --server/--client) move bulk
// datagrams with sendmmsg/recvmmsg, with UDP GSO/GRO, and through the mroce
// UdpPort itself (header + payload iovecs); a ping-pong mode gives the
// round-trip latency of an 8-byte datagram.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "mroce/udp/loop.hpp"
#include "mroce/udp/port.hpp"

namespace {

using mroce::Time;
using mroce::udp::monotonic_ns;

// Sender with or without UDP GSO, receiver with or without UDP GRO, raw sockets or UdpPort.
struct Variant {
    const char* name;
    bool driver, gso, gro;
};
constexpr Variant kVariants[] = {
    {"mmsg", false, false, false},          {"gso", false, true, false},
    {"gso+gro", false, true, true},         {"driver", true, false, false},
    {"driver+gso", true, true, false},      {"driver+gso+gro", true, true, true},
};
const char* name(const Variant& v) { return v.name; }

struct Opts {
    std::string mode = "all";  // bw, lat, all
    std::vector<Variant> variants{std::begin(kVariants), std::end(kVariants)};
    std::vector<uint32_t> sizes{4096, 8192};
    uint32_t batch = 32;       // datagrams per sendmmsg/recvmmsg (packets per send_burst)
    uint32_t gso_batch = 4;    // 64 KB GSO messages per sendmmsg
    uint32_t paths = 4;        // driver variants: packets spread over this many source ports
    size_t footprint = 0;      // senders cycle through this many bytes of source data (0: one batch's)
    size_t place = 0;          // raw receivers put every payload into this many bytes of destination
    bool place_direct = false; // ... straight from the socket (recvmmsg into it), not copied from a ring
    bool place_peek = false;   // ... directly, one datagram per recvmsg after a MSG_PEEK of its header
    double seconds = 2.0;
    uint16_t port = 47100;
    bool pin = true;
    uint32_t repeat = 1;       // runs per configuration; the best is summarised (noise only slows)
    int role = 0;              // 0: fork both, 1: server only, 2: client only
    uint32_t lat_iters = 50000;
    bool lat_spin = false;
    bool lat_driver = false;   // ping-pong through UdpPort and its adaptive idle policy
    uint32_t spin_us = 50;     // IdlePolicy::spin_ns for the driver ping-pong
};

struct Result {
    uint64_t bytes = 0, pkts = 0, calls = 0, aux = 0;
    double secs = 0;
    double cpu = 0;  // this process's user+system seconds over the same window
};

// CPU per packet survives a busy machine far better than Gbit/s does (other processes
// steal wall time, not the work per packet), so it is printed beside the rates.
double cpu_now() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

[[noreturn]] void die(const std::string& what) {
    fmt::print(stderr, "mroce-udp-ceiling: {}\n", what);
    std::exit(1);
}
[[noreturn]] void die_errno(const std::string& what) { die(fmt::format("{}: {}", what, std::strerror(errno))); }

void pin_to(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

sockaddr_in loopback(uint16_t port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(port);
    return sa;
}

int udp_socket(uint16_t bind_port, int rcvtimeo_ms) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die_errno("socket");
    int buf = 8 << 20;  // as the driver's default: a small queue just measures drops
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    buf = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    if (rcvtimeo_ms > 0) {
        timeval tv{rcvtimeo_ms / 1000, (rcvtimeo_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    sockaddr_in sa = loopback(bind_port);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0)
        die_errno(fmt::format("bind 127.0.0.1:{}", bind_port));
    return fd;
}

uint32_t gso_segs(uint32_t size) { return std::max<uint32_t>(1, std::min<uint32_t>(64, 65507 / size)); }

// ---------------------------------------------------------------- bulk receive
// Measured from the first datagram to the last one within `seconds`; stops early once the
// sender has gone quiet (SO_RCVTIMEO) after traffic started.
Result rx_raw(const Opts& o, Variant v, uint32_t size, int ready_fd) {
    const bool gro = v.gro;
    int fd = udp_socket(o.port, 300);
    int one = 1;
    if (gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof one) < 0) die_errno("setsockopt(UDP_GRO)");
    const size_t nb = gro ? 8 : o.batch;
    const size_t bsz = gro ? 65536 : size;
    std::vector<uint8_t> mem(nb * bsz);
    std::vector<mmsghdr> msg(nb);
    std::vector<iovec> iov(nb);
    std::vector<std::array<uint8_t, 64>> ctrl(nb);
    // --place: the payloads' final place, as a transport that places data has it (mroce's
    // engine copies each packet from the ring there; --place-direct receives into it).
    std::vector<uint8_t> dst(o.place ? o.place + nb * bsz : 0);
    size_t doff = 0;
    if (ready_fd >= 0) [[maybe_unused]] auto w = write(ready_fd, "r", 1);
    Result r;
    Time first = 0, last = 0, idle_since = monotonic_ns();
    double cpu0 = 0;
    for (;;) {
        if (o.place && doff >= o.place) doff = 0;
        for (size_t i = 0; i < nb; ++i) {
            uint8_t* b = o.place_direct ? dst.data() + doff + i * bsz : mem.data() + i * bsz;
            iov[i] = iovec{b, bsz};
            msg[i].msg_hdr = msghdr{nullptr, 0, &iov[i], 1, ctrl[i].data(), ctrl[i].size(), 0};
        }
        // --place-peek: what a receiver pays to learn a datagram's destination from its
        // header before receiving it (a socket offers no other way): a peek per datagram.
        uint8_t peek[72];
        const int n = o.place_peek && recv(fd, peek, sizeof peek, MSG_PEEK) < 0
                          ? -1
                          : recvmmsg(fd, msg.data(), o.place_peek ? 1u : unsigned(nb), MSG_WAITFORONE, nullptr);
        const Time now = monotonic_ns();
        if (n <= 0) {
            if (first || now - idle_since > 10'000'000'000ull) break;
            continue;
        }
        if (!first) {
            first = now;
            cpu0 = cpu_now();
        }
        r.calls += o.place_peek ? 2 : 1;
        for (int i = 0; i < n; ++i) {
            const uint32_t len = msg[size_t(i)].msg_len;
            uint32_t seg = len;
            msghdr& h = msg[size_t(i)].msg_hdr;
            for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c))
                if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                    int s;
                    std::memcpy(&s, CMSG_DATA(c), sizeof s);
                    seg = uint32_t(s);
                }
            r.bytes += len;
            r.pkts += seg ? (len + seg - 1) / seg : 1;
            if (seg < len) ++r.aux;
            if (o.place && !o.place_direct && seg) {
                const uint8_t* src = mem.data() + size_t(i) * bsz;
                for (uint32_t off = 0; off < len; off += seg, doff += seg) {  // one copy per packet, as placed
                    if (doff + seg > o.place) doff = 0;
                    std::memcpy(dst.data() + doff, src + off, std::min(seg, len - off));
                }
            }
        }
        if (o.place_direct) doff += size_t(n) * bsz;
        last = now;
        if (double(now - first) * 1e-9 >= o.seconds) break;
    }
    r.secs = double(last - first) * 1e-9;
    r.cpu = cpu_now() - cpu0;
    close(fd);
    return r;
}

Result rx_driver(const Opts& o, Variant v, int ready_fd) {
    mroce::udp::UdpConfig c;
    c.listen_port = o.port;
    c.path_port_base = uint16_t(o.port + 1);
    c.path_port_span = 1;
    c.gro = v.gro;
    mroce::udp::UdpPort port(c);
    if (ready_fd >= 0) [[maybe_unused]] auto w = write(ready_fd, "r", 1);
    std::vector<mroce::RxPacket> rx(64);
    Result r;
    Time first = 0, last = 0;
    double cpu0 = 0;
    const Time t0 = monotonic_ns();
    for (;;) {
        const size_t n = port.recv_burst(rx.data(), rx.size());
        const Time now = monotonic_ns();
        if (n == 0) {
            if (!port.wait(300'000'000) && (first || now - t0 > 10'000'000'000ull)) break;
            continue;
        }
        if (!first) {
            first = now;
            cpu0 = cpu_now();
        }
        for (size_t i = 0; i < n; ++i) r.bytes += rx[i].len;
        r.pkts += n;
        last = now;
        if (double(now - first) * 1e-9 >= o.seconds) break;
    }
    r.secs = double(last - first) * 1e-9;
    r.cpu = cpu_now() - cpu0;
    r.calls = port.stats().rx_syscalls;
    r.aux = port.stats().rx_gro_datagrams;
    return r;
}

// ---------------------------------------------------------------- bulk send
// Sends for `seconds` plus a margin, so the receiver's window is full throughout.
Result tx_raw(const Opts& o, Variant v, uint32_t size) {
    const bool gso = v.gso;
    int fd = udp_socket(0, 0);
    sockaddr_in to = loopback(o.port);
    const uint32_t segs = gso ? gso_segs(size) : 1;
    const size_t nm = gso ? o.gso_batch : o.batch;
    // A batch's worth of source data stays in the cache; --footprint makes the sender read
    // through a larger region, as mroce-perf does (depth messages of its own per stream).
    const size_t batch_bytes = size_t(segs) * size * nm;
    const size_t rounds = std::max<size_t>(1, (o.footprint + batch_bytes - 1) / batch_bytes);
    std::vector<uint8_t> mem(batch_bytes * rounds);
    for (size_t i = 0; i < mem.size(); ++i) mem[i] = uint8_t(i);
    std::vector<mmsghdr> msg(nm);
    std::vector<iovec> iov(nm);
    alignas(cmsghdr) uint8_t ctrl[CMSG_SPACE(sizeof(uint16_t))] = {};
    if (gso) {
        cmsghdr* c = reinterpret_cast<cmsghdr*>(ctrl);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        const uint16_t gs = uint16_t(size);
        std::memcpy(CMSG_DATA(c), &gs, sizeof gs);
    }
    for (size_t i = 0; i < nm; ++i) {
        iov[i] = iovec{mem.data() + i * segs * size, size_t(segs) * size};
        msg[i].msg_hdr = msghdr{&to, sizeof to, &iov[i], 1, gso ? ctrl : nullptr, gso ? sizeof ctrl : 0, 0};
    }
    Result r;
    const Time t0 = monotonic_ns(), end = t0 + Time((o.seconds + 0.5) * 1e9);
    const double cpu0 = cpu_now();
    Time now = t0;
    size_t round = 0;
    while (now < end) {
        if (rounds > 1) {
            for (size_t i = 0; i < nm; ++i) iov[i].iov_base = mem.data() + round * batch_bytes + i * segs * size;
            round = (round + 1) % rounds;
        }
        const int n = sendmmsg(fd, msg.data(), unsigned(nm), 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR) continue;
            die_errno("sendmmsg");
        }
        ++r.calls;
        r.pkts += uint64_t(n) * segs;
        r.bytes += uint64_t(n) * segs * size;
        now = monotonic_ns();
    }
    r.secs = double(now - t0) * 1e-9;
    r.cpu = cpu_now() - cpu0;
    close(fd);
    return r;
}

Result tx_driver(const Opts& o, Variant v, uint32_t size) {
    mroce::udp::UdpConfig c;
    c.listen_port = uint16_t(o.port + 20);
    c.path_port_base = uint16_t(o.port + 21);
    c.path_port_span = uint16_t(std::max<uint32_t>(1, o.paths));
    c.open_paths = c.path_port_span;
    c.gso = v.gso;
    c.gro = false;
    mroce::udp::UdpPort port(c);
    const uint32_t peer = port.add_peer("127.0.0.1", o.port);
    // Payload stays in one "registered" region; headers are per packet, as the engine emits them.
    const size_t batch_bytes = size_t(size) * o.batch;
    const size_t rounds = std::max<size_t>(1, (o.footprint + batch_bytes - 1) / batch_bytes);
    std::vector<uint8_t> region(batch_bytes * rounds);
    for (size_t i = 0; i < region.size(); ++i) region[i] = uint8_t(i * 13);
    std::vector<mroce::TxPacket> tx(o.batch);
    for (uint32_t i = 0; i < o.batch; ++i) {
        mroce::TxPacket& t = tx[i];
        t.peer = peer;
        t.path = uint16_t(i % c.path_port_span);
        t.entropy = t.path;
        t.hdr_len = 72;
        std::memset(t.hdr, 0x11, 72);
        t.payload = region.data() + size_t(i) * size;
        t.payload_len = size;
    }
    Result r;
    const Time t0 = monotonic_ns(), end = t0 + Time((o.seconds + 0.5) * 1e9);
    const double cpu0 = cpu_now();
    Time now = t0;
    size_t round = 0;
    while (now < end) {
        if (rounds > 1) {
            for (uint32_t i = 0; i < o.batch; ++i) tx[i].payload = region.data() + round * batch_bytes + size_t(i) * size;
            round = (round + 1) % rounds;
        }
        port.send_burst(tx.data(), tx.size());
        now = monotonic_ns();
    }
    r.secs = double(now - t0) * 1e-9;
    r.cpu = cpu_now() - cpu0;
    r.pkts = port.stats().tx_packets;
    r.bytes = port.stats().tx_bytes;
    r.calls = port.stats().tx_syscalls;
    r.aux = port.stats().tx_errors;
    return r;
}

// ---------------------------------------------------------------- ping-pong
void lat_server(const Opts& o, int ready_fd) {
    int fd = udp_socket(uint16_t(o.port + 40), o.lat_spin ? 0 : 3000);
    if (ready_fd >= 0) [[maybe_unused]] auto w = write(ready_fd, "r", 1);
    uint8_t buf[64];
    Time last = monotonic_ns();
    for (;;) {
        sockaddr_in from{};
        socklen_t fl = sizeof from;
        const ssize_t n = recvfrom(fd, buf, sizeof buf, o.lat_spin ? MSG_DONTWAIT : 0,
                                   reinterpret_cast<sockaddr*>(&from), &fl);
        if (n < 0) {
            if (o.lat_spin && errno == EAGAIN && monotonic_ns() - last < 3'000'000'000ull) continue;
            break;
        }
        last = monotonic_ns();
        if (n == 1 && buf[0] == 'q') break;
        sendto(fd, buf, size_t(n), 0, reinterpret_cast<sockaddr*>(&from), fl);
    }
    close(fd);
}

void lat_client(const Opts& o) {
    int fd = udp_socket(0, 2000);
    sockaddr_in to = loopback(uint16_t(o.port + 40));
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) die_errno("connect");
    uint8_t msg[8] = {1, 2, 3, 4, 5, 6, 7, 8}, buf[64];
    std::vector<double> rtt;
    rtt.reserve(o.lat_iters);
    const uint32_t warm = 1000;
    for (uint32_t i = 0; i < o.lat_iters + warm; ++i) {
        const Time t0 = monotonic_ns();
        if (send(fd, msg, sizeof msg, 0) != ssize_t(sizeof msg)) die_errno("send");
        ssize_t n;
        if (o.lat_spin) {
            while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) < 0 && errno == EAGAIN) {
            }
        } else {
            n = recv(fd, buf, sizeof buf, 0);
        }
        if (n < 0) die_errno("recv (ping-pong reply lost?)");
        const Time t1 = monotonic_ns();
        if (i >= warm) rtt.push_back(double(t1 - t0) * 1e-3);
    }
    [[maybe_unused]] auto q = send(fd, "q", 1, 0);
    std::sort(rtt.begin(), rtt.end());
    auto pct = [&](double p) { return rtt[std::min(rtt.size() - 1, size_t(p * double(rtt.size())))]; };
    fmt::print("ping-pong {:>5} 8 B  iters {:>6}  rtt us: p50 {:6.2f}  p99 {:6.2f}  p99.9 {:6.2f}  max {:7.1f}\n",
               o.lat_spin ? "spin" : "block", rtt.size(), pct(0.50), pct(0.99), pct(0.999), rtt.back());
    close(fd);
}

// Same exchange through UdpPort: send_burst/recv_burst, IdleWaiter spinning spin_us after the
// last packet and then blocking in epoll (spin_us 0: always block).
mroce::udp::UdpConfig lat_port_cfg(uint16_t listen) {
    mroce::udp::UdpConfig c;
    c.listen_port = listen;
    c.path_port_base = uint16_t(listen + 1);
    c.path_port_span = 1;
    c.open_paths = 1;
    return c;
}

mroce::TxPacket lat_pkt(uint32_t peer, const uint8_t* data, uint32_t len) {
    mroce::TxPacket t;
    t.peer = peer;
    t.hdr_len = uint16_t(std::min<uint32_t>(len, 72));
    std::memcpy(t.hdr, data, t.hdr_len);
    return t;
}

void lat_driver_server(const Opts& o, int ready_fd) {
    mroce::udp::UdpPort port(lat_port_cfg(uint16_t(o.port + 40)));
    mroce::udp::IdleWaiter idle({Time(o.spin_us) * 1000, 100'000'000});
    if (ready_fd >= 0) [[maybe_unused]] auto w = write(ready_fd, "r", 1);
    mroce::RxPacket rx[64];
    mroce::TxPacket tx[64];
    Time last = monotonic_ns();
    for (;;) {
        const size_t n = port.recv_burst(rx, 64);
        const Time now = monotonic_ns();
        for (size_t i = 0; i < n; ++i) {
            if (rx[i].len == 1 && rx[i].data[0] == 'q') return;
            tx[i] = lat_pkt(rx[i].peer, rx[i].data, rx[i].len);
        }
        if (n) {
            port.send_burst(tx, n);
            last = now;
        } else if (now - last > 3'000'000'000ull) {
            return;
        }
        idle.idle(port, n > 0, now, now + 1'000'000'000);
    }
}

void lat_driver_client(const Opts& o) {
    mroce::udp::UdpPort port(lat_port_cfg(uint16_t(o.port + 60)));
    mroce::udp::IdleWaiter idle({Time(o.spin_us) * 1000, 100'000'000});
    const uint32_t peer = port.add_peer("127.0.0.1", uint16_t(o.port + 40));
    const uint8_t msg[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    mroce::RxPacket rx[64];
    std::vector<double> rtt;
    rtt.reserve(o.lat_iters);
    const uint32_t warm = 1000;
    for (uint32_t i = 0; i < o.lat_iters + warm; ++i) {
        const Time t0 = monotonic_ns();
        mroce::TxPacket t = lat_pkt(peer, msg, sizeof msg);
        if (port.send_burst(&t, 1) != 1) die("send_burst: " + port.last_error());
        idle.idle(port, true, t0, UINT64_MAX);
        for (;;) {
            if (port.recv_burst(rx, 64)) break;
            const Time now = monotonic_ns();
            if (now - t0 > 2'000'000'000ull) die("ping-pong reply lost");
            idle.idle(port, false, now, t0 + 2'000'000'000ull);
        }
        const Time t1 = monotonic_ns();
        if (i >= warm) rtt.push_back(double(t1 - t0) * 1e-3);
    }
    mroce::TxPacket q = lat_pkt(peer, reinterpret_cast<const uint8_t*>("q"), 1);
    port.send_burst(&q, 1);
    std::sort(rtt.begin(), rtt.end());
    auto pct = [&](double p) { return rtt[std::min(rtt.size() - 1, size_t(p * double(rtt.size())))]; };
    fmt::print("ping-pong driver spin {:>3} us 8 B  iters {:>6}  rtt us: p50 {:6.2f}  p99 {:6.2f}  p99.9 {:6.2f}  "
               "max {:7.1f}  (client blocked {} times)\n",
               o.spin_us, rtt.size(), pct(0.50), pct(0.99), pct(0.999), rtt.back(), idle.blocks());
}

// ---------------------------------------------------------------- drivers of the two sides
void print_bw(const Variant& v, uint32_t size, const Result& tx, const Result& rx) {
    auto gbps = [](const Result& r) { return r.secs > 0 ? double(r.bytes) * 8 / r.secs / 1e9 : 0; };
    auto mpps = [](const Result& r) { return r.secs > 0 ? double(r.pkts) / r.secs / 1e6 : 0; };
    auto nspp = [](const Result& r) { return r.pkts ? r.cpu * 1e9 / double(r.pkts) : 0; };
    fmt::print("{:<15} {:>5} B  rx {:6.2f} Gbit/s {:6.3f} Mpps {:6.0f} cpu-ns/pkt   "
               "tx {:6.2f} Gbit/s {:6.3f} Mpps {:6.0f} cpu-ns/pkt   syscalls tx {:>7} rx {:>7}\n",
               name(v), size, gbps(rx), mpps(rx), nspp(rx), gbps(tx), mpps(tx), nspp(tx), tx.calls, rx.calls);
    std::fflush(stdout);
}

Result run_rx(const Opts& o, Variant v, uint32_t size, int ready_fd) {
    return v.driver ? rx_driver(o, v, ready_fd) : rx_raw(o, v, size, ready_fd);
}
Result run_tx(const Opts& o, Variant v, uint32_t size) {
    return v.driver ? tx_driver(o, v, size) : tx_raw(o, v, size);
}

// Forks the receiver (the server side) and runs `client` in this process.
template <class Server, class Client>
void forked(const Opts& o, Server&& server, Client&& client) {
    int ready[2];
    if (pipe(ready) < 0) die_errno("pipe");
    const pid_t pid = fork();
    if (pid < 0) die_errno("fork");
    if (pid == 0) {
        close(ready[0]);
        if (o.pin) pin_to(1);
        server(ready[1]);
        _exit(0);
    }
    close(ready[1]);
    char c;
    if (read(ready[0], &c, 1) != 1) die("receiver process failed to start");
    close(ready[0]);
    if (o.pin) pin_to(0);
    client();
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) die("receiver process failed");
}

// Returns the receiver's result (or the sender's, for --client alone).
Result bw(const Opts& o, Variant v, uint32_t size) {
    if (o.role == 1) {
        const Result rx = run_rx(o, v, size, -1);
        print_bw(v, size, Result{}, rx);
        return rx;
    }
    if (o.role == 2) {
        const Result tx = run_tx(o, v, size);
        print_bw(v, size, tx, Result{});
        return tx;
    }
    int res[2];
    if (pipe(res) < 0) die_errno("pipe");
    Result tx;
    forked(
        o,
        [&](int ready_fd) {
            const Result rx = run_rx(o, v, size, ready_fd);
            [[maybe_unused]] auto w = write(res[1], &rx, sizeof rx);
        },
        [&] { tx = run_tx(o, v, size); });
    Result rx;
    if (read(res[0], &rx, sizeof rx) != ssize_t(sizeof rx)) die("no result from the receiver");
    close(res[0]);
    close(res[1]);
    print_bw(v, size, tx, rx);
    return rx;
}

void lat(const Opts& o) {
    if (o.lat_driver) {
        if (o.role == 1) return lat_driver_server(o, -1);
        if (o.role == 2) return lat_driver_client(o);
        forked(o, [&](int ready_fd) { lat_driver_server(o, ready_fd); }, [&] { lat_driver_client(o); });
        return;
    }
    if (o.role == 1) return lat_server(o, -1);
    if (o.role == 2) return lat_client(o);
    forked(o, [&](int ready_fd) { lat_server(o, ready_fd); }, [&] { lat_client(o); });
}

void usage() {
    fmt::print(
        "usage: mroce-udp-ceiling [--mode bw|lat|all]\n"
        "         [--variant mmsg|gso|gso+gro|driver|driver+gso|driver+gso+gro|all]\n"
        "         [--size BYTES[,BYTES...]] [--batch N] [--gso-batch N] [--paths N] [--footprint BYTES]\n"
        "         [--place BYTES [--place-direct|--place-peek]] [--seconds S]\n"
        "         [--port P] [--no-pin] [--repeat N] [--server|--client] [--iters N] [--spin] [--spin-us N]\n"
        "Bulk: a receiver and a sender process on 127.0.0.1:P (forked unless --server/--client);\n"
        "rx Gbit/s counts UDP payload bytes received (driver variants: 72-byte header + size).\n"
        "--footprint: senders read through this many bytes of source data, batch after batch\n"
        "(default one batch's, which stays cache-resident; mroce-perf's default is ~4 MiB).\n"
        "--place: raw receivers copy every packet's payload from their receive buffers into a\n"
        "destination of this many bytes, as a transport placing data does (--place-direct:\n"
        "they receive straight into it, the one-copy receive a zero-copy placement would give;\n"
        "--place-peek: straight into it, each datagram after a MSG_PEEK of its first 72 bytes,\n"
        "which is how a socket receiver would learn where a packet goes before receiving it).\n"
        "Latency: ping-pong of an 8-byte datagram on port P+40, blocking recv (or --spin);\n"
        "--variant driver: through UdpPort, spinning --spin-us after activity, then epoll.\n");
}

}  // namespace

int main(int argc, char** argv) {
    Opts o;
    o.pin = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die(fmt::format("{} needs a value", a));
            return argv[++i];
        };
        try {
            if (a == "--mode") o.mode = val();
            else if (a == "--variant") {
                const std::string v = val();
                if (v != "all") {
                    o.variants.clear();
                    for (const Variant& k : kVariants)
                        if (v == k.name) o.variants.push_back(k);
                    if (o.variants.empty()) die("unknown --variant " + v);
                }
                o.lat_driver = v == "driver";
            } else if (a == "--size") {
                o.sizes.clear();
                std::string s = val();
                for (size_t p = 0; p < s.size();) {
                    size_t q = s.find(',', p);
                    if (q == std::string::npos) q = s.size();
                    o.sizes.push_back(uint32_t(std::stoul(s.substr(p, q - p))));
                    p = q + 1;
                }
            } else if (a == "--batch") o.batch = uint32_t(std::stoul(val()));
            else if (a == "--gso-batch") o.gso_batch = uint32_t(std::stoul(val()));
            else if (a == "--paths") o.paths = uint32_t(std::stoul(val()));
            else if (a == "--footprint") o.footprint = size_t(std::stoull(val()));
            else if (a == "--place") o.place = size_t(std::stoull(val()));
            else if (a == "--place-direct") o.place_direct = true;
            else if (a == "--place-peek") o.place_direct = o.place_peek = true;
            else if (a == "--seconds") o.seconds = std::stod(val());
            else if (a == "--port") o.port = uint16_t(std::stoul(val()));
            else if (a == "--iters") o.lat_iters = uint32_t(std::stoul(val()));
            else if (a == "--no-pin") o.pin = false;
            else if (a == "--repeat") o.repeat = std::max(1ul, std::stoul(val()));
            else if (a == "--spin") o.lat_spin = true;
            else if (a == "--spin-us") o.spin_us = uint32_t(std::stoul(val()));
            else if (a == "--server") o.role = 1;
            else if (a == "--client") o.role = 2;
            else if (a == "-h" || a == "--help") {
                usage();
                return 0;
            } else die("unknown option " + a + " (see --help)");
        } catch (const std::logic_error&) {
            die("bad value for " + a);
        }
    }
    for (uint32_t s : o.sizes)
        if (s == 0 || s > 65507) die(fmt::format("--size {} is outside 1..65507", s));
    if (o.batch == 0 || o.batch > 1024 || o.gso_batch == 0 || o.gso_batch > 1024) die("--batch 1..1024");
    if (o.footprint > (size_t(1) << 30)) die("--footprint at most 1 GiB");
    if (o.place > (size_t(1) << 30)) die("--place at most 1 GiB");
    if (o.place_direct && o.place == 0) die("--place-direct and --place-peek need --place BYTES");
    try {
        if (o.mode == "bw" || o.mode == "all") {
            fmt::print("# bulk loopback, {:.1f} s per run, batch {}, gso batch {} x 64 KB, driver paths {}, pin {}, "
                       "source footprint {}, raw receivers place into {}\n",
                       o.seconds, o.batch, o.gso_batch, o.paths, o.pin ? "cpu0/cpu1" : "off",
                       o.footprint ? fmt::format("{} B", o.footprint) : std::string("one batch"),
                       o.place ? fmt::format("{} B{}", o.place,
                                             o.place_peek ? " directly after a peek" : o.place_direct ? " directly" : " by copy")
                               : std::string("nothing"));
            std::vector<double> best(o.sizes.size() * o.variants.size(), 0.0), best_pps(best.size(), 0.0);
            for (uint32_t rep = 0; rep < o.repeat; ++rep)
                for (size_t si = 0; si < o.sizes.size(); ++si)
                    for (size_t vi = 0; vi < o.variants.size(); ++vi) {
                        const Result r = bw(o, o.variants[vi], o.sizes[si]);
                        const double g = r.secs > 0 ? double(r.bytes) * 8 / r.secs / 1e9 : 0;
                        const size_t k = si * o.variants.size() + vi;
                        if (g > best[k]) {
                            best[k] = g;
                            best_pps[k] = r.secs > 0 ? double(r.pkts) / r.secs / 1e6 : 0;
                        }
                    }
            if (o.repeat > 1) {
                fmt::print("# best of {} ({} side)\n", o.repeat, o.role == 2 ? "sender" : "receiver");
                for (size_t si = 0; si < o.sizes.size(); ++si)
                    for (size_t vi = 0; vi < o.variants.size(); ++vi) {
                        const size_t k = si * o.variants.size() + vi;
                        fmt::print("{:<15} {:>5} B  {:6.2f} Gbit/s {:6.3f} Mpps\n", o.variants[vi].name, o.sizes[si],
                                   best[k], best_pps[k]);
                    }
            }
        }
        if (o.mode == "lat" || o.mode == "all") {
            if (o.mode == "all" && o.role == 0) {
                // Raw blocking, raw busy-poll, driver with its idle policy, driver always blocking.
                for (int k = 0; k < 4; ++k) {
                    Opts l = o;
                    l.lat_spin = k == 1;
                    l.lat_driver = k >= 2;
                    if (k == 3) l.spin_us = 0;
                    lat(l);
                }
            } else {
                lat(o);
            }
        }
    } catch (const std::exception& e) {
        die(e.what());
    }
    return 0;
}
