// DataLoader: seeded sampling, in-order prefetching workers (io/dataloader.h).
//
// Note [prefetch protocol]: one mutex guards an epoch's shared state. Workers
// claim the next unissued batch number while fewer than
// num_workers * prefetch_factor batches are issued but not yet consumed, build
// it without the lock, and file the result (batch or exception) under its
// number. The consumer waits for the batch numbered `consumed`, so delivery order
// is the batch order whatever order the workers finish in. Stopping sets `stop`,
// wakes everyone and joins; a worker finishes at most the batch it is building.
#include "io/dataloader.h"

#include <algorithm>

#include "core/error.h"

namespace weft::io {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t shuffle_seed(uint64_t seed, uint64_t epoch) {
  return splitmix64(splitmix64(seed ^ 0x53485546464C45ull) ^ epoch);  // "SHUFFLE"
}

uint64_t example_seed(uint64_t seed, uint64_t epoch, uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed ^ 0x4558414D504C45ull) ^ epoch) ^ index);  // "EXAMPLE"
}

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  WEFT_CHECK(n >= 0, "seeded_permutation: n must be non-negative, got ", n);
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  PhiloxReader r(PhiloxState{seed, 0});
  // Fisher-Yates; j uniform in [0, i] from 64 random bits (modulo bias < n / 2^64).
  for (int64_t i = n - 1; i > 0; --i) {
    uint64_t k = static_cast<uint64_t>(n - 1 - i);
    uint64_t x = (static_cast<uint64_t>(r.value(2 * k)) << 32) | r.value(2 * k + 1);
    int64_t j = static_cast<int64_t>(x % static_cast<uint64_t>(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

struct DataLoader::Epoch {
  int64_t epoch = 0;
  std::vector<int64_t> indices;
  int64_t num_batches = 0;
  int64_t consumed = 0;    // batches handed to the consumer
  int64_t next_issue = 0;  // next batch a worker will claim
  int64_t max_in_flight = 1;
  bool stop = false;
  struct Result {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  std::map<int64_t, Result> ready;
  std::mutex mu;
  std::condition_variable work_cv;   // workers wait for room or stop
  std::condition_variable ready_cv;  // the consumer waits for its batch
  std::vector<std::thread> threads;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options, ExampleTransform transform)
    : DataLoader(dataset, options, nullptr, std::move(transform)) {}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<const Sampler> sampler, ExampleTransform transform)
    : dataset_(std::move(dataset)), options_(options), sampler_(std::move(sampler)), transform_(std::move(transform)) {
  WEFT_CHECK(dataset_ != nullptr, "DataLoader: dataset is null");
  WEFT_CHECK(options_.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ", options_.batch_size);
  WEFT_CHECK(options_.num_workers >= 0, "DataLoader: num_workers must be >= 0, got ", options_.num_workers);
  WEFT_CHECK(options_.prefetch_factor >= 1, "DataLoader: prefetch_factor must be >= 1, got ", options_.prefetch_factor);
  if (sampler_ == nullptr) {
    if (options_.shuffle) sampler_ = std::make_shared<RandomSampler>(dataset_->size(), options_.seed);
    else sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
  } else {
    WEFT_CHECK(!options_.shuffle,
               "DataLoader: options.shuffle is true but a sampler was given; the sampler decides the order (set "
               "shuffle = false, or shuffle in the sampler)");
    WEFT_CHECK(sampler_->dataset_size() == dataset_->size(), "DataLoader: the sampler draws from ",
               sampler_->dataset_size(), " items but the dataset has ", dataset_->size());
    WEFT_CHECK(sampler_->size() >= 0, "DataLoader: the sampler's size is negative (", sampler_->size(), ")");
  }
}

DataLoader::~DataLoader() { stop_epoch(); }

void DataLoader::set_epoch(int64_t epoch) {
  WEFT_CHECK(epoch >= 0, "DataLoader::set_epoch: epoch must be >= 0, got ", epoch);
  epoch_ = epoch;
}

int64_t DataLoader::num_batches() const {
  const int64_t n = sampler_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<int64_t> DataLoader::indices(int64_t epoch) const {
  WEFT_CHECK(epoch >= 0, "DataLoader::indices: epoch must be >= 0, got ", epoch);
  std::vector<int64_t> p = sampler_->indices(epoch);
  const int64_t n = dataset_->size();
  WEFT_CHECK(static_cast<int64_t>(p.size()) == sampler_->size(), "DataLoader: the sampler promised ", sampler_->size(),
             " indices per epoch but gave ", p.size(), " for epoch ", epoch);
  for (int64_t i : p)
    WEFT_CHECK(i >= 0 && i < n, "DataLoader: sampler index ", i, " (epoch ", epoch, ") is outside the dataset's [0, ",
               n, ")");
  return p;
}

Batch DataLoader::build_batch(const Epoch& ep, int64_t b) const {
  const int64_t n = static_cast<int64_t>(ep.indices.size());
  const int64_t begin = b * options_.batch_size, end = std::min(n, begin + options_.batch_size);
  std::vector<Example> examples;
  examples.reserve(static_cast<size_t>(end - begin));
  for (int64_t k = begin; k < end; ++k) {
    const int64_t idx = ep.indices[k];
    Example e = dataset_->get(idx);
    if (transform_) {
      Generator gen(example_seed(options_.seed, static_cast<uint64_t>(ep.epoch), static_cast<uint64_t>(idx)));
      GeneratorScope random_ops_too(gen);  // rand, randn, dropout ... inside the transform draw from it as well
      e = transform_(e, gen);
    }
    examples.push_back(std::move(e));
  }
  return collate(examples);
}

void DataLoader::worker_loop(Epoch* ep) {
  for (;;) {
    int64_t b;
    {
      std::unique_lock<std::mutex> lock(ep->mu);
      ep->work_cv.wait(lock, [&] {
        return ep->stop || ep->next_issue >= ep->num_batches || ep->next_issue < ep->consumed + ep->max_in_flight;
      });
      if (ep->stop || ep->next_issue >= ep->num_batches) return;
      b = ep->next_issue++;
    }
    Epoch::Result r;
    try {
      r.batch = build_batch(*ep, b);
    } catch (...) {
      r.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(ep->mu);
      ep->ready.emplace(b, std::move(r));
    }
    ep->ready_cv.notify_all();
  }
}

void DataLoader::start_epoch() {
  stop_epoch();
  ++generation_;
  auto ep = std::make_unique<Epoch>();
  ep->epoch = epoch_;
  ep->indices = indices(epoch_);
  ep->num_batches = num_batches();
  ep->max_in_flight = static_cast<int64_t>(options_.num_workers) * options_.prefetch_factor;
  running_ = std::move(ep);
  Epoch* raw = running_.get();
  try {
    for (int w = 0; w < options_.num_workers; ++w) raw->threads.emplace_back([this, raw] { worker_loop(raw); });
  } catch (...) {
    stop_epoch();
    throw;
  }
}

void DataLoader::stop_epoch() {
  if (!running_) return;
  {
    std::lock_guard<std::mutex> lock(running_->mu);
    running_->stop = true;
  }
  running_->work_cv.notify_all();
  for (std::thread& t : running_->threads)
    if (t.joinable()) t.join();
  running_.reset();
}

void DataLoader::reset() { stop_epoch(); }

std::optional<Batch> DataLoader::next() {
  if (!running_) start_epoch();
  Epoch& ep = *running_;
  if (ep.consumed >= ep.num_batches) {
    stop_epoch();
    return std::nullopt;
  }
  const int64_t b = ep.consumed;
  if (options_.num_workers == 0) {
    ++ep.consumed;
    try {
      return build_batch(ep, b);
    } catch (...) {
      stop_epoch();
      throw;
    }
  }
  Epoch::Result r;
  {
    std::unique_lock<std::mutex> lock(ep.mu);
    ep.ready_cv.wait(lock, [&] { return ep.ready.count(b) > 0; });
    auto it = ep.ready.find(b);
    r = std::move(it->second);
    ep.ready.erase(it);
    ++ep.consumed;
  }
  ep.work_cv.notify_all();
  if (r.error) {
    stop_epoch();
    std::rethrow_exception(r.error);
  }
  return std::move(r.batch);
}

DataLoader::Iterator DataLoader::begin() {
  start_epoch();
  return Iterator(this, generation_);
}

DataLoader::Iterator::Iterator(DataLoader* loader, uint64_t generation) : loader_(loader), generation_(generation) {
  current_ = loader_->next();
}

DataLoader::Iterator::Iterator(Iterator&& o) noexcept
    : loader_(o.loader_), generation_(o.generation_), current_(std::move(o.current_)) {
  o.loader_ = nullptr;
  o.current_.reset();
}

DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&& o) noexcept {
  if (this != &o) {
    if (loader_ != nullptr && loader_->generation_ == generation_) loader_->stop_epoch();
    loader_ = o.loader_;
    generation_ = o.generation_;
    current_ = std::move(o.current_);
    o.loader_ = nullptr;
    o.current_.reset();
  }
  return *this;
}

DataLoader::Iterator::~Iterator() {
  // Ends this iterator's epoch if it is still the running one (early break).
  if (loader_ != nullptr && loader_->generation_ == generation_) loader_->stop_epoch();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  WEFT_CHECK(loader_ != nullptr && loader_->generation_ == generation_,
             "DataLoader::Iterator: the epoch this iterator belongs to has ended (begin() or reset() was called)");
  current_ = loader_->next();
  return *this;
}

}  // namespace weft::io
