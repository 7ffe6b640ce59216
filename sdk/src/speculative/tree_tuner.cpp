#include "tree_tuner.h"

#include <algorithm>
#include <cmath>

namespace specula::internal {
namespace {

// Model-drafter shapes worth trying, smallest first: chains (best when verifying a node costs a good part of a
// decode step, as on a CPU), then trees that trade nodes for acceptance (best when a pass over many nodes costs
// about one decode step, as on a GPU), up to LongSpec's default tree.
const std::vector<std::vector<int32_t>> kLadder = {
    {1}, {1, 1}, {1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2}, {2, 2, 2, 2, 2, 2}, {4, 4, 4, 4}, {4, 8, 8, 8}, {4, 16, 16, 16, 16},
};
// N-gram shares tried (bounded by the configured n-gram nodes, which is tried too).
const std::vector<int32_t> kNgramShares = {2, 4, 8, 16, 32, 64};

constexpr double kBucketDecay = 0.8;  // verify curve: weight of a bucket's older samples at each new one
constexpr double kDraftDecay = 0.95;  // draft-time fit, per drafted round
constexpr double kDepthDecay = 0.97;  // chain acceptance per depth, per chain round
constexpr double kArmDecay = 0.9;     // a shape's tokens per round, per round it plays...
constexpr double kAgeDecay = 0.995;   // ...and per round of the session (half-life about 140 rounds)
constexpr double kProbeWithin = 0.8;  // probe shapes estimated at >= 80% of the best
constexpr double kDeeperWithin = 0.03;  // a deeper chain estimated within 3 % of the best chain is played instead...
constexpr double kDeeperTries = 8.0;    // ...while its deepest level has been tried fewer times than this (decayed)
constexpr int32_t kFirstBackoff = 16, kMaxBackoff = 128;
constexpr int32_t kProbeGap = 8;      // at most one probe in this many rounds
constexpr int32_t kStaleAfter = 64;   // one probe of a shape unplayed for this many rounds, at most this often...
constexpr double kStaleWithin = 0.5;  // ...if estimated at >= 50% of the best
// While plain decoding is the best shape, probes may lose at most this share of the time the rounds took: a probe's
// loss is its measured time minus the time the best shape would have taken for the tokens it produced (a drafter
// catching up after a stretch of plain rounds, a shape that does worse than guessed). Without the bound, a model
// whose decode step takes a tenth of a millisecond pays more for probing than any shape can win back.
constexpr double kExploreShare = 0.01;
// ...plus this many plain steps: at the start of a session 1% of the time is a fraction of one probe, and one
// unlucky first probe (a chain of 1 rejected) kept a draft that doubles the speed out of a whole 128-token
// completion (simulated: 0.88x the best fixed shape on average, 0.94x with the allowance).
constexpr double kExploreSteps = 4.0;
constexpr double kExploreDecay = 0.999;  // the time counted toward that share, per round (about 1000 rounds)
// While plain decoding is the best shape and no probe is due, the choice is re-examined only every this many
// rounds: the rates of every candidate cost a few microseconds, a visible part of a tiny model's decode step,
// and a plain round changes no estimate but verify(1).
constexpr int32_t kPlainRecheck = 8;
// A shape's estimate rests on measurements (rather than its guess) while this many rounds of it count: its own
// (decayed and aged; one round played ~140 rounds ago is half of one), for chains the tries of their last level.
constexpr double kTrusted = 0.5;
// Chains' acceptance before it is measured: a trained draft's token is right about 7 times in 10 (the widened pair's
// LongSpec draft on held-out code: ~0.7-0.8 a level at 1K; at 8K 0.64 at depth 1 and ~0.9 below it), and that
// guess, and at a depth not tried yet the depth above's estimate, count as two tries. With even odds counted as one try, the first chain of 1 rejected (one completion in
// four for a draft right 0.75 of the time) put depth 1 at 0.25 and the chain below plain decoding, where probes are
// rationed, and the completion went on plainly: at 8K (simulated, tests/unit/test_tree_tuner.cpp) 5 of 40
// completions made 0.63-0.75x the best fixed shape; and two misses at depth 2 put it at 0.27, so that every deeper
// chain looked no better than a chain of 1.
constexpr double kPriorAccept = 0.7;
constexpr double kPriorTries = 2.0;
// A model drafter catches up with the tokens produced while it was idle (plain rounds, n-gram-only rounds) before
// it drafts: a draft model evaluates all of them, LongSpec refills its window. A round that follows more than
// kCleanBehind such tokens is a resume: its draft time, mostly catching up, is kept out of the draft-time fit (it
// would make every shape look slow, or deep shapes cheap) and measured as a cost per token behind, which the
// model shapes' expected time then carries, spread over kResumeRounds rounds.
constexpr int32_t kCleanBehind = 16;
constexpr double kResumeRounds = 8.0;
constexpr double kResumeDecay = 0.8;

bool fits(const std::vector<int32_t> &w, const TreeShape &bound) {
    if (w.size() > bound.widths.size()) return false;
    for (size_t i = 0; i < w.size(); ++i)
        if (w[i] > bound.widths[i]) return false;
    return true;
}

int32_t bucket_of(double n) { return std::max(0, int32_t(std::ceil(std::log2(std::max(n, 1.0)) - 1e-9))); }

// Solves the 3x3 system [a | b] in place; false when it is singular.
bool solve3(double a[3][4], double x[3]) {
    for (int c = 0; c < 3; ++c) {
        int p = c;
        for (int r = c + 1; r < 3; ++r)
            if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
        if (std::fabs(a[p][c]) < 1e-12) return false;
        for (int k = 0; k < 4; ++k) std::swap(a[c][k], a[p][k]);
        for (int r = 0; r < 3; ++r) {
            if (r == c) continue;
            const double f = a[r][c] / a[c][c];
            for (int k = c; k < 4; ++k) a[r][k] -= f * a[c][k];
        }
    }
    for (int c = 0; c < 3; ++c) x[c] = a[c][3] / a[c][c];
    return true;
}

// Levels and rows the model drafter scores for a shape: level l scores the nodes of depth l (the root first);
// the deepest level's nodes are never scored.
void draft_work(const TreeShape &shape, double &levels, double &rows) {
    levels = double(shape.widths.size());
    rows = shape.widths.empty() ? 0.0 : 1.0;
    for (size_t l = 0; l + 1 < shape.widths.size(); ++l) rows += shape.widths[l];
}

}  // namespace

std::string TreeChoice::to_string() const {
    if (plain()) return "plain";
    std::string s = shape.widths.empty() ? "" : shape.to_string();
    if (ngram_nodes > 0) s += (s.empty() ? "ngram:" : "+ngram:") + std::to_string(ngram_nodes);
    return s;
}

TreeTuner::TreeTuner(bool model, const TreeShape *bound, bool ngram, int32_t max_ngram_nodes) {
    choices_.push_back(TreeChoice{TreeShape{std::vector<int32_t>{}}, 0});
    std::vector<std::vector<int32_t>> shapes;
    if (model) {
        for (const auto &w : kLadder)
            if (bound == nullptr || fits(w, *bound)) shapes.push_back(w);
        if (bound != nullptr && std::find(shapes.begin(), shapes.end(), bound->widths) == shapes.end()) shapes.push_back(bound->widths);
    }
    std::vector<int32_t> shares;
    if (ngram && max_ngram_nodes > 0) {
        for (int32_t s : kNgramShares)
            if (s < max_ngram_nodes) shares.push_back(s);
        shares.push_back(max_ngram_nodes);
    }
    for (const auto &w : shapes) choices_.push_back(TreeChoice{TreeShape{w}, 0});
    if (model && !shares.empty()) {
        // Merged: n-gram candidates alone (the model drafter idle), every share from the small one up (they are
        // measured by counterfactual rounds, without probes: held-out code on the widened 1B pair ran fastest with
        // 8 n-gram nodes, which auto could not choose when only 4 and 16 were offered; 2 is left out: on a tiny
        // model whose lookups cost 5% of a step, its estimate, blind to the lookups that found nothing, beat plain
        // decoding by less than that), and each model shape with a small and the full n-gram share. More
        // combinations would mostly cost probes.
        const int32_t small = std::min(4, max_ngram_nodes);
        for (int32_t s : shares)
            if (s >= small) choices_.push_back(TreeChoice{TreeShape{std::vector<int32_t>{}}, s});
        for (const auto &w : shapes) {
            choices_.push_back(TreeChoice{TreeShape{w}, small});
            if (max_ngram_nodes != small) choices_.push_back(TreeChoice{TreeShape{w}, max_ngram_nodes});
        }
    } else {
        for (int32_t s : shares) choices_.push_back(TreeChoice{TreeShape{std::vector<int32_t>{}}, s});
    }
    arms_.resize(choices_.size());
    for (size_t i = 0; i < choices_.size(); ++i)
        if (choices_[i].shape.widths.empty() && choices_[i].ngram_nodes > 0) shadow_choices_.push_back(int32_t(i));
    // Each shape's parts (the same model tree alone, the same n-gram share alone) and the shapes it holds (chains
    // of no more levels, narrower trees, fewer n-gram nodes).
    parts_.assign(choices_.size(), {-1, -1});
    for (size_t i = 0; i < choices_.size(); ++i)
        for (size_t j = 0; j < choices_.size(); ++j) {
            if (choices_[j].ngram_nodes == 0 && !choices_[j].plain() && choices_[j].shape.widths == choices_[i].shape.widths)
                parts_[i].first = int32_t(j);
            if (choices_[j].shape.widths.empty() && choices_[j].ngram_nodes > 0 && choices_[j].ngram_nodes == choices_[i].ngram_nodes)
                parts_[i].second = int32_t(j);
        }
    inside_.resize(choices_.size());
    for (size_t i = 0; i < choices_.size(); ++i)
        for (size_t j = 0; j < choices_.size(); ++j)
            if (i != j && !choices_[j].plain() && choices_[j].ngram_nodes <= choices_[i].ngram_nodes &&
                fits(choices_[j].shape.widths, choices_[i].shape))
                inside_[i].push_back(int32_t(j));
    buckets_.resize(14);
    depth_hit_.assign(size_t(kMaxDepth), 0.0);
    depth_try_.assign(size_t(kMaxDepth), 0.0);
    points_.reserve(buckets_.size());
    refresh();
}

int32_t TreeTuner::max_model_nodes() const {
    int32_t n = 0;
    for (const TreeChoice &c : choices_)
        if (!c.shape.widths.empty()) n = std::max(n, c.shape.max_nodes());
    return n;
}

// What the estimates need, recomputed on the first read after rounds were recorded rather than for each of the many
// rate() calls of a round: the verify curve's points, the draft fit's coefficients, and the chains' acceptance per
// depth.
void TreeTuner::refresh() const {
    if (!dirty_) return;
    dirty_ = false;
    points_.clear();
    // An earlier session's curve (learn()) fills the node counts this session has not verified, scaled by how this
    // session's passes compare with it where both measured.
    const double scale = prior_scale();
    for (size_t i = 0; i < buckets_.size(); ++i)
        if (const auto p = curve_point(i, scale); p.first > 0) points_.push_back(p);

    double a[3][4];
    std::copy(&ls_[0][0], &ls_[0][0] + 12, &a[0][0]);
    // Regularisers (they matter only while the data cannot tell the terms apart, e.g. after chains alone, where
    // levels = rows): a row costs about a quarter of a level, and the constant is small.
    const double lambda = 0.05 * (1.0 + a[0][0]);
    const double v[3] = {0.0, -0.25, 1.0};
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 3; ++k) a[r][k] += lambda * v[r] * v[k];
    a[0][0] += 0.01 * lambda;
    if (draft_rounds_ == 0 || !solve3(a, draft_coef_)) {
        // Nothing drafted yet: a level about a tenth of a decode step, as a one-layer draft is.
        const double t1 = verify_ms(1.0);
        draft_coef_[0] = 0.0;
        draft_coef_[1] = 0.1 * t1;
        draft_coef_[2] = 0.025 * t1;
    }

