// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-conform: the black-box conformance suite (doc/conformance.md).
//
//   mroce-conform --control HOST:PORT       an IUT already serving the control protocol
//   mroce-conform --spawn "CMD ARGS"         start the IUT (it prints "... control HOST:PORT")
//   --list | --coverage | --test NAME | --rule R-X-n | --junit FILE | --json FILE
//   --expect-fail CITATIONS                  mutation check: exactly the tests citing these fail
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "control.hpp"
#include "coverage.hpp"
#include "peer.hpp"
#include "suite.hpp"

#ifndef MROCE_SPEC_PATH
#define MROCE_SPEC_PATH "doc/spec.md"
#endif

using namespace mroce::conform;

namespace mroce::conform {
std::vector<TestDef>& registry() {
    static std::vector<TestDef> r;
    return r;
}
}  // namespace mroce::conform

namespace {

struct Result {
    const TestDef* t = nullptr;
    bool pass = false;
    std::string expected, got, note;
    double seconds = 0;
};

void usage() {
    std::printf(
        "usage: mroce-conform (--control HOST:PORT | --spawn \"CMD\") [options]\n"
        "  --list                 list the tests and the rules each checks\n"
        "  --coverage             report every normative rule of the spec with its tests, and why the\n"
        "                         rest are not covered; non-zero exit below --min-coverage (90%%)\n"
        "  --test NAME            run only this test (repeatable; a trailing * matches a prefix)\n"
        "  --rule R-X-n           run only the tests citing this rule (repeatable)\n"
        "  --junit FILE, --json FILE   also write the results there\n"
        "  --expect-fail CITES    (mutation check) comma-separated citations a broken IUT violates:\n"
        "                         exit 0 iff exactly the tests citing them fail\n"
        "  --spec FILE            doc/spec.md to take the rule ids from (default: the source tree's)\n"
        "  --min-coverage PCT     threshold of --coverage (default 90)\n"
        "  -v                     print each test as it starts\n");
}

std::string xml_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
        case '&': o += "&amp;"; break;
        case '<': o += "&lt;"; break;
        case '>': o += "&gt;"; break;
        case '"': o += "&quot;"; break;
        default:
            if (uint8_t(c) < 0x20 && c != '\n' && c != '\t') o += ' ';
            else o += c;
        }
    }
    return o;
}

std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += c;
        } else if (uint8_t(c) < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += c;
        }
    }
    return o;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
}

bool cites(const TestDef& t, const std::string& citation) {
    for (const auto& c : t.rules)
        if (c == citation || c == rule_of(citation) || rule_of(c) == citation) return true;
    return false;
}

// The IUT process started by --spawn.
pid_t g_child = -1;

