// nn::StateDict as a PyTorch user reaches for it: sd["key"], construction from
// the std::map io::load_safetensors returns and from an initializer list,
// conversion back to a map for io::save_safetensors, erase/update, and errors
// naming the key.
#include "nn/state_dict.h"

#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "io/safetensors.h"
#include "nn/nn.h"
#include "tests/testing.h"

namespace weft::nn {
namespace {

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

TEST(StateDict, IndexingReadsAndWritesButNeverInserts) {
  Tensor w = ones({2}), b = zeros({3});
  StateDict sd{{"w", w}, {"b", b}};
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"w", "b"}));  // insertion order, not sorted
  EXPECT_TRUE(sd["w"].is_same(w));
  const StateDict& csd = sd;
  EXPECT_TRUE(csd["b"].is_same(b));
  sd["w"] = full({2}, 3.0);  // replaces the value in place
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"w", "b"}));
  EXPECT_TRUE(testing::tensor_near(sd["w"], {3, 3}));
  EXPECT_WEFT_ERROR(sd["missing"], "state dict has no key 'missing'");
  EXPECT_WEFT_ERROR(csd["missing"], "state dict has no key 'missing'");
  EXPECT_EQ(sd.size(), 2u);
  EXPECT_WEFT_ERROR((StateDict{{"a", w}, {"a", b}}), "key 'a' given twice");
}

TEST(StateDict, EraseUpdateAndValuesKeepOrder) {
  StateDict sd{{"a", ones({1})}, {"b", ones({2})}, {"c", ones({3})}};
  EXPECT_TRUE(sd.erase("b"));
  EXPECT_FALSE(sd.erase("b"));
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(sd["c"].numel(), 3);  // lookups still right after the erase shifted positions
  sd.update(StateDict{{"d", ones({4})}, {"a", ones({5})}});
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a", "c", "d"}));
  EXPECT_EQ(sd["a"].numel(), 5);
  std::vector<int64_t> sizes;
  for (auto& v : sd.values()) sizes.push_back(v.numel());
  EXPECT_EQ(sizes, (std::vector<int64_t>{5, 3, 4}));
  EXPECT_FALSE(sd.empty());
  EXPECT_TRUE(StateDict().empty());
}

TEST(StateDict, ConvertsToAndFromMaps) {
  std::map<std::string, Tensor> m{{"z", ones({1})}, {"a", zeros({2})}};
  StateDict sd = m;  // implicit, as from io::load_safetensors(path).tensors
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"a", "z"}));
  std::map<std::string, Tensor> back = sd;
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back.at("z").is_same(m.at("z")));
  EXPECT_EQ(sd.to_map().size(), 2u);
  std::vector<std::pair<std::string, Tensor>> named{{"p", ones({1})}, {"q", ones({1})}};
  EXPECT_EQ(StateDict(named).keys(), (std::vector<std::string>{"p", "q"}));
}

TEST(StateDict, SafetensorsRoundTripWithoutGlue) {
  manual_seed(11);
  auto a = Sequential::of(std::make_shared<Linear>(3, 4), std::make_shared<BatchNorm1d>(4));
  auto b = Sequential::of(std::make_shared<Linear>(3, 4), std::make_shared<BatchNorm1d>(4));
  const std::string path = tmp_path("state_dict_roundtrip.safetensors");
  io::save_safetensors(path, a->state_dict());             // StateDict -> std::map
  b->load_state_dict(io::load_safetensors(path).tensors);  // std::map -> StateDict
  StateDict sa = a->state_dict(), sb = b->state_dict();
  ASSERT_EQ(sa.keys(), sb.keys());
  for (auto& [k, v] : sa) EXPECT_TRUE(equal(v, sb[k])) << k;
  EXPECT_FALSE(equal(sa["0.weight"], Sequential::of(std::make_shared<Linear>(3, 4))->state_dict()["0.weight"]));
}

}  // namespace
}  // namespace weft::nn
