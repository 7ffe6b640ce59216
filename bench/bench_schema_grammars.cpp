// Compares our JSON-schema converter (sdk/src/grammar/json_schema.h) with llama.cpp's by the texts their grammars
// admit, not by the grammars' spelling (ours names and orders its rules differently).
//
//   python3 bench/schema_cases_from_llama_cpp.py LLAMA_CPP/tests/test-json-schema-to-grammar.cpp > cases.jsonl
//   build/bin/bench_schema_grammars cases.jsonl [--walks 400] [--seed 1] [--show 2]
//
// Each line: {"name", "expect": "SUCCESS"|"FAILURE", "schema", "grammar"}, "grammar" being llama.cpp's converter's
// output for the schema. For every case both grammars are parsed by our GBNF parser; texts are drawn from each by
// random walks over characters (each step one of the characters the grammar admits next, punctuation weighted up so
// that strings close; a walk ends where the grammar may end, with a probability that grows with its length), and
// every text drawn from one grammar is matched against the other. A case "agrees" when no text separates them; else
// the first texts each side admits alone are printed. Sampling finds differences, it cannot prove there are none:
// the walks' number and seed are printed with the result.
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "core/error.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace {

using specula::internal::Grammar;
using specula::internal::GrammarMatcher;

// The characters a walk may choose from: printable ASCII, the whitespace JSON allows, and a few multi-byte ones.
std::vector<std::string> alphabet() {
    std::vector<std::string> chars;
    for (int c = 0x20; c < 0x7f; ++c) chars.push_back(std::string(1, char(c)));
    for (const char *c : {"\n", "\t", "\r", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}) chars.push_back(c);
    return chars;
}

bool is_alnum(const std::string &c) { return c.size() == 1 && std::isalnum(static_cast<unsigned char>(c[0])); }

// One random text the grammar admits, or "" with ok = false when the walk got stuck or ran too long.
std::string walk(const std::shared_ptr<const Grammar> &grammar, const std::vector<std::string> &chars, std::mt19937_64 &rng, bool &ok) {
    GrammarMatcher m(grammar);
    std::string text;
    std::vector<double> weight(chars.size());
    for (int step = 0; step < 600; ++step) {
        if (m.can_end()) {
            const double p_end = std::min(0.9, 0.05 + double(text.size()) / 200.0);
            if (m.finished() || std::uniform_real_distribution<double>(0, 1)(rng) < p_end) {
                ok = true;
                return text;
            }
        }
        double total = 0;
        for (size_t i = 0; i < chars.size(); ++i) {
            weight[i] = m.accepts(chars[i]) ? (is_alnum(chars[i]) ? 1.0 : 6.0) : 0.0;
            total += weight[i];
        }
        if (total == 0) break;
        std::discrete_distribution<size_t> pick(weight.begin(), weight.end());
        const size_t i = pick(rng);
        m.accept(chars[i]);
        text += chars[i];
    }
    ok = false;
    return text;
}

bool admits(const std::shared_ptr<const Grammar> &grammar, const std::string &text) {
    GrammarMatcher m(grammar);
    return m.accept(text) && m.can_end();
}

