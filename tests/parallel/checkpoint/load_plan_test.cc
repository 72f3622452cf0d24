// LoadPlan as pure data (parallel/checkpoint/load_plan.h) and the typed ZeRO
// layout (parallel/data/zero_layout.h), with no files and no process group.
// The checkpoint metadata is built by hand as a save of the 8-child MLP of
// ck_cases.h would write it at (pp, dp) with or without ZeRO; every loading
// rank of every layout gets a plan whose items cover each element it needs
// exactly once, each from the one piece (file) that holds it. Three plans are
// written out item by item; missing and mis-shaped tensors are named.
#include "parallel/checkpoint/load_plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "parallel/data/zero_layout.h"
#include "tests/testing.h"

namespace weft::parallel::checkpoint {
namespace {

// The MLP's parameters, in registration order: Linear(6, 10), (10, 10), (10, 10), (10, 3).
const std::vector<TensorSpec>& mlp() {
  static const std::vector<TensorSpec> p = {
      {"0.weight", {10, 6}},  {"0.bias", {10}}, {"2.weight", {10, 10}}, {"2.bias", {10}},
      {"4.weight", {10, 10}}, {"4.bias", {10}}, {"6.weight", {3, 10}},  {"6.bias", {3}},
  };
  return p;
}
const std::vector<std::string> kLeaves = {"exp_avg", "exp_avg_sq"}, kOptions = {"lr", "weight_decay"};

// Stage s of pp: an equal share of the 4 Linears (balance 8 / pp children).
std::vector<TensorSpec> stage_params(int pp, int s) {
  const int per = 8 / pp;  // parameters per stage: 2 per Linear, 8 / pp children hold 4 / pp Linears
  return {mlp().begin() + s * per, mlp().begin() + (s + 1) * per};
}

// A stage's flat (Note [zero flat shards]): its parameters end to end, padded to a multiple of dp.
ZeroLayout flat_layout(int pp, int s, int dp, int rank) {
  ZeroLayout l;
  l.dp = dp;
  l.rank = rank;
  int64_t n = 0;
  for (const TensorSpec& p : stage_params(pp, s)) {
    l.params.push_back({p.name, 0, n, numel_of(p.shape)});
    n += numel_of(p.shape);
  }
  l.shards.push_back({n, (n + dp - 1) / dp * dp, DType::Float32});
  return l;
}

void add_piece(PieceMap& m, const std::string& key, const std::string& file, const Shape& shape, int64_t b, int64_t e) {
  m[key].push_back(Piece{file, DType::Float32, shape, b, e, 0, 0, ""});
}

// What a save at pp x dp (with or without ZeRO) records in its indexes.
CheckpointMetadata saved_at(int pp, int dp, bool zero) {
  CheckpointMetadata ck;
  ck.dir = "ck/step-00000004";
  ck.layout = {pp * dp, pp, dp, zero, std::vector<int>(pp, 8 / pp)};
  for (int s = 0; s < pp; ++s) {
    for (const TensorSpec& p : stage_params(pp, s))
      add_piece(ck.model, p.name, shard_file_name("model", s, pp), p.shape, 0, numel_of(p.shape));
    for (int r = 0; r < (zero ? dp : 1); ++r) {
      const std::string file =
          zero ? shard_file_name("optimizer", s * dp + r, pp * dp) : shard_file_name("optimizer", s, pp);
      const ZeroLayout l = flat_layout(pp, s, zero ? dp : 1, r);
      const int64_t lo = l.owned_begin(0), hi = lo + l.shard_numel(0);
      for (const ZeroParamSpan& p : l.params) {
        const Shape shape = stage_params(pp, s)[&p - l.params.data()].shape;
        const int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel);
        if (a < b)
          for (const std::string& leaf : kLeaves)
            add_piece(ck.optimizer, "state." + p.name + "." + leaf, file, shape, a - p.offset, b - p.offset);
        if (r != 0) continue;
        add_piece(ck.optimizer, "state." + p.name + ".step", file, {}, 0, 1);
        for (const std::string& o : kOptions) add_piece(ck.optimizer, "options." + p.name + "." + o, file, {}, 0, 1);
      }
    }
  }
  return ck;
}

// What rank (stage s, data-parallel rank r) of a pp x dp grid needs.
RankNeeds needs_of(int pp, int dp, bool zero, int s, int r) {
  RankNeeds n;
  n.model = stage_params(pp, s);
  n.optimizer = true;
  n.params = n.model;
  if (zero) n.zero = RankNeeds::Zero{flat_layout(pp, s, dp, r), kOptions};
  return n;
}

// The elements [0, k) of each target the plan must fill.
int64_t needed(const LoadPlan& plan, const LoadTarget& t) {
  if (!plan.zero || t.key.rfind("state.shard0.", 0) != 0 || t.key == "state.shard0.step") return numel_of(t.shape);
  const int64_t lo = plan.zero->owned_begin(0), n = plan.zero->shards[0].numel;
  return std::clamp<int64_t>(n - lo, 0, plan.zero->shard_numel(0));
}

// Every needed element of every target exactly once; each item inside one
// piece of its file; each element from the same element of the saved tensor.
void expect_exact_cover(const CheckpointMetadata& ck, const LoadPlan& plan, const std::string& what) {
  SCOPED_TRACE(what + "\n" + describe(plan));
  std::vector<std::vector<const LoadItem*>> by_target(plan.targets.size());
  for (const LoadItem& it : plan.items) {
    ASSERT_GE(it.target, 0);
    ASSERT_LT(it.target, static_cast<int>(plan.targets.size()));
    ASSERT_GT(it.length, 0) << it.key;
    by_target[it.target].push_back(&it);
    const auto& pieces = (it.index == Index::kModel ? ck.model : ck.optimizer).at(it.key);
    int holding = 0;
    for (const Piece& p : pieces)
      if (p.begin <= it.src_begin && it.src_begin + it.length <= p.end) {
        ++holding;
        EXPECT_EQ(p.file, it.file) << it.key;
      }
    EXPECT_EQ(holding, 1) << it.key << " [" << it.src_begin << ", " << it.src_begin + it.length << ")";
    const LoadTarget& t = plan.targets[it.target];
    if (plan.zero && t.key.rfind("state.shard0.", 0) == 0 && t.key != "state.shard0.step") {
      // The same flat element: the loading layout's offset of the parameter plus the source element.
      const std::string name = it.key.substr(6, it.key.rfind('.') - 6);
      auto p = std::find_if(plan.zero->params.begin(), plan.zero->params.end(),
                            [&](const ZeroParamSpan& z) { return z.name == name; });
      ASSERT_NE(p, plan.zero->params.end()) << name;
      EXPECT_EQ(p->offset + it.src_begin, plan.zero->owned_begin(0) + it.dst_begin) << it.key;
    } else {
      EXPECT_EQ(it.src_begin, it.dst_begin) << it.key;
    }
  }
  for (size_t t = 0; t < plan.targets.size(); ++t) {
    auto& items = by_target[t];
    std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->dst_begin < b->dst_begin; });
    int64_t next = 0;
    for (const LoadItem* it : items) {
      EXPECT_EQ(it->dst_begin, next) << plan.targets[t].key << (it->dst_begin < next ? ": overlap" : ": gap");
      next = it->dst_begin + it->length;
    }
    EXPECT_EQ(next, needed(plan, plan.targets[t])) << plan.targets[t].key;
  }
}