    // Chains: acceptance at each depth given the depth above (kPriorAccept before any chain; a depth not measured yet
    // as good as the one above, each prior counted as kPriorTries tries), and the expected tokens of a chain of each
    // length.
    double prior = kPriorAccept, reach = 1.0;
    chain_tokens_[0] = 1.0;
    for (size_t d = 0; d < depth_hit_.size(); ++d) {
        chain_accept_[d] = (depth_hit_[d] + kPriorTries * prior) / (depth_try_[d] + kPriorTries);
        prior = chain_accept_[d];
        reach *= chain_accept_[d];
        chain_tokens_[d + 1] = chain_tokens_[d] + reach;
    }
}

double TreeTuner::prior_scale() const {
    double own = 0, theirs = 0;
    for (size_t i = 0; i < buckets_.size() && i < prior_curve_.size(); ++i)
        if (buckets_[i].weight > 0 && prior_curve_[i].weight > 0) {
            own += buckets_[i].ms;
            theirs += prior_curve_[i].ms * buckets_[i].weight;
        }
    return theirs > 0 ? own / theirs : 1.0;
}

std::pair<double, double> TreeTuner::curve_point(size_t i, double scale) const {
    const Bucket &b = buckets_[i];
    if (b.weight > 0) return {b.n / b.weight, b.ms / b.weight};
    if (i < prior_curve_.size() && prior_curve_[i].weight > 0) return {prior_curve_[i].n, prior_curve_[i].ms * scale};
    return {0.0, 0.0};
}