std::string quoted(const std::string &text) { return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// Where the grammar stops following the text: "refused at byte N (...)" with the text around it, or "incomplete".
std::string where_refused(const std::shared_ptr<const Grammar> &grammar, const std::string &text) {
    GrammarMatcher m(grammar);
    for (size_t i = 0; i < text.size(); ++i)
        if (!m.accept(text.substr(i, 1))) {
            const size_t from = i > 12 ? i - 12 : 0;
            return "refused at byte " + std::to_string(i) + ": " + quoted(text.substr(from, i - from)) + " then " + quoted(text.substr(i, 1));
        }
    return "incomplete at its end";
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"Compares our JSON-schema converter's grammars with llama.cpp's by the texts they admit"};
    std::string cases_path;
    int walks = 400;
    uint64_t seed = 1;
    int show = 2;
    app.add_option("cases", cases_path, "JSON lines from bench/schema_cases_from_llama_cpp.py")->required();
    app.add_option("--walks", walks, "texts drawn from each grammar per case");
    app.add_option("--seed", seed, "random seed of the walks");
    app.add_option("--show", show, "texts printed per side when the grammars differ");
    CLI11_PARSE(app, argc, argv);

    std::ifstream in(cases_path);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", cases_path.c_str());
        return 2;
    }
    const std::vector<std::string> chars = alphabet();
    std::mt19937_64 rng(seed);
    int n_cases = 0, n_agree = 0, n_both_refuse = 0, n_differ = 0;
    std::string line;
    std::printf("%-64s %-9s %-12s %s\n", "case (llama.cpp's test-json-schema-to-grammar)", "llama.cpp", "ours", "texts");
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        const nlohmann::json c = nlohmann::json::parse(line);
        const std::string name = c.at("name"), expect = c.at("expect"), schema = c.at("schema"), reference = c.at("grammar");
        ++n_cases;
        std::string ours_text, ours_status = "SUCCESS", why;
        try {
            ours_text = specula::internal::json_schema_to_grammar(schema);
        } catch (const specula::internal::Error &e) {
            ours_status = e.status() == SPECULA_ERR_UNSUPPORTED ? "UNSUPPORTED" : "FAILURE";
            why = e.what();
        }
        const bool both_fail = expect == "FAILURE" && ours_status != "SUCCESS";
        if (expect != "SUCCESS" || ours_status != "SUCCESS") {
            if (both_fail) ++n_both_refuse;
            std::printf("%-64s %-9s %-12s %s\n", name.c_str(), expect.c_str(), ours_status.c_str(),
                        both_fail ? "(both refuse)" : why.c_str());
            if (both_fail) ++n_agree; else ++n_differ;
            continue;
        }
        std::shared_ptr<const Grammar> ours, theirs;
        try {
            ours = Grammar::parse(ours_text);
            theirs = Grammar::parse(reference);
        } catch (const std::exception &e) {
            std::printf("%-64s %-9s %-12s a grammar did not parse: %s\n", name.c_str(), expect.c_str(), ours_status.c_str(), e.what());
            ++n_differ;
            continue;
        }
        std::vector<std::string> only_ours, only_theirs;
        int drawn_ours = 0, drawn_theirs = 0;
        for (int i = 0; i < walks; ++i) {
            bool ok = false;
            std::string t = walk(ours, chars, rng, ok);
            if (ok) {
                ++drawn_ours;
                if (!admits(theirs, t) && int(only_ours.size()) < show) only_ours.push_back(t);
            }
            t = walk(theirs, chars, rng, ok);
            if (ok) {
                ++drawn_theirs;
                if (!admits(ours, t) && int(only_theirs.size()) < show) only_theirs.push_back(t);
            }
        }
        const bool agree = only_ours.empty() && only_theirs.empty();
        agree ? ++n_agree : ++n_differ;
        std::printf("%-64s %-9s %-12s %s (%d + %d texts)\n", name.c_str(), expect.c_str(), ours_status.c_str(),
                    agree ? "agree" : "DIFFER", drawn_ours, drawn_theirs);
        for (const std::string &t : only_ours)
            std::printf("    only ours admit:       %s\n      llama.cpp's grammar: %s\n", quoted(t).c_str(), where_refused(theirs, t).c_str());
        for (const std::string &t : only_theirs)
            std::printf("    only llama.cpp admits: %s\n      our grammar: %s\n", quoted(t).c_str(), where_refused(ours, t).c_str());
    }
    std::printf("\n%d cases: %d agree (%d of them refused by both), %d differ; %d walks per grammar, seed %llu\n", n_cases, n_agree,
                n_both_refuse, n_differ, walks, (unsigned long long)seed);
    return 0;
}
