// Copyright dlock authors. Latency samples in fixed memory: a log-linear
// histogram (as HdrHistogram keeps them), so that an hour-long run at
// hundreds of thousands of operations per second costs the same as a
// second-long one.
#ifndef DLOCK_ADAPTERS_CLI_BENCH_HISTOGRAM_H_
#define DLOCK_ADAPTERS_CLI_BENCH_HISTOGRAM_H_

#include <array>
#include <cstdint>

namespace dlock::cli::bench {

// Latency percentiles in microseconds.
struct Percentiles {
  double p50 = 0;
  double p99 = 0;
  double p999 = 0;
};

// Durations in nanoseconds, each kept to within 1/64 (1.6%) of its value:
// exact below 64 ns, then 64 buckets per power of two. Not thread-safe:
// one per thread, merged at the end.
class LatencyHistogram {
 public:
  void Add(int64_t nanos);
  void Merge(const LatencyHistogram& other);
  int64_t count() const { return count_; }
  // The value below which `q` (0 to 1) of the samples lie: the middle of
  // its bucket, in nanoseconds; 0 when empty.
  double Quantile(double q) const;
  // p50, p99 and p99.9 in microseconds; zeros when empty.
  Percentiles Get() const;

 private:
  static constexpr int kSubBits = 6;
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kBuckets = (64 - kSubBits + 1) * kSub;
  static int BucketOf(uint64_t nanos);
  static double MiddleOf(int bucket);

  std::array<int64_t, kBuckets> counts_{};
  int64_t count_ = 0;
};

// Jain's fairness index of the shares: 1 when all are equal, 1/n when one
// has everything; 0 when all are zero.
double JainIndex(const double* shares, int n);

}  // namespace dlock::cli::bench

#endif  // DLOCK_ADAPTERS_CLI_BENCH_HISTOGRAM_H_