double TreeTuner::verify_ms(double nodes) const {
    refresh();
    const auto &pts = points_;
    if (pts.empty()) return 1.0;
    if (pts.size() == 1) {
        const double t1 = pts[0].second / (1.0 + kPriorSlope * (pts[0].first - 1.0));
        return t1 * (1.0 + kPriorSlope * (nodes - 1.0));
    }
    size_t i = 1;
    while (i + 1 < pts.size() && nodes > pts[i].first) ++i;
    const auto [n0, m0] = pts[i - 1];
    const auto [n1, m1] = pts[i];
    // Between two points: interpolate; outside them: extend the nearest segment, never downhill.
    const double slope = std::max(0.0, (m1 - m0) / std::max(n1 - n0, 1e-9));
    if (nodes <= n0) return std::max(m0 - slope * (n0 - nodes), 0.5 * m0);
    return m0 + slope * (nodes - n0);
}

double TreeTuner::draft_ms(const TreeChoice &c) const {
    if (c.plain()) return 0.0;
    refresh();
    double levels = 0, rows = 0;
    draft_work(c.shape, levels, rows);
    return std::max(0.0, draft_coef_[0] + draft_coef_[1] * levels + draft_coef_[2] * rows);
}

double TreeTuner::chain_accept(int32_t depth) const {
    refresh();
    return chain_accept_[size_t(std::clamp(depth, 0, kMaxDepth - 1))];
}

