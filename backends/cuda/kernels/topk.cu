// Per-row log-softmax top-k (topk.h): one block of 256 threads per row, three passes over the row.
//   1. max: each thread over its strided elements, then a fixed tree in shared memory;
//   2. sum of exp(double(x - max)): each thread in double over its strided elements (in index order), then a
//      fixed tree in double; lse = max + float(log(sum)), the host's formula (speculative/beam_tree.cpp);
//   3. each thread keeps its own best k (logp = x - lse, ranked by logp, then lowest id) by insertion into a
//      sorted local list; the block then merges the 256 sorted lists in k rounds: every round the lists' heads
//      are compared (warp butterfly, then the 8 warp winners), the winner is written out and its owner (thread
//      id % 256: thread t holds ids t, t + 256, ...) advances its head.
// The ranking is a strict total order on (logp, id), so the selected set and its order do not depend on how the
// row is split or on the reduction order: the output is deterministic and a row's result is the same in any launch.
#include "topk.h"

#include "block_merge.cuh"

#include <climits>
#include <cmath>

namespace specula::internal::SPECULA_CUDA_NAMESPACE {
namespace {

constexpr int kTopkThreads = 256;
constexpr int kTopkWarps = kTopkThreads / 32;

__global__ void row_topk_kernel(const float *__restrict__ logits, int32_t n, int64_t row_stride, int32_t k, float *__restrict__ out_logp,
                                int32_t *__restrict__ out_ids, float *__restrict__ out_lse) {
    __shared__ float red_max[kTopkThreads];
    __shared__ double red_sum[kTopkThreads];
    __shared__ float warp_v[kTopkWarps];
    __shared__ int32_t warp_i[kTopkWarps];
    const int t = threadIdx.x;
    const float *row = logits + int64_t(blockIdx.x) * row_stride;

    // 1. The row's max.
    float m = -INFINITY;
    for (int32_t i = t; i < n; i += kTopkThreads) {
        const float x = row[i];
        if (x > m) m = x;
    }
    red_max[t] = m;
    __syncthreads();
    for (int s = kTopkThreads / 2; s > 0; s /= 2) {
        if (t < s && red_max[t + s] > red_max[t]) red_max[t] = red_max[t + s];
        __syncthreads();
    }
    const float mx = red_max[0];

    // 2. The normaliser. A row of -inf only: lse = -inf (every logp is then NaN, ranked as -inf).
    double sum = 0.0;
    if (mx != -INFINITY)
        for (int32_t i = t; i < n; i += kTopkThreads) sum += exp(double(row[i] - mx));
    red_sum[t] = sum;
    __syncthreads();
    for (int s = kTopkThreads / 2; s > 0; s /= 2) {
        if (t < s) red_sum[t] += red_sum[t + s];
        __syncthreads();
    }
    const float lse = mx == -INFINITY ? mx : mx + float(log(red_sum[0]));
    if (t == 0 && out_lse != nullptr) out_lse[blockIdx.x] = lse;

    // 3. This thread's best k of its elements, sorted; its ids increase, so an equal logp goes after the earlier.
    float lv[kTopkMaxK];
    int32_t li[kTopkMaxK];
    int cnt = 0;
    for (int32_t i = t; i < n; i += kTopkThreads) {
        float v = row[i] - lse;
        if (v != v) v = -INFINITY;
        if (cnt == k && !(v > lv[k - 1])) continue;
        int j = cnt < k ? cnt++ : k - 1;
        while (j > 0 && v > lv[j - 1]) {
            lv[j] = lv[j - 1];
            li[j] = li[j - 1];
            --j;
        }
        lv[j] = v;
        li[j] = i;
    }

    // The block's merge: k rounds of "best head".
    int head = 0;
    float *row_logp = out_logp + int64_t(blockIdx.x) * k;
    int32_t *row_ids = out_ids + int64_t(blockIdx.x) * k;
    for (int r = 0; r < k; ++r) {
        float bv = head < cnt ? lv[head] : -INFINITY;
        int32_t bi = head < cnt ? li[head] : INT32_MAX;  // an empty list ranks after every element, -inf included
        block_best_head<kTopkWarps>(bv, bi, warp_v, warp_i);
        if (bi != INT32_MAX && bi % kTopkThreads == t) ++head;
        if (t == 0) {
            row_logp[r] = bi != INT32_MAX ? bv : -INFINITY;
            row_ids[r] = bi != INT32_MAX ? bi : -1;
        }
        __syncthreads();  // warp_v / warp_i are rewritten next round
    }
}

}  // namespace

void row_topk(const float *logits, int32_t count, int32_t n, int64_t row_stride, int32_t k, float *out_logp, int32_t *out_ids, float *lse,
              cudaStream_t stream) {
    if (count <= 0 || n <= 0 || k <= 0) return;
    if (k > kTopkMaxK) k = kTopkMaxK;  // callers check; never write past k slots
    SPECULA_LAUNCH(row_topk_kernel, count, kTopkThreads, 0, stream)(logits, n, row_stride, k, out_logp, out_ids, lse);
}

}  // namespace specula::internal::SPECULA_CUDA_NAMESPACE
