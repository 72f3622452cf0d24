// RNG: counter-based Philox4x32-10 keyed by (seed, offset), and the Generator
// that hands out non-overlapping counter ranges.
//
// Contract:
// - philox4x32_10(counter, key) is the Random123 Philox4x32 with 10 rounds.
// - Note [philox counter layout]: a draw reserves `n` 32-bit values from a
//   generator at offset `o` (a multiple of 4). Value v of the draw (0 <= v < n)
//   is lane v % 4 of philox4x32_10(counter = {lo32(o/4 + v/4), hi32(o/4 + v/4), 0, 0},
//   key = {lo32(seed), hi32(seed)}). Element i of an op that uses k values per
//   element (k in {1, 2, 4}) takes values [i*k, (i+1)*k). A value depends only
//   on (seed, offset, index), never on how the work is split across threads,
//   so CPU and GPU kernels following this layout produce identical numbers.
// - Each draw advances the generator's offset by n rounded up to a multiple of 4,
//   so consecutive draws never share a counter.
// - get_state/set_state round-trip {seed, offset}; RngStateGuard restores the
//   default generator's state on scope exit (activation checkpointing uses it).
// - default_generator() is the calling thread's: the process-wide generator,
//   unless a GeneratorScope on this thread names another. Threads that play
//   ranks of one job (run_ranks, LocalPipe) each draw from their own, as each
//   process of a job does, so one rank's checkpoint recomputation, which sets
//   and restores the state, never moves another rank's stream.
// - fork_seeds(parent, n): seeds for n child streams, from one block of 4
//   values reserved from `parent` (the parent moves on by 4): seed i is a
//   function of the parent's state and i only, and the n seeds differ.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

namespace weft {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

// A reserved range of the stream: (seed, offset) where offset counts 32-bit values.
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;  // always a multiple of 4
};

// Reads value `v` of the draw starting at `s` (Note [philox counter layout]).
// Sequential readers should use PhiloxReader, which computes each block once.
class PhiloxReader {
 public:
  explicit PhiloxReader(PhiloxState s)
      : key_{static_cast<uint32_t>(s.seed), static_cast<uint32_t>(s.seed >> 32)}, base_block_(s.offset / 4) {}
  uint32_t value(uint64_t v) {
    uint64_t block = v / 4;
    if (block != cached_block_) {
      uint64_t b = base_block_ + block;
      out_ = philox4x32_10({static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32), 0u, 0u}, key_);
      cached_block_ = block;
    }
    return out_[v % 4];
  }

 private:
  PhiloxKey key_;
  uint64_t base_block_;
  uint64_t cached_block_ = ~uint64_t{0};
  PhiloxCounter out_{};
};

// Uniform in [0, 1) from one value (24 bits, float) or two values (53 bits, double).
inline float uniform_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
inline double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
}

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  // 16 bytes, little-endian seed then offset (what checkpoints store).
  std::vector<uint8_t> to_bytes() const;
  static GeneratorState from_bytes(const std::vector<uint8_t>& bytes);
  bool operator==(const GeneratorState& o) const { return seed == o.seed && offset == o.offset; }
};

class Generator {
 public:
  static constexpr uint64_t kDefaultSeed = 67280421310721ull;  // PyTorch's default
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}
  // Sets the seed and rewinds the stream to offset 0.
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  uint64_t offset() const;
  GeneratorState get_state() const;
  void set_state(const GeneratorState& state);
  // Reserves `n_values` 32-bit values; returns where the draw starts. Thread-safe.
  PhiloxState reserve(uint64_t n_values);

 private:
  mutable std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The generator random ops on the calling thread draw from (see the contract).
Generator& default_generator();
void manual_seed(uint64_t seed);
GeneratorState get_rng_state();
void set_rng_state(const GeneratorState& state);

// Makes `g` the calling thread's default generator until the scope ends, then
// restores the one before (scopes nest). `g` must outlive the scope.
class GeneratorScope {
 public:
  explicit GeneratorScope(Generator& g);
  ~GeneratorScope();
  GeneratorScope(const GeneratorScope&) = delete;
  GeneratorScope& operator=(const GeneratorScope&) = delete;

 private:
  Generator* previous_;
};

// Seeds for `n` child streams of `parent` (contract above).
std::vector<uint64_t> fork_seeds(Generator& parent, int n);

// Saves the default generator's state and restores it on destruction.
class RngStateGuard {
 public:
  RngStateGuard() : saved_(get_rng_state()) {}
  ~RngStateGuard() { set_rng_state(saved_); }
  RngStateGuard(const RngStateGuard&) = delete;
  RngStateGuard& operator=(const RngStateGuard&) = delete;
  const GeneratorState& saved() const { return saved_; }

 private:
  GeneratorState saved_;
};

}  // namespace weft