double TreeTuner::chain_tokens(int32_t depth) const {
    refresh();
    return chain_tokens_[size_t(std::clamp(depth, 0, kMaxDepth))];
}

double TreeTuner::measured_tokens(int32_t index) const {
    if (choices_[size_t(index)].plain()) return 1.0;
    if (is_chain(index)) return chain_tokens(choices_[size_t(index)].shape.depth());
    const Arm &a = arms_[size_t(index)];
    return a.weight > 0 ? a.tokens / a.weight : 0.0;
}

// A guess for a shape not played yet, optimistic so that a shape that could pay is tried once, but no more than
// what is known allows:
//  - a model tree: level d holds the right token with probability 1 - (1 - p_d)^w_d, p_d the chains' acceptance
//    at depth d (as if its w_d candidates were independent guesses; beam candidates are not, so this is high);
//  - n-gram nodes alone: the gain of the largest share measured inside it, grown half as fast as the nodes (half
//    way to its depth + 1 when none was measured);
//  - both: at most the sum of what each part brings (the accepted path is the longer of the two parts' paths).
double TreeTuner::guess_tokens(int32_t index) const {
    const TreeChoice &c = choices_[size_t(index)];
    const double cap = 1.0 + std::max(c.shape.depth(), std::min(c.ngram_nodes, 32));
    if (!c.shape.widths.empty() && c.ngram_nodes > 0) {
        const auto &[model, ngram] = parts_[size_t(index)];
        if (model >= 0 && ngram >= 0) return std::min(cap, expected_tokens(model) + expected_tokens(ngram) - 1.0);
        return cap;
    }
    if (c.ngram_nodes == 0) {
        double e = 1.0, reach = 1.0;
        for (int32_t d = 0; d < c.shape.depth(); ++d) {
            reach *= 1.0 - std::pow(1.0 - chain_accept(d), double(c.shape.widths[size_t(d)]));
            e += reach;
        }
        return e;
    }
    int32_t known = -1;
    for (int32_t j : inside_[size_t(index)])
        if (choices_[size_t(j)].shape.widths.empty() && arms_[size_t(j)].weight > 0 &&
            (known < 0 || choices_[size_t(j)].ngram_nodes > choices_[size_t(known)].ngram_nodes))
            known = j;
    if (known < 0) return 1.0 + 0.5 * (cap - 1.0);
    const double e = measured_tokens(known);
    const double growth = double(c.ngram_nodes) / double(choices_[size_t(known)].ngram_nodes) - 1.0;
    return std::min(cap, e + 0.5 * (e - 1.0) * growth);
}

