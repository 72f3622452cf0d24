// Names that survive a split (Note [name prefix] in nn/module.h): slices of a
// nested GPT-shaped model keep the whole model's parameter, buffer and module
// names, their state dicts partition the whole one, a slice loads exactly its
// keys from the whole state dict, and slices still index and run forward.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/autograd_meta.h"
#include "core/rng.h"
#include "nn/nn.h"
#include "tests/testing.h"

namespace weft::nn {
namespace {

// A GPT block with a buffer, so the slices carry buffers too.
class Block : public TransformerBlock {
 public:
  Block(int64_t c, int64_t h) : TransformerBlock(c, h) { seen = register_buffer("seen", zeros({2}, kInt64)); }
  Tensor seen;
};

// wte (C_in -> C), h (4 blocks), ln_f, head (C -> 3): GPT-2's layout of names.
class MiniGPT : public Module {
 public:
  MiniGPT() : Module("MiniGPT") {
    wte = register_module("wte", std::make_shared<Linear>(4, 8));
    h = register_module("h", std::make_shared<Sequential>());
    for (int i = 0; i < 4; ++i) h->push_back(std::make_shared<Block>(8, 2));
    ln_f = register_module("ln_f", std::make_shared<LayerNorm>(8));
    head = register_module("head", std::make_shared<Linear>(8, 3));
  }
  Tensor forward(const Tensor& x) override { return (*head)((*ln_f)((*h)((*wte)(x)))); }
  std::shared_ptr<Linear> wte, head;
  std::shared_ptr<Sequential> h;
  std::shared_ptr<LayerNorm> ln_f;
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (auto& [n, t] : named) out.push_back(n);
  return out;
}

bool starts_with_any(const std::string& s, const std::vector<std::string>& prefixes) {
  for (auto& p : prefixes)
    if (s.rfind(p, 0) == 0) return true;
  return false;
}

// The whole model's named entries whose names start with one of `prefixes`, in order.
std::vector<std::pair<std::string, Tensor>> whole_filtered(const std::vector<std::pair<std::string, Tensor>>& whole,
                                                           const std::vector<std::string>& prefixes) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [n, t] : whole)
    if (starts_with_any(n, prefixes)) out.emplace_back(n, t);
  return out;
}

void expect_same_entries(const std::vector<std::pair<std::string, Tensor>>& got,
                         const std::vector<std::pair<std::string, Tensor>>& want) {
  ASSERT_EQ(names_of(got), names_of(want));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i].second.is_same(want[i].second)) << got[i].first;
}

TEST(Partition, SliceOfNestedBlocksKeepsTheWholeModelsNames) {
  manual_seed(1);
  auto gpt = std::make_shared<MiniGPT>();
  auto part = gpt->h->slice(1, 3, "h");
  EXPECT_EQ(part->name_prefix(), "h");
  const std::vector<std::string> mine = {"h.1.", "h.2."};
  auto got = part->named_parameters();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front().first, "h.1.ln1.weight");
  expect_same_entries(got, whole_filtered(gpt->named_parameters(), mine));
  expect_same_entries(part->named_buffers(), whole_filtered(gpt->named_buffers(), mine));
  EXPECT_EQ(part->named_buffers().front().first, "h.1.seen");
  // Modules: the slice itself is named by its prefix, then the whole model's paths.
  std::vector<std::string> mods, want_mods = {"h"};
  for (auto& [n, m] : part->named_modules()) mods.push_back(n);
  for (auto& [n, m] : gpt->named_modules())
    if (starts_with_any(n + ".", mine)) want_mods.push_back(n);
  EXPECT_EQ(mods, want_mods);
  // Without a prefix the names are relative to h (what slice(b, e) of an unprefixed Sequential gives).
  EXPECT_EQ(gpt->h->slice(1, 3)->named_parameters().front().first, "1.ln1.weight");
  // A slice of a slice keeps the prefix and the names.
  auto inner = part->slice(1, 2);
  EXPECT_EQ(inner->name_prefix(), "h");
  expect_same_entries(inner->named_parameters(), whole_filtered(gpt->named_parameters(), {"h.2."}));
}

