// Oversubscribed cores and the speeds of ranks computing together (see contention.h).
#include "parallel/partition/contention.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "parallel/comm/collectives.h"
#include "parallel/partition/profile.h"

namespace weft::parallel::partition {
namespace {

// "host\npid threads cpu cpu ...": one rank's record on the wire.
std::string encode(const RankCores& r) {
  std::ostringstream os;
  os << r.host << '\n' << r.pid << ' ' << r.threads;
  for (int c : r.cpus) os << ' ' << c;
  return os.str();
}

RankCores decode(const std::string& s, int rank) {
  std::istringstream is(s);
  RankCores r;
  std::getline(is, r.host);
  WEFT_CHECK(static_cast<bool>(is >> r.pid >> r.threads), "plan_compute_speeds: rank ", rank,
             " sent an unreadable record");
  for (int c; is >> c;) r.cpus.push_back(c);
  return r;
}

// Phase: the ranks with `computing` set run the workload `repeats` times at
// once (a barrier before each); returns the mean of their medians.
double phase_s(ProcessGroup& world, bool computing, int repeats, const Workload& workload) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    world.barrier()->wait();
    if (computing) times.push_back(workload());
  }
  Tensor sum = zeros({2}, DType::Float64);  // (sum of medians, computing ranks)
  if (computing) {
    std::sort(times.begin(), times.end());
    sum.data_ptr<double>()[0] = times[times.size() / 2];
    sum.data_ptr<double>()[1] = 1;
  }
  world.allreduce(sum, {ReduceOp::Sum})->wait();
  return sum.data_ptr<double>()[0] / std::max(1.0, sum.data_ptr<double>()[1]);
}

}  // namespace

RankCores local_rank_cores() {
  RankCores r;
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) == 0) r.host = name;
  r.pid = static_cast<long>(getpid());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) r.cpus.push_back(c);
  } else {  // no mask to read: every CPU the machine has
    const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) r.cpus.push_back(c);
  }
  r.threads = std::max(1, get_num_threads());
  return r;
}

double shared_cores(const std::vector<RankCores>& ranks, int pipeline_ranks) {
  WEFT_CHECK(pipeline_ranks >= 1, "shared_cores: pipeline_ranks must be positive, got ", pipeline_ranks);
  std::map<std::string, std::set<int>> pool;
  std::map<std::string, std::map<long, int>> threads;  // host -> process -> its threads
  for (size_t i = 0; i < ranks.size(); ++i) {
    WEFT_CHECK(ranks[i].threads >= 1, "shared_cores: rank ", i, " computes with ", ranks[i].threads, " threads");
    pool[ranks[i].host].insert(ranks[i].cpus.begin(), ranks[i].cpus.end());
    threads[ranks[i].host][ranks[i].pid] = ranks[i].threads;
  }
  double worst = 1;  // pool / demand on the most oversubscribed host
  for (const auto& [host, cpus] : pool) {
    double demand = 0;
    for (const auto& [pid, n] : threads[host]) demand += n;
    worst = std::min(worst, std::max<double>(static_cast<double>(cpus.size()), 1) / demand);
  }
  return worst < 1 ? pipeline_ranks * worst : 0.0;
}

std::vector<double> measure_compute_speeds(ProcessGroup& world, int pipeline_rank, int pipeline_ranks,
                                           const Workload& workload, int repeats) {
  WEFT_CHECK(pipeline_ranks >= 1 && pipeline_rank >= 0 && pipeline_rank < pipeline_ranks && repeats >= 1,
             "measure_compute_speeds: pipeline rank ", pipeline_rank, " of ", pipeline_ranks, ", repeats ", repeats);
  const double alone = phase_s(world, world.rank() == 0, repeats, workload);
  std::vector<double> speed;
  for (int k = 1; k <= pipeline_ranks; ++k)
    speed.push_back(alone / phase_s(world, pipeline_rank < k, repeats, workload));
  return speed;
}

Workload model_workload(nn::Sequential& model, const Tensor& sample, ProcessGroup& group, int root) {
  const Tensor batch = broadcast_tensor(group, sample, root, "model_workload");
  return [&model, batch] {
    ProfileOptions once;
    once.warmup = 0;
    once.repeats = 1;
    double s = 0;
    for (const LayerProfile& l : profile_layers(model, nn::Tensors{batch}, once)) s += l.forward_s + l.backward_s;
    return s;
  };
}

std::vector<double> plan_compute_speeds(ProcessGroup& world, int pipeline_rank, int pipeline_ranks,
                                        const std::function<Workload()>& make_workload) {
  const std::vector<std::string> all = allgather_bytes(world, encode(local_rank_cores()));
  std::vector<RankCores> ranks;
  for (size_t i = 0; i < all.size(); ++i) ranks.push_back(decode(all[i], static_cast<int>(i)));
  if (shared_cores(ranks, pipeline_ranks) <= 0) return {};
  return measure_compute_speeds(world, pipeline_rank, pipeline_ranks, make_workload());
}

}  // namespace weft::parallel::partition