double TreeTuner::expected_tokens(int32_t index) const {
    const TreeChoice &c = choices_[size_t(index)];
    if (c.plain() || is_chain(index)) return measured_tokens(index);
    // A tree holding another one accepts at least as much in the same round (its top candidates include the
    // other's). What the other measured bounds this shape's estimate only if both count the same rounds: an
    // n-gram-only share's rounds are those with a match (the others are plain passes), a shape with a model part
    // drafts every round. Across the two kinds it only raises the guess: as a floor, an n-gram share's few lucky
    // rounds kept a merged shape at their tokens, and it was played for good at a loss.
    const bool has_model = !c.shape.widths.empty();
    double floor = 1.0, guess_floor = 1.0;
    for (int32_t j : inside_[size_t(index)]) {
        const double m = measured_tokens(j);
        guess_floor = std::max(guess_floor, m);
        if (choices_[size_t(j)].shape.widths.empty() != !has_model) continue;
        floor = std::max(floor, m);
    }
    // The guess counts as one round played, so that a few unlucky first rounds do not bury a shape.
    // What it measured counts less the longer ago it was (the text changes), so an old poor estimate drifts back
    // toward the guess and the shape is tried again.
    const Arm &a = arms_[size_t(index)];
    const double age = std::pow(kAgeDecay, double(rounds_ - a.updated));
    return std::max(floor, (age * a.tokens + std::max(guess_floor, guess_tokens(index))) / (age * a.weight + 1.0));
}

bool TreeTuner::measured(int32_t index) const {
    const TreeChoice &c = choices_[size_t(index)];
    if (c.plain()) return true;
    if (is_chain(index)) return depth_try_[size_t(std::min(c.shape.depth(), kMaxDepth) - 1)] >= kTrusted;
    const Arm &a = arms_[size_t(index)];
    return std::pow(kAgeDecay, double(rounds_ - a.updated)) * a.weight >= kTrusted;
}

double TreeTuner::expected_nodes(int32_t index) const {
    const Arm &a = arms_[size_t(index)];
    if (a.node_weight > 0) return a.nodes / a.node_weight;
    return 1.0 + choices_[size_t(index)].max_nodes();
}

double TreeTuner::resume_ms(const TreeChoice &c) const {
    if (c.shape.widths.empty() || behind_ <= kCleanBehind) return 0.0;
    // Before any resume was measured (a short prompt), a token behind is taken to cost what drafting one level of
    // one row costs: a draft model evaluating the tokens it missed one by one, the most a catch-up can take.
    double per_token = 0.0;
    if (resume_weight_ > 0) {
        per_token = resume_per_token_ / resume_weight_;
    } else if (draft_rounds_ > 0) {
        refresh();
        per_token = std::max(0.0, draft_coef_[0] + draft_coef_[1] + draft_coef_[2]);
    }
    return per_token * double(std::min(behind_, catch_up_bound_)) / kResumeRounds;
}

double TreeTuner::expected_ms(int32_t index) const {
    const TreeChoice &c = choices_[size_t(index)];
    return draft_ms(c) + resume_ms(c) + verify_ms(expected_nodes(index));
}

double TreeTuner::rate(int32_t index) const { return expected_tokens(index) / std::max(expected_ms(index), 1e-9); }

