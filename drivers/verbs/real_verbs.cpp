// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "real_verbs.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace mroce::verbs::real {

namespace {
void* library() noexcept {
    static void* const h = []() -> void* {
        const char* e = std::getenv("MROCE_VERBS_REAL");
        if (e && std::strcmp(e, "0") == 0) return nullptr;
        // Already loaded when the program links it; otherwise loaded here,
        // local to us, so it never takes the place of the provider.
        void* p = ::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        return p ? p : ::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    }();
    return h;
}
}  // namespace

void* sym(const char* name, const char* version) noexcept {
    void* h = library();
    void* f = h ? ::dlvsym(h, name, version) : nullptr;
    if (!f) errno = ENOSYS;
    return f;
}

}  // namespace mroce::verbs::real
