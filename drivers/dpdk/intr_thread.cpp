// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// rte_intr_instance_alloc / rte_intr_fd_set / rte_intr_type_set are
// experimental in DPDK 22.11 (stable in later releases); they are the only
// way to give the interrupt thread a source of our own.
#define ALLOW_EXPERIMENTAL_API 1

#include "mroce/dpdk/intr_thread.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include <rte_interrupts.h>

namespace mroce::dpdk {
namespace {

struct Job {
    void (*fn)(void*);
    void* arg;
};

// One per process, set up on first use and never torn down (see the header:
// unregistering it at exit would wake the interrupt thread during cleanup).
struct Runner {
    std::mutex mu;                     // one job at a time
    bool ready = false;
    int efd = -1;
    rte_intr_handle* handle = nullptr;
    std::atomic<Job*> job{nullptr};
    std::atomic<uint64_t> completed{0};
};

Runner& runner() {
    static Runner* r = new Runner;     // reachable for life; no destructor at exit
    return *r;
}

void on_event(void* arg) {
    auto* r = static_cast<Runner*>(arg);
    // The source is level-triggered (RTE_INTR_HANDLE_EXT: the EAL reads nothing): clear it.
    uint64_t n = 0;
    if (read(r->efd, &n, sizeof n) < 0) return;
    if (Job* j = r->job.exchange(nullptr, std::memory_order_acq_rel)) {
        j->fn(j->arg);
        // j is the caller's: not touched after this (the caller may return at once).
        r->completed.fetch_add(1, std::memory_order_release);
        r->completed.notify_all();
    }
}

bool set_up(Runner& r) {
    if (r.ready) return true;
    r.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r.efd < 0) return false;
    r.handle = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
    if (r.handle && rte_intr_fd_set(r.handle, r.efd) == 0 && rte_intr_type_set(r.handle, RTE_INTR_HANDLE_EXT) == 0 &&
        rte_intr_callback_register(r.handle, on_event, &r) == 0) {
        r.ready = true;
        return true;
    }
    rte_intr_instance_free(r.handle);
    r.handle = nullptr;
    close(r.efd);
    r.efd = -1;
    return false;
}

// Posts one job and waits until the interrupt thread has run it.
void post_and_wait(Runner& r, Job* j) {
    const uint64_t before = r.completed.load(std::memory_order_acquire);
    r.job.store(j, std::memory_order_release);
    const uint64_t one = 1;
    // An eventfd write of 1 cannot fail short of a counter overflow, which one
    // job at a time never reaches.
    (void)!write(r.efd, &one, sizeof one);
    for (uint64_t c; (c = r.completed.load(std::memory_order_acquire)) == before;) r.completed.wait(c);
}

void nothing(void*) {}

}  // namespace

void run_on_interrupt_thread(void (*fn)(void*), void* arg) noexcept {
    if (rte_thread_is_intr()) {
        fn(arg);
        return;
    }
    Runner& r = runner();
    std::lock_guard<std::mutex> g(r.mu);
    if (!set_up(r)) {
        fn(arg);
        return;
    }
    Job j{fn, arg};
    post_and_wait(r, &j);
    // A second, empty job: fn may have unregistered interrupt sources (a memif
    // close unregisters its control channel), which makes the interrupt thread
    // rebuild its wait list on its next wake-up, reading every source's handle.
    // epoll reports ready descriptors in the order they became ready, so the
    // EAL's wake-up pipe (written during fn) comes before this job's eventfd:
    // once it has run, the rebuild is done and the thread waits again, touching
    // nothing until an event comes.
    Job b{nothing, nullptr};
    post_and_wait(r, &b);
}

}  // namespace mroce::dpdk