int32_t TreeTuner::next(NgramProposal ngram) {
    // The first round decodes plainly, to measure verify(1), unless an earlier session's curve came in.
    if (rounds_ == 0 && prior_curve_.empty()) return 0;
    probe_ = -1;
    if (rounds_ < plain_until_ && ngram != NgramProposal::Some) return 0;
    const bool no_ngram = ngram == NgramProposal::None;
    const int32_t n = int32_t(choices_.size());
    std::vector<double> &r = rates_;
    r.resize(size_t(n));
    // Shapes beyond the reach of the measured verify curve are not played (rate 0): the curve grows one doubling at
    // a time, because extending it far from the sizes measured guesses the cost from a prior slope, and on a
    // machine where each node costs half a decode step (a tiny model's attention) one 16-node guess costs ten
    // steps to learn that.
    const int32_t reach = std::max(kFirstReach, 2 * std::max(max_nodes_seen_, prior_max_nodes_));
    int32_t best = 0, trusted = 0;  // trusted: the best of the shapes whose estimate rests on measurements
    for (int32_t i = 0; i < n; ++i) {
        const bool sits_out = no_ngram && choices_[size_t(i)].ngram_nodes > 0;
        r[size_t(i)] = 1 + choices_[size_t(i)].max_nodes() <= reach && !sits_out ? rate(i) : 0.0;
        if (r[size_t(i)] > r[size_t(best)]) best = i;
        if (r[size_t(i)] > r[size_t(trusted)] && measured(i)) trusted = i;
    }
    // While some shape pays, probing its neighbours is how the tuner climbs to the best one, and a probe costs a
    // fraction of a gain; while plain decoding is best, every probe is a loss, so those are bounded. The bound is
    // checked before the probe, with what it is expected to lose: a model drafter idle for a long stretch first
    // catches up with all of it (a draft model as large as the target pays a decode step per token missed), so a
    // probe after 80 plain rounds can cost 40 of them.
    // A best shape that rests on its guess (not played yet, or not for long) while plain decoding is the best
    // measured choice counts as a probe: optimistic guesses are how shapes get tried, and where nothing pays their
    // first plays were most of the loss.
    const int32_t guessed = best != trusted && choices_[size_t(trusted)].plain() ? best : -1;
    if (guessed >= 0) best = trusted;
    // Among chains estimated within a few percent of the best chain whose deepest level has hardly been tried, the
    // deepest: its round measures every depth the shorter ones measure and the next one too, so the estimates climb
    // to the depth that pays. Without it a completion started from chains of 1 and 2 (the first rounds' acceptance
    // is noisy, and a depth not measured yet is taken as good as the one above) stayed there while the chain of 3
    // ran 10-15 % faster.
    if (is_chain(best)) {
        const int32_t shallow = best;
        for (int32_t i = 0; i < n; ++i) {
            const int32_t depth = choices_[size_t(i)].shape.depth();
            if (is_chain(i) && depth > choices_[size_t(best)].shape.depth() && depth_try_[size_t(std::min(depth, kMaxDepth) - 1)] < kDeeperTries &&
                r[size_t(i)] >= (1.0 - kDeeperWithin) * r[size_t(shallow)])
                best = i;
        }
    }
    const bool plain_best = choices_[size_t(best)].plain();
    const auto affordable = [&](int32_t i) {
        if (!plain_best) return true;
        // expected_ms() carries a share of the catch-up (1 / kResumeRounds); the probe pays all of it.
        const double resume = resume_ms(choices_[size_t(i)]);
        const double loss = expected_ms(i) + resume * (kResumeRounds - 1.0) - expected_tokens(i) / r[size_t(best)];
        return explore_ms_ + std::max(0.0, loss) <= kExploreShare * total_ms_ + kExploreSteps * verify_ms(1.0);
    };
    arms_[size_t(best)].backoff = kFirstBackoff;
    arms_[size_t(best)].last_played = rounds_;
    // A probe: the guessed best if affordable; else the best-looking other shape close to the best whose back-off
    // has run out; failing that, now and then, one that has not been played for long (its estimate may be stale:
    // the text changes).
    int32_t probe = guessed >= 0 && affordable(guessed) ? guessed : -1;
    if (probe < 0 && rounds_ >= next_probe_)
        for (int32_t i = 0; i < n; ++i)
            if (i != best && arms_[size_t(i)].probe_after <= rounds_ && r[size_t(i)] >= kProbeWithin * r[size_t(best)] &&
                (probe < 0 || r[size_t(i)] > r[size_t(probe)]) && affordable(i))
                probe = i;
    if (probe < 0 && rounds_ >= next_stale_probe_) {
        for (int32_t i = 0; i < n; ++i)
            if (i != best && rounds_ - arms_[size_t(i)].last_played >= kStaleAfter && r[size_t(i)] >= kStaleWithin * r[size_t(best)] &&
                (probe < 0 || r[size_t(i)] > r[size_t(probe)]) && affordable(i))
                probe = i;
        if (probe >= 0) next_stale_probe_ = rounds_ + kStaleAfter;
    }
    if (probe >= 0) {
        next_probe_ = rounds_ + kProbeGap;
        Arm &a = arms_[size_t(probe)];
        a.probe_after = rounds_ + a.backoff;
        a.backoff = std::min(2 * a.backoff, kMaxBackoff);
        a.last_played = rounds_;
        probe_ = probe;
        probe_best_rate_ = r[size_t(best)];
        return probe;
    }
    // Plain is best and no probe was possible: keep decoding plainly for a few rounds without recomputing.
    if (choices_[size_t(best)].plain()) plain_until_ = rounds_ + kPlainRecheck;
    return best;
}

void TreeTuner::caught_up(int32_t n_tokens, double ms) {
    if (n_tokens > kCleanBehind) {
        resume_per_token_ = resume_per_token_ * kResumeDecay + ms / double(n_tokens);
        resume_weight_ = resume_weight_ * kResumeDecay + 1.0;
    }
    behind_ = 0;
    dirty_ = true;
}