struct Grid {
  int pp, dp;
  bool zero;
  std::string str() const { return std::to_string(pp) + "x" + std::to_string(dp) + (zero ? " zero" : ""); }
};

std::vector<Grid> all_grids() {
  std::vector<Grid> out;
  for (auto [pp, dp] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}})
    for (bool zero : {false, true}) out.push_back({pp, dp, zero});
  return out;
}

// The plan of stage s, dp rank r of grid `to`: its targets, and their exact cover.
void check_rank(const CheckpointMetadata& ck, const Grid& to, int s, int r, const std::string& what) {
  const RankNeeds needs = needs_of(to.pp, to.dp, to.zero, s, r);
  const LoadPlan plan = plan_load(ck, needs);
  // The targets: the stage's model tensors in order, then its optimizer state.
  std::vector<std::string> want, got;
  for (const TensorSpec& p : needs.model) want.push_back(p.name);
  for (const TensorSpec& p : to.zero ? std::vector<TensorSpec>{{"shard0", {}}} : needs.params) {
    for (const std::string& o : kOptions) want.push_back("options." + p.name + "." + o);
    for (const std::string l : {"exp_avg", "exp_avg_sq", "step"}) want.push_back("state." + p.name + "." + l);
  }
  for (const LoadTarget& t : plan.targets) got.push_back(t.key);
  const size_t m = std::min(got.size(), needs.model.size());
  std::sort(want.begin() + m, want.end());
  std::sort(got.begin() + m, got.end());
  EXPECT_EQ(got, want) << what;
  EXPECT_EQ(plan.zero.has_value(), to.zero) << what;
  expect_exact_cover(ck, plan, what);
}

