// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// EAL bring-up for the DPDK driver. The EAL can be initialised once per
// process, so this is the single place that owns that decision.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mroce::dpdk {

// Setup-time failure (EAL, ethdev, mempool). Never thrown from a burst call.
class DpdkError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct EalConfig {
    std::string program = "mroce";
    // Passed to rte_eal_init verbatim after the program name (e.g. "-l", "0",
    // "--no-pci", "--vdev=net_ring0"). Options below only add what is missing.
    std::vector<std::string> args;
    // If args choose no memory mode themselves: use hugepages when some are free
    // and hugetlbfs is mounted, else "--no-huge -m memory_mb". "--no-huge" given
    // without "-m" gets "-m memory_mb" too (the EAL default of 64 MB is too small).
    bool auto_memory = true;
    uint32_t memory_mb = 256;
    // Added as --file-prefix when args have none. Empty: "mroce-<pid>", so two
    // processes (or a test beside a running app) never share runtime files.
    std::string file_prefix;
    // In hugepage mode add --huge-unlink: a standalone primary's hugepage files
    // have no reader after it exits, and with per-process prefixes every run
    // would otherwise strand its pages in hugetlbfs. False for multi-process
    // setups where secondaries attach to our memory.
    bool unlink_hugepages = true;
};

// The full argument list eal_init would pass (program name first), with the
// memory mode and file prefix completed as described above. No side effects
// beyond reading /proc/mounts and /sys/kernel/mm/hugepages.
std::vector<std::string> eal_args(const EalConfig& cfg);

// Initialises the EAL with eal_args(cfg); returns the argument list used (program name first).
// Throws DpdkError naming rte_strerror(rte_errno) and the arguments on failure,
// or if the EAL is already initialised.
std::vector<std::string> eal_init(const EalConfig& cfg);
bool eal_initialised() noexcept;
// rte_eal_cleanup(); every port and pool must be gone first.
void eal_cleanup() noexcept;

// net_memif vdevs in EAL arguments whose buffers (bsize, DPDK's default 2048)
// are smaller than a frame of frame_bytes: DPDK 22.11's memif corrupts frames
// that span buffers (a multi-buffer frame leaves a stale chain flag in its
// first descriptor on the client-to-server ring; later frames in that slot
// pick up garbage). Returns what is wrong, empty when nothing is.
std::string memif_buffer_problem(const std::vector<std::string>& args, uint32_t frame_bytes);

// Free hugepage bytes over all page sizes, 0 when none or no hugetlbfs mount.
uint64_t free_hugepage_bytes();

}  // namespace mroce::dpdk