void TreeTuner::record(int32_t index, int32_t nodes, double draft, double verify, int32_t accepted) {
    const TreeChoice &c = choices_[size_t(index)];
    const bool model = !c.shape.widths.empty();
    // What the fit expected this shape's draft to take, from the estimates before this round (read before anything
    // below changes them: reading refreshes the estimates).
    const double expected_draft = model ? draft_ms(c) : 0.0;
    ++rounds_;
    dirty_ = true;
    max_nodes_seen_ = std::max(max_nodes_seen_, nodes);
    total_ms_ = total_ms_ * kExploreDecay + draft + verify;
    explore_ms_ *= kExploreDecay;
    // Probes that gained give back what they gained (down to a budget's worth of credit), so that while guesses
    // keep paying, as on repetitive text, the next ones are not held back by an earlier loss.
    if (index == probe_ && probe_best_rate_ > 0)
        explore_ms_ = std::max(explore_ms_ + draft + verify - double(accepted + 1) / probe_best_rate_, -kExploreShare * total_ms_);
    probe_ = -1;
    const int32_t behind = behind_;
    behind_ = model ? accepted + 1 : behind_ + accepted + 1;
    Bucket &b = buckets_[size_t(std::min<int32_t>(bucket_of(nodes), int32_t(buckets_.size()) - 1))];
    b.n = b.n * kBucketDecay + nodes;
    b.ms = b.ms * kBucketDecay + verify;
    b.weight = b.weight * kBucketDecay + 1.0;
    if (c.plain() || nodes <= 1) {
        // Plain decoding, or a drafter that found nothing to propose (an n-gram drafter without a match): a one-node
        // pass whatever the shape, which says nothing about the shape.
        if (c.plain()) ++plain_rounds_;
        return;
    }
    if (model && behind > kCleanBehind) {
        // A resume: what it took beyond a round of this shape, per token caught up.
        const double excess = std::max(0.0, draft - expected_draft);
        resume_per_token_ = resume_per_token_ * kResumeDecay + excess / double(std::min(behind, catch_up_bound_));
        resume_weight_ = resume_weight_ * kResumeDecay + 1.0;
    } else {
        ++draft_rounds_;
        double levels = 0, rows = 0;
        draft_work(c.shape, levels, rows);
        const double x[3] = {1.0, levels, rows};
        for (int r = 0; r < 3; ++r) {
            for (int k = 0; k < 3; ++k) ls_[r][k] = ls_[r][k] * kDraftDecay + x[r] * x[k];
            ls_[r][3] = ls_[r][3] * kDraftDecay + x[r] * draft;
        }
    }
    update_arm(index, nodes, accepted);
    // The chain's levels were d = 1..depth (fewer when the context had no room).
    if (is_chain(index)) update_depths(std::min(c.shape.depth(), nodes - 1), accepted);
}

// Depth d was tried when the path reached d - 1.
void TreeTuner::update_depths(int32_t depth, int32_t accepted) {
    for (size_t d = 0; d < depth_hit_.size(); ++d) {
        depth_hit_[d] *= kDepthDecay;
        depth_try_[d] *= kDepthDecay;
    }
    for (int32_t d = 0; d < depth && d <= accepted; ++d) {
        depth_try_[size_t(d)] += 1.0;
        if (d < accepted) depth_hit_[size_t(d)] += 1.0;
    }
}

void TreeTuner::record_model_part(int32_t index, int32_t nodes, int32_t accepted) {
    if (index < 0 || size_t(index) >= choices_.size() || nodes <= 1) return;
    const int32_t part = parts_[size_t(index)].first;
    if (part < 0 || part == index) return;
    dirty_ = true;
    if (is_chain(part))
        update_depths(std::min(choices_[size_t(part)].shape.depth(), nodes - 1), accepted);
    else
        update_arm(part, nodes, accepted);
}

void TreeTuner::record_greedy_path(int32_t index, int32_t levels, int32_t accepted) {
    if (index < 0 || size_t(index) >= choices_.size() || levels <= 0) return;
    const TreeShape &shape = choices_[size_t(index)].shape;
    if (shape.widths.empty() || shape.is_chain()) return;  // a chain's own rounds count it (record, record_model_part)
    dirty_ = true;
    update_depths(std::min(levels, kMaxDepth), std::clamp(accepted, 0, levels));
}

void TreeTuner::update_arm(int32_t index, int32_t nodes, int32_t accepted) {
    Arm &a = arms_[size_t(index)];
    const double age = std::pow(kAgeDecay, double(rounds_ - a.updated));
    a.updated = rounds_;
    a.tokens = a.tokens * age * kArmDecay + double(accepted + 1);
    a.weight = a.weight * age * kArmDecay + 1.0;
    a.nodes = a.nodes * kArmDecay + double(nodes);
    a.node_weight = a.node_weight * kArmDecay + 1.0;
}