TEST(LoadPlan, ReshardingMatrixCoversEveryNeededElementOnce) {
  int plans = 0;
  for (const Grid& from : all_grids()) {
    const CheckpointMetadata ck = saved_at(from.pp, from.dp, from.zero);
    for (const Grid& to : all_grids())
      for (int s = 0; s < to.pp; ++s)
        for (int r = 0; r < to.dp; ++r, ++plans)
          check_rank(ck, to, s, r,
                     from.str() + " -> " + to.str() + " stage " + std::to_string(s) + " dp rank " + std::to_string(r));
  }
  EXPECT_EQ(plans, 10 * 26);  // 10 saved layouts, by the 26 ranks of the 10 loading layouts
}

// Saved at 2 x 2 with ZeRO: stage 0's flat is 0.weight [0, 60), 0.bias [60,
// 70), 2.weight [70, 170), 2.bias [170, 180); dp rank 0 (file 1) owns [0,
// 90), dp rank 1 (file 2) [90, 180), so 2.weight's state is split at its
// element 20. One process (1 x 1, no ZeRO) takes 2.weight's exp_avg whole from the two files.
TEST(LoadPlan, From2x2ZeroTo1x1ByHand) {
  const LoadPlan plan = plan_load(saved_at(2, 2, true), needs_of(1, 1, false, 0, 0));
  std::vector<std::string> lines;
  for (const LoadItem& it : plan.items)
    if (plan.targets[it.target].key == "state.2.weight.exp_avg" || plan.targets[it.target].key == "6.bias")
      lines.push_back(it.file + " " + it.key + " " + std::to_string(it.src_begin) + "+" + std::to_string(it.length) +
                      " -> " + plan.targets[it.target].key + " " + std::to_string(it.dst_begin));
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "model-00002-of-00002.safetensors 6.bias 0+3 -> 6.bias 0",
                       "optimizer-00001-of-00004.safetensors state.2.weight.exp_avg 0+20 -> state.2.weight.exp_avg 0",
                       "optimizer-00002-of-00004.safetensors state.2.weight.exp_avg 20+80 -> state.2.weight.exp_avg 20",
                   }))
      << describe(plan);
  // The scalars of stage 1's parameters come from stage 1's dp rank 0: file 3.
  for (const LoadItem& it : plan.items)
    if (it.key == "state.6.weight.step") {
      EXPECT_EQ(it.file, "optimizer-00003-of-00004.safetensors");
    }
}

