#include "bench_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace dlock::cli::bench {

// Values below kSub have a bucket each; above, a value whose highest set bit
// is b (b >= kSubBits) falls in group b - kSubBits + 1, at the position its
// next kSubBits bits give.
int LatencyHistogram::BucketOf(uint64_t nanos) {
  if (nanos < kSub) return static_cast<int>(nanos);
  const int top = 63 - std::countl_zero(nanos);
  const int shift = top - kSubBits;
  const int group = shift + 1;
  const int sub = static_cast<int>((nanos >> shift) & (kSub - 1));
  return group * kSub + sub;
}

double LatencyHistogram::MiddleOf(int bucket) {
  if (bucket < kSub) return bucket;
  const int group = bucket / kSub;
  const int sub = bucket % kSub;
  const int shift = group - 1;
  const double low = std::ldexp(static_cast<double>(kSub + sub), shift);
  return low + std::ldexp(0.5, shift);
}

void LatencyHistogram::Add(int64_t nanos) {
  ++counts_[BucketOf(static_cast<uint64_t>(std::max<int64_t>(nanos, 0)))];
  ++count_;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
}

double LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  // The sample at index floor(q * count), as a sorted array would give it.
  const int64_t rank = std::min<int64_t>(
      static_cast<int64_t>(q * static_cast<double>(count_)), count_ - 1);
  int64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen > rank) return MiddleOf(i);
  }
  return MiddleOf(kBuckets - 1);
}

Percentiles LatencyHistogram::Get() const {
  return {Quantile(0.50) / 1e3, Quantile(0.99) / 1e3, Quantile(0.999) / 1e3};
}

double JainIndex(const double* shares, int n) {
  double sum = 0, squares = 0;
  for (int i = 0; i < n; ++i) {
    sum += shares[i];
    squares += shares[i] * shares[i];
  }
  if (squares == 0) return 0;
  return sum * sum / (n * squares);
}

}  // namespace dlock::cli::bench
