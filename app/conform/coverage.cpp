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