// Saved at 1 x 1 without ZeRO, loaded at 1 x 2 with ZeRO: the flat is the 323
// elements of all 8 parameters (2.weight at 70, 2.bias 170, 4.weight 180,
// 4.bias 280, 6.weight 290, 6.bias 320), padded to 324; dp rank 1 owns [162,
// 324): 2.weight's elements [92, 100) and the rest whole; element 161 of its
// shard is padding. The step and the options are the flat's first parameter's.
TEST(LoadPlan, From1x1To1x2ZeroByHand) {
  const LoadPlan plan = plan_load(saved_at(1, 1, false), needs_of(1, 2, true, 0, 1));
  ASSERT_TRUE(plan.zero.has_value());
  EXPECT_EQ(plan.zero->shard_numel(0), 162);
  std::vector<std::string> lines;
  for (const LoadItem& it : plan.items) {
    const LoadTarget& t = plan.targets[it.target];
    if (it.index == Index::kOptimizer) {
      EXPECT_EQ(it.file, "optimizer-00001-of-00001.safetensors") << it.key;
    }
    if (t.key == "state.shard0.exp_avg" || t.key == "state.shard0.step" || t.key == "options.shard0.lr")
      lines.push_back(it.key + " [" + std::to_string(it.src_begin) + ", " + std::to_string(it.src_begin + it.length) +
                      ") -> " + t.key + " [" + std::to_string(it.dst_begin) + ", " +
                      std::to_string(it.dst_begin + it.length) + ")");
  }
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "options.0.weight.lr [0, 1) -> options.shard0.lr [0, 1)",
                       "state.2.weight.exp_avg [92, 100) -> state.shard0.exp_avg [0, 8)",
                       "state.2.bias.exp_avg [0, 10) -> state.shard0.exp_avg [8, 18)",
                       "state.4.weight.exp_avg [0, 100) -> state.shard0.exp_avg [18, 118)",
                       "state.4.bias.exp_avg [0, 10) -> state.shard0.exp_avg [118, 128)",
                       "state.6.weight.exp_avg [0, 30) -> state.shard0.exp_avg [128, 158)",
                       "state.6.bias.exp_avg [0, 3) -> state.shard0.exp_avg [158, 161)",
                       "state.0.weight.step [0, 1) -> state.shard0.step [0, 1)",
                   }))
      << describe(plan);
  for (const LoadTarget& t : plan.targets)
    if (t.key == "state.shard0.exp_avg") {
      EXPECT_EQ(t.shape, (Shape{162}));
    }
}

// Saved at 2 x 2 with ZeRO, loaded at 4 x 1 with ZeRO: stage 1 (2.weight,
// 2.bias) is a flat of 110 elements whose state lies in three pieces of two
// files; its step is 2.weight's, saved by stage 0's dp rank 0.
TEST(LoadPlan, From2x2ZeroTo4x1ZeroByHand) {
  const LoadPlan plan = plan_load(saved_at(2, 2, true), needs_of(4, 1, true, 1, 0));
  std::vector<std::string> lines;
  for (const LoadItem& it : plan.items) {
    const std::string& t = plan.targets[it.target].key;
    if (t == "state.shard0.exp_avg_sq" || t == "state.shard0.step")
      lines.push_back(it.file + ": " + it.key + " " + std::to_string(it.src_begin) + "+" + std::to_string(it.length) +
                      " -> " + t + " " + std::to_string(it.dst_begin));
  }
  EXPECT_EQ(lines,
            (std::vector<std::string>{
                "optimizer-00001-of-00004.safetensors: state.2.weight.exp_avg_sq 0+20 -> state.shard0.exp_avg_sq 0",
                "optimizer-00002-of-00004.safetensors: state.2.weight.exp_avg_sq 20+80 -> state.shard0.exp_avg_sq 20",
                "optimizer-00002-of-00004.safetensors: state.2.bias.exp_avg_sq 0+10 -> state.shard0.exp_avg_sq 100",
                "optimizer-00001-of-00004.safetensors: state.2.weight.step 0+1 -> state.shard0.step 0",
            }))
      << describe(plan);
}