TEST(Partition, StagesOfATopLevelSplitUnionToTheWholeStateDict) {
  manual_seed(2);
  auto gpt = std::make_shared<MiniGPT>();
  // Two pipeline stages cut in the middle of h: children named as in the model.
  auto stage0 = Sequential::of_named({{"wte", gpt->wte}, {"h", gpt->h->slice(0, 2)}});
  auto stage1 = Sequential::of_named({{"h", gpt->h->slice(2, 4)}, {"ln_f", gpt->ln_f}, {"head", gpt->head}});
  StateDict whole = gpt->state_dict(), s0 = stage0->state_dict(), s1 = stage1->state_dict();
  std::vector<std::string> keys = s0.keys(), k1 = s1.keys();
  keys.insert(keys.end(), k1.begin(), k1.end());
  EXPECT_EQ(keys, whole.keys());  // disjoint, covering, and in the whole model's order
  for (auto* part : {&s0, &s1})
    for (auto& [k, v] : *part) EXPECT_TRUE(v.is_same(whole[k]) || equal(v, whole[k])) << k;
  for (auto& [k, v] : s0) EXPECT_FALSE(s1.contains(k)) << k;
  // The same names as parameters, and the stages still compute the model.
  auto p0 = names_of(stage0->named_parameters()), p1 = names_of(stage1->named_parameters());
  p0.insert(p0.end(), p1.begin(), p1.end());
  EXPECT_EQ(p0, names_of(gpt->named_parameters()));
  gpt->eval();
  Tensor x = testing::rnd({2, 5, 4}, kFloat32, 7);  // (B, T, C_in)
  Tensor want = (*gpt)(x);                          // (B, T, 3)
  Tensor got = (*stage1)((*stage0)(x));
  EXPECT_TRUE(equal(got, want));
}

TEST(Partition, WholeStateDictLoadsIntoASliceNonStrictly) {
  manual_seed(3);
  auto gpt = std::make_shared<MiniGPT>();
  auto donor = std::make_shared<MiniGPT>();  // other random weights
  {
    NoGradGuard ng;
    for (auto& [n, b] : donor->named_buffers()) b.fill_(5);
  }
  StateDict before = gpt->state_dict();
  for (auto& [k, v] : before) before.insert(k, v.clone());
  auto part = gpt->h->slice(2, 4, "h");
  StateDict whole = donor->state_dict();
  EXPECT_WEFT_ERROR(part->load_state_dict(whole), "unexpected keys: 'wte.weight'");
  Module::LoadResult res = part->load_state_dict(whole, /*strict=*/false);
  EXPECT_TRUE(res.missing_keys.empty());
  std::vector<std::string> want_unexpected;
  const std::vector<std::string> mine = {"h.2.", "h.3."};
  for (auto& k : whole.keys())
    if (!starts_with_any(k, mine)) want_unexpected.push_back(k);
  EXPECT_EQ(res.unexpected_keys, want_unexpected);
  // Exactly the slice's entries changed, to the donor's values.
  StateDict after = gpt->state_dict();
  int changed = 0;
  for (auto& [k, v] : after) {
    if (starts_with_any(k, mine)) {
      EXPECT_TRUE(equal(v, whole[k])) << k;
      ++changed;
    } else {
      EXPECT_TRUE(equal(v, before[k])) << k;
    }
  }
  EXPECT_EQ(changed, static_cast<int>(part->state_dict().size()));
  // The slice's own state dict is a subset of the whole one, key for key.
  for (auto& [k, v] : part->state_dict()) EXPECT_TRUE(after.contains(k)) << k;
  // A slice without the prefix does not match the whole model's keys.
  auto bare = gpt->h->slice(2, 4);
  Module::LoadResult none = bare->load_state_dict(whole, false);
  EXPECT_EQ(none.missing_keys.size(), bare->state_dict().size());
  // Errors name the prefix.
  StateDict bad = whole;
  bad.insert("h.2.ln1.weight", ones({3}));
  EXPECT_WEFT_ERROR(part->load_state_dict(bad, false), "'h.2.ln1.weight': checkpoint shape [3] vs model shape [8]");
  EXPECT_WEFT_ERROR(part->load_state_dict(bad, false), "name prefix 'h'");
}

