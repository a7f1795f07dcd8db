// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "mroce/dpdk/eal.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_errno.h>

namespace mroce::dpdk {
namespace {

std::atomic<bool> g_eal_up{false};

bool has_opt(const std::vector<std::string>& args, std::string_view opt) {
    return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
        // "--opt", "--opt=value", and short "-m" / "-m256" forms.
        if (a == opt) return true;
        if (opt.starts_with("--")) return a.starts_with(std::string(opt) + "=");
        return opt.size() == 2 && a.size() > 2 && a.starts_with(opt) && a[1] != '-';
    });
}

bool hugetlbfs_mounted() {
    std::ifstream mounts("/proc/mounts");
    std::string dev, dir, type;
    std::string rest;
    while (mounts >> dev >> dir >> type) {
        if (type == "hugetlbfs") return true;
        std::getline(mounts, rest);
    }
    return false;
}

}  // namespace

std::string memif_buffer_problem(const std::vector<std::string>& args, uint32_t frame_bytes) {
    for (size_t i = 0; i < args.size(); ++i) {
        std::string_view a = args[i];
        if (a == "--vdev" && i + 1 < args.size()) a = args[++i];
        else if (a.substr(0, 7) == "--vdev=") a.remove_prefix(7);
        else continue;
        if (a.substr(0, 9) != "net_memif") continue;
        uint64_t bsize = 2048;   // DPDK's net_memif default
        size_t pos = 0;
        while ((pos = a.find("bsize=", pos)) != std::string_view::npos) {
            if (pos == 0 || a[pos - 1] == ',') {
                bsize = 0;
                for (size_t k = pos + 6; k < a.size() && a[k] >= '0' && a[k] <= '9'; ++k)
                    bsize = std::min<uint64_t>(bsize * 10 + uint64_t(a[k] - '0'), 1u << 30);
            }
            pos += 6;
        }
        if (bsize < frame_bytes) {
            const std::string vdev(a.substr(0, a.find(',')));
            return vdev + ": memif buffers of " + std::to_string(bsize) + " B (bsize) are smaller than a frame of " +
                   std::to_string(frame_bytes) +
                   " B; DPDK 22.11's net_memif corrupts frames that span buffers: add bsize=" +
                   std::to_string(frame_bytes <= 8192 ? 8192 : frame_bytes) + " (or more) to the --vdev";
        }
    }
    return {};
}

uint64_t free_hugepage_bytes() {
    namespace fs = std::filesystem;
    if (!hugetlbfs_mounted()) return 0;
    uint64_t total = 0;
    std::error_code ec;
    for (const auto& d : fs::directory_iterator("/sys/kernel/mm/hugepages", ec)) {
        // Directory names are "hugepages-<size>kB".
        const std::string name = d.path().filename().string();
        const auto dash = name.find('-');
        if (dash == std::string::npos) continue;
        const uint64_t kb = std::strtoull(name.c_str() + dash + 1, nullptr, 10);
        std::ifstream f(d.path() / "free_hugepages");
        uint64_t pages = 0;
        if (f >> pages) total += pages * kb * 1024;
    }
    return total;
}

bool eal_initialised() noexcept { return g_eal_up.load(); }

std::vector<std::string> eal_args(const EalConfig& cfg) {
    std::vector<std::string> args = cfg.args;

    if (!has_opt(args, "--file-prefix")) {
        args.push_back("--file-prefix");
        args.push_back(cfg.file_prefix.empty() ? fmt::format("mroce-{}", ::getpid()) : cfg.file_prefix);
    }
    const bool no_huge = has_opt(args, "--no-huge");
    const bool mem_given = has_opt(args, "-m") || has_opt(args, "--socket-mem");
    if (no_huge && has_opt(args, "--in-memory")) {
        // 22.11 refuses --no-huge with --in-memory; --no-shconf gives the same
        // "no shared runtime files" behaviour the caller asked for.
        std::erase_if(args, [](const std::string& a) { return a == "--in-memory"; });
        if (!has_opt(args, "--no-shconf")) args.push_back("--no-shconf");
    }
    if (no_huge && !mem_given) {
        args.push_back("-m");
        args.push_back(std::to_string(cfg.memory_mb));
    } else if (!no_huge && !mem_given && cfg.auto_memory &&
               free_hugepage_bytes() < uint64_t(cfg.memory_mb) << 20) {
        args.push_back("--no-huge");
        args.push_back("-m");
        args.push_back(std::to_string(cfg.memory_mb));
    }

    if (cfg.unlink_hugepages && !has_opt(args, "--no-huge") && !has_opt(args, "--huge-unlink") &&
        !has_opt(args, "--in-memory"))
        args.push_back("--huge-unlink");

    std::vector<std::string> full;
    full.reserve(args.size() + 1);
    full.push_back(cfg.program);
    full.insert(full.end(), args.begin(), args.end());
    return full;
}

std::vector<std::string> eal_init(const EalConfig& cfg) {
    if (g_eal_up.load())
        throw DpdkError("rte_eal_init: EAL already initialised in this process (it can be initialised once)");
    const std::vector<std::string> full = eal_args(cfg);
    // rte_eal_init permutes argv; give it copies it may scribble on.
    std::vector<std::string> storage = full;
    std::vector<char*> argv;
    for (auto& s : storage) argv.push_back(s.data());
    argv.push_back(nullptr);

    const int rc = rte_eal_init(int(argv.size() - 1), argv.data());
    if (rc < 0) {
        const int err = rte_errno;
        std::string joined;
        for (const auto& a : full) joined += (joined.empty() ? "" : " ") + a;
        throw DpdkError(fmt::format("rte_eal_init failed: {} (rte_errno {}); args: {}",
                                    rte_strerror(err), err, joined));
    }
    g_eal_up.store(true);
    return full;
}

void eal_cleanup() noexcept {
    if (!g_eal_up.exchange(false)) return;
    // The primary owns its runtime directory (/var/run/dpdk/<prefix>); 22.11
    // leaves it behind, and per-pid prefixes would pile them up.
    std::string dir;
    if (rte_eal_process_type() == RTE_PROC_PRIMARY) dir = rte_eal_get_runtime_dir();
    rte_eal_cleanup();
    if (!dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
}

}  // namespace mroce::dpdk
