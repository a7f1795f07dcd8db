// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
#include "coverage.hpp"

#include <regex>
#include <set>
#include <sstream>

namespace mroce::conform {

std::vector<std::string> parse_spec_rules(const std::string& text) {
    // A rule is defined by a bullet "- **R-AREA-n**" at the start of a line;
    // "*withdrawn*" on that line retires it (spec section 0).
    static const std::regex def(R"(^- \*\*(R-[A-Z]+-[0-9]+)\*\*(.*)$)");
    std::vector<std::string> out;
    std::set<std::string> seen;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (!std::regex_match(line, m, def)) continue;
        if (m[2].str().find("*withdrawn*") != std::string::npos) continue;
        if (seen.insert(m[1].str()).second) out.push_back(m[1].str());
    }
    return out;
}

const std::map<std::string, std::string>& uncovered_reasons() {
    static const std::map<std::string, std::string> r = {
        {"R-PATH-7", "a consequence of R-SACK-2 and R-PATH-6 (no behaviour of its own); see R-SACK-2"},
        {"R-SACK-2", "the 256-PSN span binds only when cwnd reaches it with a floor held back by a timeout; on loopback "
                     "the window (max_cwnd 256) binds first, so a peer cannot tell the two limits apart"},
        {"R-WRAP-1", "needs 2^32 messages per stream, or the reference's test-only counter base that both ends must "
                     "share; covered by the engine's unit tests (test_seq_base), not observable black-box in a short run"},
        {"R-SEG-4", "MTU, DF and fragmentation are properties of the IP link; loopback (MTU 65536) neither fragments nor "
                    "shows DF to a UDP receiver (test/perf/perf_netns_mtu.py checks it on veth links)"},
        {"R-DATA-1", "where a sender reads payload from (registered memory at transmission time) is internal; the "
                     "visible parts are R-DATA-6 (identical resends) and R-INLINE-2 (copied at post), both tested"},
        {"R-ACK-7", "deferred placement differs from inline placement on the wire only in timing; the black-box "
                    "consequence (acknowledged means placed) is R-ACK-8's, tested"},
        {"R-NOTIFY-2", "the engine/drive-loop interface (take_cq_events) is internal to an implementation"},
        {"R-NOTIFY-3", "the native API's completion channel file descriptor is local to mroce's API; the suite "
                       "sees notifications through the control protocol (R-NOTIFY-1, tested)"},
        {"R-CC-8", "the split of window state into a separate CC stage is an implementation structure with no wire "
                   "behaviour of its own"},
        {"R-CC-9", "undoing a spurious timeout's window needs an ACK that both proves the timeout spurious and "
                   "acknowledges no new data, which R-CC-3's additive increase then masks on a one-packet window; "
                   "the cancelled resends of R-TIMER-7 are tested"},
        {"R-HINT-7", "the cap depends on the IUT's minimum RTT sample, which a peer on a shared host cannot pin "
                     "down precisely enough to predict a window of a few packets"},
        {"R-SCHED-3", "the score penalty of a marked round is internal; its effect (which of several paths with free "
                      "window goes first) is indistinguishable from window limits on loopback"},
        {"R-SCHED-10", "the order of packet kinds inside one tx_burst is not preserved by the UDP driver, which "
                       "regroups a burst by source socket"},
        {"R-TIMER-4", "defaults of the reference's EngineConfig; an IUT is configured by reset, and the socket "
                      "adapter raises the RTO floor to 1 ms by design (api.hpp socket_engine_defaults)"},
        {"R-TIMER-5", "next_deadline() is the engine's interface to its driver, not observable on the wire"},
        {"R-TIMER-6", "the engine taking time only from its driver is an implementation property"},
    };
    return r;
}

Coverage compute_coverage(const std::vector<std::string>& rules, const std::vector<TestDef>& tests) {
    Coverage c;
    c.rules = rules;
    const std::set<std::string> known(rules.begin(), rules.end());
    for (const auto& t : tests)
        for (const auto& cite : t.rules) {
            const std::string r = rule_of(cite);
            if (!known.count(r)) {
                c.unknown_citations.push_back(std::string(t.name) + ": " + cite);
                continue;
            }
            auto& v = c.tests[r];
            if (v.empty() || v.back() != t.name) v.push_back(t.name);
        }
    const auto& why = uncovered_reasons();
    for (const auto& r : rules) {
        const bool covered = c.tests.count(r) && !c.tests.at(r).empty();
        c.covered += covered;
        if (covered && why.count(r)) c.reason_problems.push_back(r + " is covered but still listed with a reason");
        if (!covered && !why.count(r)) c.reason_problems.push_back(r + " has no test and no reason");
    }
    for (const auto& [r, _] : why)
        if (!known.count(r)) c.reason_problems.push_back("a reason for " + r + ", which the spec does not define");
    return c;
}

}  // namespace mroce::conform
