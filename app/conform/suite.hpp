// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-conform's test framework: a registry of tests, each naming the spec
// rules it checks (doc/spec.md ids, optionally with a clause tag, "R-MEM-3:range"),
// and the failure a test reports (what was expected, what came instead).
// Tests talk to the implementation under test only through the wire (Peer)
// and the control protocol (Control): the suite links the wire codec, never
// the engine (doc/conformance.md).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mroce::conform {

class Control;

// An expectation that did not hold: ends the test.
struct Failure : std::runtime_error {
    std::string expected, got;
    Failure(std::string e, std::string g) : std::runtime_error(e), expected(std::move(e)), got(std::move(g)) {}
};

struct Ctx {
    Control& ctl;
    std::string note;  // set by a test for the report (a figure it measured)
};

using TestFn = void (*)(Ctx&);

struct TestDef {
    const char* name;
    std::vector<std::string> rules;  // citations: "R-X-n" or "R-X-n:clause"
    const char* what;                // one line: what the test does
    TestFn fn;
};

std::vector<TestDef>& registry();

struct Register {
    // rules: citations separated by blanks.
    Register(const char* name, const char* rules, const char* what, TestFn fn) {
        std::vector<std::string> r;
        std::string cur;
        for (const char* p = rules;; ++p) {
            if (*p == ' ' || *p == 0) {
                if (!cur.empty()) r.push_back(cur);
                cur.clear();
                if (!*p) break;
            } else {
                cur += *p;
            }
        }
        registry().push_back(TestDef{name, std::move(r), what, fn});
    }
};

// CONFORM_TEST(name, "R-X-n R-Y-m:clause", "what") { body using Ctx& t }
#define CONFORM_CAT2(a, b) a##b
#define CONFORM_CAT(a, b) CONFORM_CAT2(a, b)
#define CONFORM_TEST(name, rules, what)                                                        \
    static void CONFORM_CAT(test_, name)(::mroce::conform::Ctx & t);                           \
    static ::mroce::conform::Register CONFORM_CAT(reg_, name)(#name, rules, what,             \
                                                              &CONFORM_CAT(test_, name));     \
    static void CONFORM_CAT(test_, name)([[maybe_unused]] ::mroce::conform::Ctx & t)

// The rule id of a citation ("R-MEM-3:range" -> "R-MEM-3").
inline std::string rule_of(const std::string& citation) {
    const auto p = citation.find(':');
    return p == std::string::npos ? citation : citation.substr(0, p);
}

[[noreturn]] inline void fail(const std::string& expected, const std::string& got) { throw Failure(expected, got); }
inline void check(bool ok, const std::string& expected, const std::string& got) {
    if (!ok) fail(expected, got);
}
template <class A, class B>
void check_eq(const A& got, const B& want, const std::string& what) {
    if (!(got == want)) fail(what + " = " + std::to_string(want), what + " = " + std::to_string(got));
}

std::string hex(uint64_t v);

}  // namespace mroce::conform