bool spawn_iut(const std::string& cmd, std::string& host, uint16_t& port) {
    int pfd[2];
    if (pipe(pfd) < 0) return false;
    g_child = fork();
    if (g_child < 0) return false;
    if (g_child == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    close(pfd[1]);
    std::string line;
    char c;
    while (read(pfd[0], &c, 1) == 1 && c != '\n') line += c;
    close(pfd[0]);
    const auto k = line.find(" control ");
    if (k == std::string::npos) {
        std::fprintf(stderr, "mroce-conform: the IUT printed '%s', not '... control HOST:PORT'\n", line.c_str());
        return false;
    }
    const std::string hp = line.substr(k + 9);
    const auto colon = hp.rfind(':');
    host = hp.substr(0, colon);
    port = uint16_t(std::stoul(hp.substr(colon + 1)));
    return true;
}

void stop_iut() {
    if (g_child > 0) {
        kill(g_child, SIGTERM);
        int st;
        waitpid(g_child, &st, 0);
        g_child = -1;
    }
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) return {};
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

int print_coverage(const Coverage& cov, double min_pct) {
    std::printf("%-14s %s\n", "rule", "tests (or why none)");
    const auto& why = uncovered_reasons();
    for (const auto& r : cov.rules) {
        auto it = cov.tests.find(r);
        if (it != cov.tests.end() && !it->second.empty()) {
            std::printf("%-14s %s\n", r.c_str(), join(it->second, ", ").c_str());
        } else {
            auto w = why.find(r);
            std::printf("%-14s NOT COVERED: %s\n", r.c_str(), w == why.end() ? "(no reason given)" : w->second.c_str());
        }
    }
    int bad = 0;
    for (const auto& u : cov.unknown_citations) {
        std::printf("error: citation of a rule the spec does not have: %s\n", u.c_str());
        ++bad;
    }
    for (const auto& u : cov.reason_problems) {
        std::printf("error: %s\n", u.c_str());
        ++bad;
    }
    std::printf("coverage: %zu of %zu normative rules covered by at least one test (%.1f%%), %zu not covered "
                "(each with its reason); %zu tests\n",
                cov.covered, cov.rules.size(), cov.percent(), cov.rules.size() - cov.covered, registry().size());
    if (cov.percent() < min_pct) {
        std::printf("error: coverage %.1f%% is below %.1f%%\n", cov.percent(), min_pct);
        ++bad;
    }
    return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string control, spawn, junit, json, expect_fail, spec = MROCE_SPEC_PATH;
    std::vector<std::string> only_tests, only_rules;
    bool list = false, coverage = false, verbose = false;
    double min_pct = 90;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "mroce-conform: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--control") control = next();
        else if (a == "--spawn") spawn = next();
        else if (a == "--list") list = true;
        else if (a == "--coverage") coverage = true;
        else if (a == "--test") only_tests.push_back(next());
        else if (a == "--rule") only_rules.push_back(next());
        else if (a == "--junit") junit = next();
        else if (a == "--json") json = next();
        else if (a == "--expect-fail") expect_fail = next();
        else if (a == "--spec") spec = next();
        else if (a == "--min-coverage") min_pct = std::stod(next());
        else if (a == "-v") verbose = true;
        else if (a == "--help" || a == "-h") {
            usage();
            return 0;
        } else {
            std::fprintf(stderr, "mroce-conform: unknown argument %s (see --help)\n", a.c_str());
            return 2;
        }
    }
    const std::string spec_text = read_file(spec);
    if (spec_text.empty()) {
        std::fprintf(stderr, "mroce-conform: cannot read the specification %s (--spec FILE)\n", spec.c_str());
        return 2;
    }
    const auto rules = parse_spec_rules(spec_text);
    const Coverage cov = compute_coverage(rules, registry());
    if (coverage) return print_coverage(cov, min_pct);

    // Selection.
    std::vector<const TestDef*> sel;
    for (const auto& t : registry()) {
        bool want = only_tests.empty() && only_rules.empty();
        for (const auto& n : only_tests) {
            if (!n.empty() && n.back() == '*') want |= std::string(t.name).rfind(n.substr(0, n.size() - 1), 0) == 0;
            else want |= n == t.name;
        }
        for (const auto& r : only_rules) want |= cites(t, r);
        if (want) sel.push_back(&t);
    }
    if (list) {
        for (const auto* t : sel) std::printf("%-40s %-60s %s\n", t->name, join(t->rules, " ").c_str(), t->what);
        std::printf("%zu tests\n", sel.size());
        return 0;
    }
    if (sel.empty()) {
        std::fprintf(stderr, "mroce-conform: no test matches the selection\n");
        return 2;
    }
    if (!cov.unknown_citations.empty()) {
        for (const auto& u : cov.unknown_citations) std::fprintf(stderr, "mroce-conform: unknown citation %s\n", u.c_str());
        return 2;
    }
    std::string host;
    uint16_t port = 0;
    if (!spawn.empty()) {
        signal(SIGPIPE, SIG_IGN);
        if (!spawn_iut(spawn, host, port)) {
            stop_iut();
            return 2;
        }
    } else if (!control.empty()) {
        const auto colon = control.rfind(':');
        if (colon == std::string::npos) {
            std::fprintf(stderr, "mroce-conform: --control HOST:PORT\n");
            return 2;
        }
        host = control.substr(0, colon);
        port = uint16_t(std::stoul(control.substr(colon + 1)));
    } else {
        usage();
        return 2;
    }
    Control ctl;
    try {
        ctl.open(host, port);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mroce-conform: %s\n", e.what());
        stop_iut();
        return 2;
    }
    std::printf("mroce-conform: IUT %s, control %s:%u, %zu tests\n", ctl.iut_name().c_str(), host.c_str(), port,
                sel.size());

    std::vector<Result> res;
    const uint64_t t_all = now_ns();
    for (const auto* t : sel) {
        if (verbose) std::printf("... %s\n", t->name), std::fflush(stdout);
        Result r;
        r.t = t;
        Ctx ctx{ctl, {}};
        const uint64_t t0 = now_ns();
        try {
            t->fn(ctx);
            r.pass = true;
        } catch (const Failure& f) {
            r.expected = f.expected;
            r.got = f.got;
        } catch (const std::exception& e) {
            r.expected = "the test to run";
            r.got = std::string("error: ") + e.what();
        }
        r.note = ctx.note;
        r.seconds = double(now_ns() - t0) / 1e9;
        res.push_back(r);
    }
    const double total = double(now_ns() - t_all) / 1e9;
    stop_iut();

    // Terminal table.
    size_t failed = 0;
    std::printf("\n%-38s %-6s %7s  %s\n", "test", "result", "seconds", "rules");
    for (const auto& r : res) {
        std::printf("%-38s %-6s %7.3f  %s\n", r.t->name, r.pass ? "pass" : "FAIL", r.seconds,
                    join(r.t->rules, " ").c_str());
        if (!r.pass) {
            ++failed;
            std::printf("    expected: %s\n    got:      %s\n", r.expected.c_str(), r.got.c_str());
        }
        if (!r.note.empty()) std::printf("    note: %s\n", r.note.c_str());
    }
    std::printf("\n%zu passed, %zu failed, %.1f s; rule coverage %zu/%zu (%.1f%%)\n", res.size() - failed, failed,
                total, cov.covered, cov.rules.size(), cov.percent());

    if (!junit.empty()) {
        std::ofstream o(junit);
        o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"mroce-conform\" tests=\""
          << res.size() << "\" failures=\"" << failed << "\" errors=\"0\" time=\"" << total << "\">\n";
        for (const auto& r : res) {
            o << "  <testcase classname=\"mroce-conform\" name=\"" << xml_escape(r.t->name) << "\" time=\""
              << r.seconds << "\">\n    <properties><property name=\"rules\" value=\""
              << xml_escape(join(r.t->rules, " ")) << "\"/></properties>\n";
            if (!r.pass)
                o << "    <failure message=\"expected: " << xml_escape(r.expected) << "\">got: " << xml_escape(r.got)
                  << "</failure>\n";
            o << "  </testcase>\n";
        }
        o << "</testsuite>\n</testsuites>\n";
    }
    if (!json.empty()) {
        std::ofstream o(json);
        o << "{\n  \"iut\": \"" << json_escape(ctl.iut_name()) << "\",\n  \"passed\": " << res.size() - failed
          << ",\n  \"failed\": " << failed << ",\n  \"seconds\": " << total << ",\n  \"coverage\": {\"rules\": "
          << cov.rules.size() << ", \"covered\": " << cov.covered << "},\n  \"tests\": [\n";
        for (size_t i = 0; i < res.size(); ++i) {
            const auto& r = res[i];
            o << "    {\"name\": \"" << json_escape(r.t->name) << "\", \"rules\": [";
            for (size_t k = 0; k < r.t->rules.size(); ++k) o << (k ? ", " : "") << "\"" << r.t->rules[k] << "\"";
            o << "], \"result\": \"" << (r.pass ? "pass" : "fail") << "\", \"seconds\": " << r.seconds;
            if (!r.pass)
                o << ", \"expected\": \"" << json_escape(r.expected) << "\", \"got\": \"" << json_escape(r.got) << "\"";
            o << "}" << (i + 1 < res.size() ? "," : "") << "\n";
        }
        o << "  ]\n}\n";
    }

    if (!expect_fail.empty()) {
        // Mutation check: the failing tests are exactly those citing a broken citation.
        std::vector<std::string> broken;
        std::stringstream ss(expect_fail);
        for (std::string c; std::getline(ss, c, ',');)
            if (!c.empty()) broken.push_back(c);
        std::set<std::string> want, got;
        for (const auto& r : res) {
            bool w = false;
            for (const auto& b : broken)
                for (const auto& c : r.t->rules) w |= c == b || c == rule_of(b);
            if (w) want.insert(r.t->name);
            if (!r.pass) got.insert(r.t->name);
        }
        int bad = want.empty();
        if (want.empty()) std::printf("mutation check: no selected test cites %s\n", expect_fail.c_str());
        for (const auto& n : want)
            if (!got.count(n)) std::printf("mutation check: %s cites a broken rule but passed\n", n.c_str()), ++bad;
        for (const auto& n : got)
            if (!want.count(n)) std::printf("mutation check: %s failed but cites none of %s\n", n.c_str(), expect_fail.c_str()), ++bad;
        std::printf("mutation check (%s): %zu tests cite it, %zu failed: %s\n", expect_fail.c_str(), want.size(),
                    got.size(), bad ? "MISMATCH" : "exactly those");
        return bad ? 1 : 0;
    }
    return failed ? 1 : 0;
}
