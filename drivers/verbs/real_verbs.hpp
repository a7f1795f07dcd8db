// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// The installed libibverbs, for every call on an object that is not mroce's:
// a real device keeps working beside mroce's (doc/architecture.md 8). Loaded
// on first use with dlopen("libibverbs.so.1") and resolved with dlvsym at the
// version the application itself asked for, so the provider never calls its
// own interposed definitions. MROCE_VERBS_REAL=0 leaves it unloaded.
#pragma once

#include <cerrno>

namespace mroce::verbs::real {

// The real library's definition of name@version; nullptr (errno ENOSYS) when
// the library or the symbol is absent.
void* sym(const char* name, const char* version) noexcept;

template <class F>
F fn(const char* name, const char* version) noexcept {
    return reinterpret_cast<F>(sym(name, version));
}

}  // namespace mroce::verbs::real

// The real definition of `name` (a function declared by <infiniband/verbs.h>),
// resolved once per call site.
#define MROCE_REAL(name, version)                                                                   \
    ([]() noexcept {                                                                                \
        static const auto f = ::mroce::verbs::real::fn<decltype(&name)>(#name, version);            \
        return f;                                                                                   \
    }())
