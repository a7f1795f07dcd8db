// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Completion channels (doc/spec.md R-NOTIFY-3): an eventfd in semaphore mode
// whose count is the number of events waiting, and the queue of the CQs that
// fired. The device's drive loop posts (queue first, then the count), any
// thread takes (the count first, then the queue), so a readable fd always
// has its event queued.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "mroce/api.hpp"

namespace mroce {

CompletionChannel::CompletionChannel(Device& dev)
    : dev_(dev), fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE)) {
    if (fd_ < 0) throw Error(std::string("create_comp_channel: eventfd: ") + std::strerror(errno));
}

CompletionChannel::~CompletionChannel() {
    if (fd_ >= 0) ::close(fd_);
}

void CompletionChannel::post(uint32_t cq, uint32_t n) {
    {
        std::lock_guard<std::mutex> g(mu_);
        q_.insert(q_.end(), n, cq);
    }
    const uint64_t v = n;
    // Only an overflow of the 64-bit count could fail: nothing to do about it here.
    [[maybe_unused]] const ssize_t w = ::write(fd_, &v, sizeof v);
}

bool CompletionChannel::take(uint32_t& cq) {
    uint64_t v = 0;
    // Never blocks, whatever O_NONBLOCK the fd has: the verbs provider hands
    // it out blocking, as rdma-core does, and a program may change it.
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (::read(fd_, &v, sizeof v) != ssize_t(sizeof v)) return false;  // EAGAIN: another took it
    {
        std::lock_guard<std::mutex> g(mu_);
        cq = q_.front();
        q_.pop_front();
    }
    std::lock_guard<std::mutex> e(dev_.ev_mu_);
    ++dev_.events_got_[cq - 1];
    return true;
}

bool CompletionChannel::get_event(uint32_t& cq, Time timeout_ns) {
    if (take(cq)) return true;
    const bool manual = dev_.config().progress == ProgressMode::manual;
    const Time start = dev_.now();
    for (;;) {
        if (manual) {
            const bool moved = dev_.progress() != 0;
            if (take(cq)) return true;
            if (dev_.now() - start >= timeout_ns) return false;
            dev_.idle(moved);
            continue;
        }
        const Time spent = dev_.now() - start;
        if (spent >= timeout_ns) return false;
        const Time left = timeout_ns - spent;
        // poll() takes ms; wake at least every 100 ms so a long timeout is re-checked.
        const int ms = int(std::min<Time>((left + 999'999) / 1'000'000, 100));
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, ms) > 0 && take(cq)) return true;
    }
}

}  // namespace mroce
