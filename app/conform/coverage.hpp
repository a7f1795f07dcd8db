// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// Traceability: the normative rules of doc/spec.md (parsed from the text at
// run time, so the report cannot drift from the specification), the tests
// citing each, and for every rule no test covers the reason why (the table
// in coverage.cpp, checked against both).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "suite.hpp"

namespace mroce::conform {

// Rule ids in order of appearance ("- **R-X-n**" bullets), withdrawn ones left out.
std::vector<std::string> parse_spec_rules(const std::string& spec_text);

// Why a rule has no black-box test (rule id -> reason).
const std::map<std::string, std::string>& uncovered_reasons();

struct Coverage {
    std::vector<std::string> rules;                          // spec order
    std::map<std::string, std::vector<std::string>> tests;   // rule -> tests citing it
    std::vector<std::string> unknown_citations;              // "test: citation" naming no spec rule
    std::vector<std::string> reason_problems;                // a reason for a covered or unknown rule, a rule with neither
    size_t covered = 0;
    double percent() const { return rules.empty() ? 0 : 100.0 * double(covered) / double(rules.size()); }
};
Coverage compute_coverage(const std::vector<std::string>& rules, const std::vector<TestDef>& tests);

}  // namespace mroce::conform
