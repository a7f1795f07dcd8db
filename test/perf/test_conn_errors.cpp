// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// A connection that cannot be made says why: nothing listens at the peer's
// address (ICMP port unreachable), there is no route to it (sendmsg refuses),
// or the peer took every CONNECT_REQ and answered none. Each over real
// sockets; the no-route cases in a network namespace of a forked child.
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "mroce/api.hpp"

using namespace mroce;

namespace {

std::unique_ptr<Device> open_at(const std::string& addr, uint16_t port, Time conn_timeout) {
    DeviceConfig d;
    d.address = addr;
    d.port = port;
    d.path_port_span = 4;
    d.engine.conn_timeout = conn_timeout;
    return open_device(d);
}

std::string connect_error(Device& dev, const std::string& ip, uint16_t port) {
    try {
        dev.connect(ip, port);
    } catch (const ConnectionError& e) {
        return e.what();
    }
    return "(connected)";
}

uint16_t base_port(uint32_t salt) { return uint16_t(33000 + (uint32_t(::getpid()) * 41u + salt) % 20000u); }

}  // namespace

TEST_CASE("connect errors: no listener is reported as ICMP port unreachable", "[api][conn-errors]") {
    const uint16_t base = base_port(0);
    auto cli = open_at("127.0.0.1", base, 300'000'000);
    const std::string e = connect_error(*cli, "127.0.0.1", uint16_t(base + 10));  // nothing bound there
    CHECK_THAT(e, Catch::Contains("connect to 127.0.0.1:" + std::to_string(base + 10)));
    CHECK_THAT(e, Catch::Contains("CONNECT_REQ attempts in 300 ms"));
    CHECK_THAT(e, Catch::Contains("ICMP port unreachable"));
}

TEST_CASE("connect errors: a peer that answers nothing is a timeout after N attempts", "[api][conn-errors]") {
    const uint16_t base = base_port(20);
    // A socket at the address takes every CONNECT_REQ (no ICMP) and never answers.
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(uint16_t(base + 10));
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
    auto cli = open_at("127.0.0.1", base, 200'000'000);
    const std::string e = connect_error(*cli, "127.0.0.1", uint16_t(base + 10));
    ::close(fd);
    // connect_retry 10 ms: 20 attempts in 200 ms.
    CHECK_THAT(e, Catch::Contains("no CONNECT_ACK after 20 CONNECT_REQ attempts in 200 ms (conn_timeout_ms)"));
    CHECK_THAT(e, Catch::Contains("the peer answered nothing"));
}

// Two planes on loopback (127.0.0.1 and 127.0.0.2, both on lo).
std::unique_ptr<Device> open_two_planes(uint16_t port, Time conn_timeout, ProgressMode pm = ProgressMode::manual) {
    DeviceConfig d;
    d.planes = {"127.0.0.1", "127.0.0.2"};
    d.address = d.planes[0];
    d.port = port;
    d.path_port_span = 4;
    d.progress = pm;
    d.engine.conn_timeout = conn_timeout;
    return open_device(d);
}

TEST_CASE("connect errors: a peer named on two planes that answers on neither: the error names both addresses and "
          "the attempts over both planes (R-PLANE-6)", "[api][conn-errors][planes]") {
    const uint16_t base = base_port(40);
    auto cli = open_two_planes(base, 200'000'000);
    std::string e = "(connected)";
    try {
        cli->connect({PeerAddress{"127.0.0.1", uint16_t(base + 10)}, PeerAddress{"127.0.0.2", uint16_t(base + 11)}});
    } catch (const ConnectionError& x) {
        e = x.what();
    }
    CHECK_THAT(e, Catch::Contains("0=127.0.0.1:" + std::to_string(base + 10)));
    CHECK_THAT(e, Catch::Contains("1=127.0.0.2:" + std::to_string(base + 11)));
    CHECK_THAT(e, Catch::Contains("no CONNECT_ACK after 20 CONNECT_REQ attempts over 2 planes in 200 ms"));
}

TEST_CASE("connect: a peer named on two planes is reached on plane 1 when its plane-0 address answers nothing "
          "(R-PLANE-6, R-PLANE-7)", "[api][planes]") {
    const uint16_t base = base_port(60);
    auto srv = open_two_planes(base, 2'000'000'000, ProgressMode::automatic);
    auto cli = open_two_planes(uint16_t(base + 20), 2'000'000'000);
    // Plane 0 "down": the address given for it is a port nobody listens on;
    // plane 1's is the server's. The server's handshake then tells the
    // client where it really is on plane 0 (R-PLANE-1).
    Connection c = cli->connect({PeerAddress{"127.0.0.1", uint16_t(base + 10)}, PeerAddress{"127.0.0.2", base}},
                                2'000'000'000);
    Connection s = srv->accept(1'000'000'000);
    ConnStats cs{};
    REQUIRE(cli->engine().conn_stats(c.id(), cs) == Status::ok);
    CHECK(cs.connect_attempts >= 2);  // the first, on plane 0, went nowhere
    CHECK(cs.connect_planes == 2);
    CHECK(cs.planes == 2);
    (void)s;
}

// Runs fn in a child in a network namespace of its own with only lo (up)
// and an unreachable route for 10.9.0.0/16; the child's exit status is
// fn's. 77: namespaces unavailable (not root).
template <class Fn>
int in_netns(Fn fn) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (::unshare(CLONE_NEWNET) != 0) ::_exit(77);
        if (std::system("ip link set lo up && ip route add unreachable 10.9.0.0/16") != 0) ::_exit(78);
        ::_exit(fn());
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

TEST_CASE("connect errors: no route is reported from sendmsg's error", "[api][conn-errors]") {
    const uint16_t base = base_port(40);
    const int rc = in_netns([&] {
        auto cli = open_at("127.0.0.1", base, 100'000'000);
        // No route at all: ENETUNREACH.
        const std::string net = connect_error(*cli, "10.8.0.1", 4793);
        std::fprintf(stderr, "child: %s\n", net.c_str());
        if (net.find("ENETUNREACH") == std::string::npos) return 1;
        if (net.find("CONNECT_REQ attempts") == std::string::npos) return 2;
        // A route that says unreachable: EHOSTUNREACH.
        const std::string host = connect_error(*cli, "10.9.0.1", 4793);
        std::fprintf(stderr, "child: %s\n", host.c_str());
        if (host.find("EHOSTUNREACH") == std::string::npos) return 3;
        return 0;
    });
    if (rc == 77) {
        WARN("skipped: no network namespaces (needs root)");
        return;
    }
    CHECK(rc == 0);
}
