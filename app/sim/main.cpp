// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) 2026 The mroce authors
//
// mroce-sim: runs one scenario file (doc/results.md, "Scenario files") on the
// simulated fabric with mroce's engine or the RoCEv2 baseline and prints what
// it measured as JSON.
//
// usage: mroce-sim SCENARIO [section.key=value ...] [--json FILE] [--csv FILE] [--quiet]
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "run.hpp"

using namespace mroce::simapp;

int main(int argc, char** argv) {
    std::string path, json_path, csv_path;
    std::vector<std::string> overrides;
    bool quiet = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--json" || a == "--csv") && i + 1 < argc) (a == "--json" ? json_path : csv_path) = argv[++i];
        else if (a == "--quiet") quiet = true;
        else if (a == "-h" || a == "--help") {
            std::printf("usage: mroce-sim SCENARIO [section.key=value ...] [--json FILE] [--csv FILE] [--quiet]\n"
                        "Scenario format: doc/results.md. Overrides, e.g. fabric.path_loss=0.01 scenario.transport=roce.\n");
            return 0;
        } else if (a.find('=') != std::string::npos) overrides.push_back(a);
        else if (path.empty()) path = a;
        else {
            std::fprintf(stderr, "mroce-sim: unexpected argument '%s'\n", a.c_str());
            return 2;
        }
    }
    if (path.empty()) {
        std::fprintf(stderr, "usage: mroce-sim SCENARIO [section.key=value ...] [--json FILE] [--csv FILE]\n");
        return 2;
    }
    try {
        Scenario s = load_scenario(path);
        for (const std::string& o : overrides) override_scenario(s, o);
        const RunResult r = run_scenario(s, !quiet);
        const std::string js = r.json(s);
        if (json_path.empty()) {
            std::fputs(js.c_str(), stdout);
        } else {
            std::FILE* f = std::fopen(json_path.c_str(), "w");
            if (!f) throw std::runtime_error(json_path + ": " + std::strerror(errno));
            std::fputs(js.c_str(), f);
            std::fclose(f);
        }
        if (!csv_path.empty()) {
            std::FILE* f = std::fopen(csv_path.c_str(), "w");
            if (!f) throw std::runtime_error(csv_path + ": " + std::strerror(errno));
            r.write_csv(f);
            std::fclose(f);
        }
        return r.completed && r.failed_ops == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "mroce-sim: %s\n", e.what());
        return 2;
    }
}