TEST(LoadPlan, AMissingOrMisShapedTensorIsNamed) {
  const CheckpointMetadata ck = saved_at(2, 2, true);
  CheckpointMetadata no_bias = ck;
  no_bias.model.erase("4.bias");
  EXPECT_WEFT_ERROR(plan_load(no_bias, needs_of(2, 1, false, 1, 0)),
                    "checkpoint 'ck/step-00000004' has no tensor '4.bias'");
  RankNeeds wide = needs_of(2, 1, false, 0, 0);
  wide.model[2].shape = {12, 10};
  EXPECT_WEFT_ERROR(plan_load(ck, wide),
                    "checkpoint 'ck/step-00000004': tensor '2.weight' is [10, 10] float32 in the checkpoint but "
                    "[12, 10] float32 in the model");
  RankNeeds half = needs_of(2, 1, false, 0, 0);
  half.model[1].dtype = DType::BFloat16;
  EXPECT_WEFT_ERROR(plan_load(ck, half), "tensor '0.bias' is [10] float32 in the checkpoint but [10] bfloat16");
  // ZeRO: a parameter's state that the saved shards lack, or hold with another shape.
  CheckpointMetadata no_state = ck;
  no_state.optimizer.erase("state.2.bias.exp_avg");
  EXPECT_WEFT_ERROR(plan_load(no_state, needs_of(1, 2, true, 0, 1)),
                    "checkpoint 'ck/step-00000004' has no optimizer entry 'state.2.bias.exp_avg'");
  EXPECT_WEFT_ERROR(plan_load(no_state, needs_of(1, 1, true, 0, 0)), "has no optimizer entry 'state.2.bias.exp_avg'");
  CheckpointMetadata flat = ck;
  for (Piece& p : flat.optimizer.at("state.2.weight.exp_avg")) p.shape = {100};
  EXPECT_WEFT_ERROR(plan_load(flat, needs_of(2, 2, true, 0, 0)),
                    "optimizer entry 'state.2.weight.exp_avg' has shape [100] but parameter '2.weight' has shape "
                    "[10, 10]");
  CheckpointMetadata no_options = ck;
  no_options.optimizer.erase("options.0.weight.lr");
  EXPECT_WEFT_ERROR(plan_load(no_options, needs_of(1, 2, true, 0, 0)), "has no optimizer entry 'options.0.weight.lr'");
  CheckpointMetadata model_only = ck;
  model_only.optimizer.clear();
  EXPECT_WEFT_ERROR(plan_load(model_only, needs_of(1, 1, false, 0, 0)), "holds no optimizer state");
  RankNeeds just_model = needs_of(1, 1, false, 0, 0);
  just_model.optimizer = false;
  EXPECT_EQ(plan_load(model_only, just_model).targets.size(), 8u);
}

// Note [tied parameters in checkpoints]: a stage holding the head of a tied
// group takes the embedding's entries when the checkpoint has none of its own.
TEST(LoadPlan, ATiedParameterTakesItsGroupsEntries) {
  CheckpointMetadata ck;
  ck.dir = "ck";
  add_piece(ck.model, "head.weight", "model-00001-of-00001.safetensors", {4, 3}, 0, 12);
  const std::string file = "optimizer-00001-of-00001.safetensors";
  add_piece(ck.optimizer, "state.emb.weight.exp_avg", file, {4, 3}, 0, 12);
  add_piece(ck.optimizer, "state.emb.weight.step", file, {}, 0, 1);
  add_piece(ck.optimizer, "options.emb.weight.lr", file, {}, 0, 1);
  RankNeeds needs;
  needs.model = {{"head.weight", {4, 3}}};
  needs.optimizer = true;
  needs.params = needs.model;
  needs.tied = {{"emb.weight", "head.weight"}};
  const LoadPlan plan = plan_load(ck, needs);
  std::map<std::string, std::string> from;  // target -> saved key
  for (const LoadItem& it : plan.items) from[plan.targets[it.target].key] = it.key;
  EXPECT_EQ(from, (std::map<std::string, std::string>{{"head.weight", "head.weight"},
                                                      {"options.head.weight.lr", "options.emb.weight.lr"},
                                                      {"state.head.weight.exp_avg", "state.emb.weight.exp_avg"},
                                                      {"state.head.weight.step", "state.emb.weight.step"}}));
}

// ---- the typed ZeRO layout ----

ZeroLayout two_flats() {
  ZeroLayout l;
  l.dp = 2;
  l.rank = 1;
  l.shards = {{180, 180, DType::Float32}, {7, 8, DType::Float64}};
  l.params = {{"zeta", 0, 0, 60}, {"alpha", 0, 60, 120}, {"b", 1, 0, 7}};
  return l;
}