TEST(Partition, SlicesIndexAndRunForward) {
  manual_seed(4);
  auto gpt = std::make_shared<MiniGPT>();
  auto part = gpt->h->slice(1, 4, "h");
  ASSERT_EQ(part->size(), 3u);
  EXPECT_EQ((*part)[0], (*gpt->h)[1]);  // positional, sharing the modules
  EXPECT_EQ((*part)[-1], (*gpt->h)[3]);
  EXPECT_WEFT_ERROR((*part)[3], "out of range for 3 modules");
  std::vector<std::string> children;
  for (auto& [n, m] : part->named_children()) children.push_back(n);
  EXPECT_EQ(children, (std::vector<std::string>{"1", "2", "3"}));
  gpt->eval();
  Tensor x = testing::rnd({1, 3, 8}, kFloat32, 9);
  Tensor want = (*(*gpt->h)[3])((*(*gpt->h)[2])((*(*gpt->h)[1])(x)));
  EXPECT_TRUE(equal((*part)(x), want));
  // Unnamed additions continue the numbering instead of colliding.
  part->push_back(std::make_shared<Tanh>());
  EXPECT_EQ(part->named_children().back().first, "4");
  auto fresh = std::make_shared<Sequential>();
  fresh->push_back(std::make_shared<Tanh>());
  fresh->push_back("x", std::make_shared<Tanh>());
  fresh->push_back(std::make_shared<Tanh>());
  std::vector<std::string> fnames;
  for (auto& [n, m] : fresh->named_children()) fnames.push_back(n);
  EXPECT_EQ(fnames, (std::vector<std::string>{"0", "x", "1"}));
}

TEST(Partition, TopLevelSequentialSliceKeepsNumbers) {
  auto seq = Sequential::of(std::make_shared<Linear>(3, 4), std::make_shared<ReLU>(), std::make_shared<Linear>(4, 4),
                            std::make_shared<ReLU>(), std::make_shared<Linear>(4, 2));
  auto tail = seq->slice(2, 5);
  EXPECT_EQ(names_of(tail->named_parameters()), (std::vector<std::string>{"2.weight", "2.bias", "4.weight", "4.bias"}));
  expect_same_entries(tail->named_parameters(), whole_filtered(seq->named_parameters(), {"2.", "4."}));
  Tensor x = testing::rnd({2, 3}, kFloat32, 3);
  EXPECT_TRUE(equal((*tail)((*seq->slice(0, 2))(x)), (*seq)(x)));
}

TEST(Partition, PrefixRulesAndErrors) {
  Linear lin(2, 2);
  for (const char* bad : {".h", "h.", "a..b", "."})
    EXPECT_WEFT_ERROR(lin.set_name_prefix(bad), "must be a dotted path of non-empty names");
  lin.set_name_prefix("encoder.layers.0");
  EXPECT_EQ(names_of(lin.named_parameters()),
            (std::vector<std::string>{"encoder.layers.0.weight", "encoder.layers.0.bias"}));
  EXPECT_EQ(lin.state_dict().keys(), (std::vector<std::string>{"encoder.layers.0.weight", "encoder.layers.0.bias"}));
  // Only the module asked uses its prefix: as a child it is named by its path.
  auto child = std::make_shared<Linear>(2, 2);
  child->set_name_prefix("h");
  auto parent = Sequential::of_named({{"h", child}});
  EXPECT_EQ(names_of(parent->named_parameters()), (std::vector<std::string>{"h.weight", "h.bias"}));
  lin.set_name_prefix("");
  EXPECT_EQ(names_of(lin.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
}

}  // namespace
}  // namespace weft::nn
