// The optimizer tests' golden-case drivers: K steps from the golden start
// with the golden gradients compared with PyTorch's parameters after each step
// (check_case), and a state dict saved to a file mid-run continuing exactly as
// the uninterrupted run (check_round_trip).
#pragma once

#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "tests/optim/golden.h"

namespace weft::optim::cases {

using weft::testing::golden;
using weft::testing::golden_param;
using weft::testing::max_rel_diff;
using weft::testing::tensors_near;
using weft::testing::values;

inline constexpr int K = 6;  // steps in the golden file

using MakeOpt = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>)>;
using MakeSched = std::function<std::unique_ptr<LRScheduler>(Optimizer&)>;

// Runs K steps from the golden start with the golden gradients and compares
// every step's parameters (and lr) with PyTorch's, to `tol` relative (values
// below 0.01 in magnitude: relative to 0.01). The default is ~2 ulp; a case
// whose parameter falls close to zero carries its earlier, larger values'
// one-ulp differences and passes a looser `tol`.
inline void check_case(const std::string& name, const MakeOpt& make, const MakeSched& make_sched = nullptr,
                       double tol = 3e-7) {
  SCOPED_TRACE(name);
  Tensor p0 = golden_param("init.p0"), p1 = golden_param("init.p1");
  auto opt = make({p0, p1});
  std::unique_ptr<LRScheduler> sched = make_sched ? make_sched(*opt) : nullptr;
  const Tensor &e0 = golden("opt." + name + ".p0"), &e1 = golden("opt." + name + ".p1");
  double worst = 0;
  for (int k = 0; k < K; ++k) {
    if (sched) {
      double expected_lr = golden("opt." + name + ".lr").select(0, k).item<double>();
      EXPECT_NEAR(opt->param_groups()[0].lr(), expected_lr, 1e-12 * expected_lr) << "step " << k;
    }
    p0.set_grad(golden("grads.p0").select(0, k).clone());
    p1.set_grad(golden("grads.p1").select(0, k).clone());
    opt->step();
    if (sched) sched->step();
    EXPECT_LE(max_rel_diff(p0, e0.select(0, k + 1)), tol) << "p0 after step " << k;
    EXPECT_LE(max_rel_diff(p1, e1.select(0, k + 1)), tol) << "p1 after step " << k;
    EXPECT_TRUE(tensors_near(p0, e0.select(0, k + 1), 1e-6));
    worst = std::max({worst, max_rel_diff(p0, e0.select(0, k + 1), 0), max_rel_diff(p1, e1.select(0, k + 1), 0)});
  }
  std::cout << name << ": largest relative difference from PyTorch " << worst << "\n";
}

template <typename O, typename Opts>
MakeOpt maker(Opts o) {
  return [o](std::vector<Tensor> ps) { return std::make_unique<O>(std::move(ps), o); };
}

inline std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

inline void check_round_trip(const std::string& what, const MakeOpt& make) {
  SCOPED_TRACE(what);
  auto grads = [](int k) {
    return std::pair(golden("grads.p0").select(0, k).clone(), golden("grads.p1").select(0, k).clone());
  };
  // Uninterrupted: K steps.
  Tensor u0 = golden_param("init.p0"), u1 = golden_param("init.p1");
  auto full = make({u0, u1});
  for (int k = 0; k < K; ++k) {
    auto [g0, g1] = grads(k);
    u0.set_grad(g0);
    u1.set_grad(g1);
    full->step();
  }
  // Interrupted: 3 steps, save parameters and state to a file, fresh optimizer, load, 3 more.
  Tensor a0 = golden_param("init.p0"), a1 = golden_param("init.p1");
  auto first = make({a0, a1});
  for (int k = 0; k < 3; ++k) {
    auto [g0, g1] = grads(k);
    a0.set_grad(g0);
    a1.set_grad(g1);
    first->step();
  }
  std::map<std::string, Tensor> file = first->state_dict();
  file["model.p0"] = a0.detach();
  file["model.p1"] = a1.detach();
  const std::string path = tmp_path(what + ".safetensors");
  io::save_safetensors(path, file);
  first.reset();

  io::SafetensorsFile loaded = io::load_safetensors(path);
  Tensor b0 = loaded.tensors.at("model.p0").clone(), b1 = loaded.tensors.at("model.p1").clone();
  b0.requires_grad_(true);
  b1.requires_grad_(true);
  loaded.tensors.erase("model.p0");
  loaded.tensors.erase("model.p1");
  auto second = make({b0, b1});
  second->load_state_dict(loaded.tensors);
  for (int k = 3; k < K; ++k) {
    auto [g0, g1] = grads(k);
    b0.set_grad(g0);
    b1.set_grad(g1);
    second->step();
  }
  EXPECT_EQ(values(b0), values(u0));
  EXPECT_EQ(values(b1), values(u1));
}

}  // namespace weft::optim::cases
