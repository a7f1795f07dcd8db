// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Two processes, each in its own network namespace with its own EAL and a
// net_af_packet port on one end of a veth pair: the engines connect and move
// a multi-MB WRITE and a SEND byte-exact, then the all-operation mix (also
// at 10% injected receive loss). The addresses live inside the namespaces
// only, so no traffic can leave the veth pair. Needs root and `ip netns`;
// skipped with a warning otherwise.
// Namespaces (and with them the veth pair) are deleted even when a check fails.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "integrity_process.hpp"

using namespace mroce;
using namespace mroce::test;

namespace {

// Runs a command without a shell's help for quoting (our arguments have no
// spaces); returns its exit status.
int sh(const std::string& cmd) {
    const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

std::string read_cmd(const std::string& cmd) {
    std::string out;
    if (FILE* f = ::popen(cmd.c_str(), "r")) {
        char buf[256];
        while (std::fgets(buf, sizeof buf, f)) out += buf;
        ::pclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

struct VethPair {
    std::string ns[2], ifc[2];
    bool up = false;
    std::string why;
    dpdk::MacAddr mac[2]{};
    static constexpr const char* kIp[2] = {"10.201.0.1", "10.201.0.2"};

    VethPair() {
        const unsigned pid = unsigned(::getpid());
        for (int i = 0; i < 2; ++i) ns[i] = ifc[i] = fmt::format("mr{}{}", i ? 'B' : 'A', pid);
        if (::geteuid() != 0) {
            why = "not root";
            return;
        }
        if (sh("ip netns add " + ns[0]) != 0) {
            why = "`ip netns add` failed";
            return;
        }
        if (sh("ip netns add " + ns[1]) != 0) {
            why = "`ip netns add` failed";
            return;
        }
        // Created with each end already inside its namespace: never visible in the host's.
        if (sh(fmt::format("ip link add {} netns {} type veth peer name {} netns {}", ifc[0], ns[0], ifc[1], ns[1])) !=
            0) {
            why = "cannot create a veth pair";
            return;
        }
        for (int i = 0; i < 2; ++i) {
            // IPv6 off: no router/neighbour solicitations on the link for the port to count.
            sh(fmt::format("ip netns exec {} sysctl -qw net.ipv6.conf.all.disable_ipv6=1", ns[i]));
            if (sh(fmt::format("ip -n {} addr add {}/30 dev {}", ns[i], kIp[i], ifc[i])) != 0 ||
                sh(fmt::format("ip -n {} link set {} up", ns[i], ifc[i])) != 0) {
                why = "cannot configure the veth ends";
                return;
            }
            // `ip netns exec` mounts the namespace's own sysfs, where the interface is.
            const std::string m =
                read_cmd(fmt::format("ip netns exec {} cat /sys/class/net/{}/address", ns[i], ifc[i]));
            try {
                mac[i] = dpdk::parse_mac(m);
            } catch (const std::exception&) {
                why = "cannot read the veth MAC ('" + m + "')";
                return;
            }
        }
        up = true;
    }
    ~VethPair() {
        // Deleting a namespace deletes the veth end inside it, and with it the pair.
        for (int i = 0; i < 2; ++i) sh("ip netns del " + ns[i]);
    }
};

void run_netns(const Workload& w, uint16_t max_payload, double loss, const char* what) {
    VethPair v;
    if (!v.up) {
        WARN("skipped (" << what << "): needs root and working `ip netns`: " << v.why);
        return;
    }
    SharedLayout mem(w.mem);
    REQUIRE(mem.ok());
    auto side = [&](int i) {
        ProcSide ps;
        ps.requester = i == 0;
        ps.name = i == 0 ? "afpacket-requester" : "afpacket-responder";
        ps.netns = v.ns[i];
        ps.eal_args = {"-l", i == 0 ? "1" : "0", "--no-huge", "--no-pci", "-m", "256", "--log-level",
                       "lib.eal:warning", fmt::format("--vdev=net_af_packet0,iface={}", v.ifc[i])};
        ps.file_prefix = fmt::format("mroce-test-afp-{}-{}", i, ::getpid());
        ps.local_ip = dpdk::parse_ipv4(VethPair::kIp[i]);
        ps.peer_ip = dpdk::parse_ipv4(VethPair::kIp[1 - i]);
        ps.peer_mac = v.mac[1 - i];
        ps.max_payload = max_payload;   // frames within the veth's 1500 B MTU
        ps.w = &w;
        ps.mem_a = mem.a;
        ps.mem_b = mem.b;
        ps.seconds = 30;
        ps.kernel_link = true;
        ps.loss = loss;
        ps.seed = w.seed;
        return ps;
    };
    const pid_t b = fork_side(side(1));
    REQUIRE(b > 0);
    const pid_t a = fork_side(side(0));
    const auto [ra, rb] = wait_pair(a, b, 40);
    REQUIRE(a > 0);
    INFO(what << " (children print their reports above)");
    CHECK(ra == 0);
    CHECK(rb == 0);
}

}  // namespace

TEST_CASE("dpdk netns: af_packet over a veth pair, WRITE 4 MiB + SEND byte-exact", "[dpdk][netns]") {
    const Workload w = Workload::make_write_send(31, (4u << 20) + 777, 60000, 16u << 20);
    run_netns(w, 1024, 0.0, "WRITE + SEND");
}

TEST_CASE("dpdk netns: af_packet over a veth pair, all operations", "[dpdk][netns]") {
    const Workload w = Workload::make(32, 4, 100, 16u << 20);
    run_netns(w, 1024, 0.0, "all operations");
}

TEST_CASE("dpdk netns: af_packet over a veth pair, all operations at 10% injected loss", "[dpdk][netns]") {
    const Workload w = Workload::make(33, 4, 100, 16u << 20);
    run_netns(w, 1024, 0.10, "all operations, 10% loss");
}
