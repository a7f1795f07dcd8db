// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Work run on the EAL interrupt thread (eal-intr-thread), where the PMDs'
// control callbacks run one at a time (memif's control channel, link state).
// Used to close ports there (close_port_on_interrupt_thread in port.hpp):
// see doc/architecture.md section 1, the DPDK driver row.
#pragma once

namespace mroce::dpdk {

// Runs fn(arg) on the EAL interrupt thread and returns once it has run and
// the thread has gone back to waiting for events (so it has also rebuilt its
// wait list after any interrupt source that fn unregistered). Runs fn(arg)
// here instead when called on the interrupt thread itself, or when no
// interrupt source of ours could be registered. One job at a time, from
// any thread; not for the per-packet path (it waits on another thread).
//
// Why a source of our own and not an EAL alarm (rte_eal_alarm_set, which
// also runs there): the first alarm registers the EAL's alarm source, and
// rte_eal_cleanup unregisters it just before unmapping DPDK memory; that
// wakes the interrupt thread to rebuild its wait list, which reads every
// registered source's handle, memif's listener socket among them (22.11's
// memif never unregisters it, and its handle copy lives in DPDK memory): a
// SIGSEGV of the memif server at exit. Our source stays registered for the
// life of the process, so nothing of ours wakes that thread at cleanup.
void run_on_interrupt_thread(void (*fn)(void*), void* arg) noexcept;

}  // namespace mroce::dpdk