TEST(ZeroLayout, RoundTripsThroughTheStateDictKeys) {
  const ZeroLayout l = two_flats();
  optim::OptimizerStateDict sd;
  sd["state.shard0.exp_avg"] = zeros({90});  // other keys are left alone
  l.to_state(sd);
  // The keys and values of Note [zero state dicts], as the untyped dicts had them.
  EXPECT_EQ(sd.size(), 1u + 2 + 2 + 3);
  EXPECT_EQ(sd.at("layout.dp").dim(), 0);
  EXPECT_EQ(sd.at("layout.dp").dtype(), DType::Int64);
  EXPECT_EQ(sd.at("layout.dp").item<int64_t>(), 2);
  EXPECT_EQ(sd.at("layout.rank").item<int64_t>(), 1);
  EXPECT_EQ(testing::values(sd.at("layout.shard0")), (std::vector<double>{180, 180, 0}));
  EXPECT_EQ(testing::values(sd.at("layout.shard1")),
            (std::vector<double>{7, 8, static_cast<double>(static_cast<int>(DType::Float64))}));
  EXPECT_EQ(testing::values(sd.at("layout.param.alpha")), (std::vector<double>{0, 60, 120}));
  EXPECT_EQ(testing::values(sd.at("layout.param.b")), (std::vector<double>{1, 0, 7}));
  const ZeroLayout back = ZeroLayout::from_state(sd);
  EXPECT_EQ(back, l);  // params by (flat, offset), not by name
  EXPECT_EQ(back.shard_numel(0), 90);
  EXPECT_EQ(back.owned_begin(0), 90);
  EXPECT_EQ(back.shard_numel(1), 4);
  EXPECT_EQ(ZeroLayout::shard_name(1), "shard1");
  // Integers of another width read the same.
  sd["layout.shard1"] = tensor<int32_t>({7, 8, 1}, {3});
  EXPECT_EQ(ZeroLayout::from_state(sd), l);
}

TEST(ZeroLayout, AMalformedLayoutNamesTheKey) {
  optim::OptimizerStateDict good;
  two_flats().to_state(good);
  auto with = [&](const std::string& key, const Tensor& t) {
    auto sd = good;
    if (t.defined()) sd[key] = t;
    else sd.erase(key);
    return sd;
  };
  auto ints = [](std::vector<int64_t> v) { return tensor<int64_t>(v, {static_cast<int64_t>(v.size())}); };
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.dp", Tensor())), "ZeRO layout: missing 'layout.dp'");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.rank", Tensor())), "ZeRO layout: missing 'layout.rank'");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.rank", scalar_tensor(int64_t{2}, TensorOptions{DType::Int64}))),
                    "'layout.rank' is 2, not a rank of 'layout.dp' 2");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.dp", scalar_tensor(0.5))), "'layout.dp' must hold integers");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.shard0", ints({180, 180}))),
                    "'layout.shard0' must hold 3 integers (numel, padded, dtype), got shape [2]");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.shard0", ints({180, 181, 0}))),
                    "'layout.shard0' has numel 180 and padded 181");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.shard1", ints({7, 8, 99}))),
                    "'layout.shard1' has dtype code 99");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.shard0", Tensor())),
                    "'layout.shard0' is missing (the layout has 'layout.shard1'");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.param.b", ints({3, 0, 7}))),
                    "'layout.param.b' is in flat 3, but 'layout.shard3' is missing");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.param.b", ints({1, 2, 7}))),
                    "'layout.param.b' covers elements [2, 9) of flat 1, which has 7");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.param.alpha", ints({0, 50, 120}))),
                    "'layout.param.alpha' overlaps 'layout.param.zeta' in flat 0");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.param.b", ints({1, -1, 7}))), "'layout.param.b' is [1, -1, 7]");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.shardX", ints({1, 2, 0}))), "unexpected key 'layout.shardX'");
  EXPECT_WEFT_ERROR(ZeroLayout::from_state(with("layout.param.", ints({0, 0, 1}))), "unexpected key 'layout.param.'");
}

}  // namespace
}  // namespace weft::parallel::checkpoint
