// Generator bookkeeping (core/rng.h); the Philox math is inline in the header.
#include "core/rng.h"

#include "core/error.h"

namespace weft {

std::vector<uint8_t> GeneratorState::to_bytes() const {
  std::vector<uint8_t> out(16);
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(seed >> (8 * i));
    out[8 + i] = static_cast<uint8_t>(offset >> (8 * i));
  }
  return out;
}

GeneratorState GeneratorState::from_bytes(const std::vector<uint8_t>& bytes) {
  WEFT_CHECK(bytes.size() == 16, "GeneratorState::from_bytes: expected 16 bytes (seed, offset), got ", bytes.size());
  GeneratorState s;
  for (int i = 0; i < 8; ++i) {
    s.seed |= static_cast<uint64_t>(bytes[i]) << (8 * i);
    s.offset |= static_cast<uint64_t>(bytes[8 + i]) << (8 * i);
  }
  WEFT_CHECK(s.offset % 4 == 0, "GeneratorState::from_bytes: offset ", s.offset, " is not a multiple of 4");
  return s;
}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offset_;
}

GeneratorState Generator::get_state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {seed_, offset_};
}

void Generator::set_state(const GeneratorState& state) {
  WEFT_CHECK(state.offset % 4 == 0, "Generator::set_state: offset ", state.offset, " is not a multiple of 4");
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = state.seed;
  offset_ = state.offset;
}

PhiloxState Generator::reserve(uint64_t n_values) {
  std::lock_guard<std::mutex> lock(mu_);
  PhiloxState s{seed_, offset_};
  offset_ += (n_values + 3) / 4 * 4;
  return s;
}

namespace {
thread_local Generator* t_generator = nullptr;  // set by GeneratorScope; nullptr: the process's

Generator& process_generator() {
  static Generator g;
  return g;
}
}  // namespace

Generator& default_generator() { return t_generator != nullptr ? *t_generator : process_generator(); }

GeneratorScope::GeneratorScope(Generator& g) : previous_(t_generator) { t_generator = &g; }
GeneratorScope::~GeneratorScope() { t_generator = previous_; }

std::vector<uint64_t> fork_seeds(Generator& parent, int n) {
  WEFT_CHECK(n >= 0, "fork_seeds: n must be >= 0, got ", n);
  PhiloxReader block(parent.reserve(4));
  const uint64_t base = (static_cast<uint64_t>(block.value(0)) << 32) | block.value(1);
  std::vector<uint64_t> seeds(n);
  for (int i = 0; i < n; ++i) {  // splitmix64: a bijection of base + i * golden, so distinct for distinct i
    uint64_t z = base + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    seeds[i] = z ^ (z >> 31);
  }
  return seeds;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }
GeneratorState get_rng_state() { return default_generator().get_state(); }
void set_rng_state(const GeneratorState& state) { default_generator().set_state(state); }

}  // namespace weft