void TreeTuner::record_merged_shadow(int32_t shadow_choice, int32_t shadow_nodes, int32_t shadow_accepted, int32_t chain_levels,
                                     int32_t chain_accepted, int32_t played) {
    // No proposal: a merged shape drafts its chain alone there, and its tokens count the rounds with one (it sits
    // out the others: next()).
    if (shadow_nodes <= 1 || chain_levels <= 0 || shadow_choice < 0 || size_t(shadow_choice) >= choices_.size()) return;
    chain_accepted = std::clamp(chain_accepted, 0, chain_levels);
    for (size_t i = 0; i < choices_.size(); ++i) {
        if (int32_t(i) == played || parts_[i].second != shadow_choice || choices_[i].shape.widths.empty()) continue;
        const int32_t model = parts_[i].first;
        if (model < 0 || !is_chain(model)) continue;
        const int32_t k = choices_[size_t(model)].shape.depth();
        if (k > chain_levels && chain_accepted == chain_levels) continue;  // deeper than what was drafted: unknown
        // Its nodes: the chain's, and the proposal's (at most: where the two share a prefix, they merge).
        const int32_t nodes = std::min(k + shadow_nodes, 1 + choices_[i].max_nodes());
        update_arm(int32_t(i), nodes, std::max(std::min(chain_accepted, k), shadow_accepted));
        dirty_ = true;
    }
}

void TreeTuner::record_shadow(int32_t index, int32_t nodes, int32_t accepted) {
    if (nodes <= 1 || index < 0 || size_t(index) >= choices_.size()) return;
    dirty_ = true;
    update_arm(index, nodes, accepted);
}

TreeTuner::Knowledge TreeTuner::knowledge(int32_t context) const {
    Knowledge k;
    k.n_choices = int32_t(choices_.size());
    k.context = context;
    k.rounds = rounds_;
    const double scale = prior_scale();
    k.curve.resize(buckets_.size());
    for (size_t i = 0; i < buckets_.size(); ++i) k.curve[i] = curve_point(i, scale);
    k.max_nodes_seen = std::max(max_nodes_seen_, prior_max_nodes_);
    std::copy(&ls_[0][0], &ls_[0][0] + 12, &k.ls[0][0]);
    k.drafted = draft_rounds_ > 0;
    k.depth_hit = depth_hit_;
    k.depth_try = depth_try_;
    k.arms.resize(arms_.size());
    for (size_t i = 0; i < arms_.size(); ++i) {
        const Arm &a = arms_[i];
        const double age = std::pow(kAgeDecay, double(rounds_ - a.updated));
        k.arms[i] = {a.tokens * age, a.weight * age, a.nodes, a.node_weight};
    }
    k.resume_per_token = resume_per_token_;
    k.resume_weight = resume_weight_;
    return k;
}

void TreeTuner::learn(const Knowledge &k, int32_t context) {
    if (k.rounds == 0 || rounds_ > 0 || k.n_choices != int32_t(choices_.size()) || k.arms.size() != arms_.size() ||
        k.depth_hit.size() != depth_hit_.size() || k.depth_try.size() != depth_try_.size())
        return;
    // Below 64 tokens the context costs next to nothing either way.
    const double here = std::max(context, 64), there = std::max(k.context, 64);
    if (std::max(here, there) <= kCarryContext * std::min(here, there) && k.curve.size() == buckets_.size()) {
        prior_curve_.assign(buckets_.size(), Bucket{});
        for (size_t i = 0; i < k.curve.size(); ++i)
            if (k.curve[i].first > 0) prior_curve_[i] = Bucket{k.curve[i].first, k.curve[i].second, 1.0};
        prior_max_nodes_ = k.max_nodes_seen;
    }
    const auto cap = [](double weight, double most) { return weight > most ? most / weight : 1.0; };
    const double s = cap(k.ls[0][0], kCarryDraft);
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 4; ++c) ls_[r][c] = k.ls[r][c] * s;
    draft_rounds_ = k.drafted ? 1 : 0;
    for (size_t d = 0; d < depth_try_.size(); ++d) {
        const double sd = cap(k.depth_try[d], kCarryDepth);
        depth_hit_[d] = k.depth_hit[d] * sd;
        depth_try_[d] = k.depth_try[d] * sd;
    }
    for (size_t i = 0; i < arms_.size(); ++i) {
        const Knowledge::ArmData &a = k.arms[i];
        const double sa = cap(a.weight, kCarryArm), sn = cap(a.node_weight, kCarryArm);
        arms_[i].tokens = a.tokens * sa;
        arms_[i].weight = a.weight * sa;
        arms_[i].nodes = a.nodes * sn;
        arms_[i].node_weight = a.node_weight * sn;
        arms_[i].updated = 0;
    }
    const double sr = cap(k.resume_weight, kCarryResume);
    resume_per_token_ = k.resume_per_token * sr;
    resume_weight_ = k.resume_weight * sr;
    learned_ = true;
    dirty_ = true;
}

}  // namespace specula::internal
