// ModuleList, ModuleDict, ParameterList and ParameterDict: insertion order,
// PyTorch's parameter and state dict names, replacement in place, removal,
// training through the containers, and the errors.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "optim/sgd.h"
#include "tests/testing.h"

namespace weft::nn {
namespace {

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [n, t] : named) out.push_back(n);
  return out;
}

using Names = std::vector<std::string>;

TEST(ModuleDict, KeepsInsertionOrderAndNamesParametersByKey) {
  auto enc = std::make_shared<Linear>(3, 4);
  auto d = std::make_shared<ModuleDict>(NamedModules{{"enc", enc}, {"head", std::make_shared<Linear>(4, 2)}});
  EXPECT_EQ(d->keys(), (Names{"enc", "head"}));
  EXPECT_EQ(d->size(), 2u);
  EXPECT_TRUE(d->contains("head"));
  EXPECT_FALSE(d->contains("tail"));
  EXPECT_EQ((*d)["enc"], enc);
  EXPECT_EQ(d->get<Linear>("head")->out_features, 2);
  EXPECT_EQ(names_of(d->named_parameters()), (Names{"enc.weight", "enc.bias", "head.weight", "head.bias"}));

  // d["enc"] = ...: replaced where it was.
  auto wider = std::make_shared<Linear>(3, 5);
  d->insert("enc", wider);
  EXPECT_EQ(d->keys(), (Names{"enc", "head"}));
  EXPECT_EQ((*d)["enc"], wider);
  EXPECT_EQ(d->num_parameters(), 3 * 5 + 5 + 4 * 2 + 2);
  d->update({{"extra", std::make_shared<Linear>(2, 2, false)}, {"head", std::make_shared<Linear>(4, 3)}});
  EXPECT_EQ(d->keys(), (Names{"enc", "head", "extra"}));
  EXPECT_EQ(d->get<Linear>("head")->out_features, 3);

  EXPECT_EQ(d->pop("enc"), wider);
  EXPECT_EQ(names_of(d->named_parameters()), (Names{"head.weight", "head.bias", "extra.weight"}));
  EXPECT_EQ(d->items().size(), 2u);
  EXPECT_EQ(d->values()[1]->type_name(), "Linear");
  d->clear();
  EXPECT_EQ(d->size(), 0u);
  EXPECT_TRUE(d->parameters().empty());
}

// A model holding a dict of heads, as PyTorch code keeps per-task heads.
struct MultiHead : Module {
  std::shared_ptr<Linear> trunk;
  std::shared_ptr<ModuleDict> heads;
  explicit MultiHead(int64_t out_b) : Module("MultiHead") {
    trunk = register_module("trunk", std::make_shared<Linear>(3, 4));
    heads = register_module("heads", std::make_shared<ModuleDict>(NamedModules{
                                         {"a", std::make_shared<Linear>(4, 2)},
                                         {"b", std::make_shared<Linear>(4, out_b)},
                                     }));
  }
  Tensor forward(const Tensor& x, const std::string& task) { return (*(*heads)[task])(relu((*trunk)(x))); }
};

TEST(ModuleDict, StateDictAndTrainingThroughAHead) {
  manual_seed(3);
  MultiHead m(3), n(3);
  const StateDict sd = m.state_dict();
  Names keys;
  for (const auto& [k, v] : sd) keys.push_back(k);
  EXPECT_EQ(keys,
            (Names{"trunk.weight", "trunk.bias", "heads.a.weight", "heads.a.bias", "heads.b.weight", "heads.b.bias"}));
  n.load_state_dict(sd);
  Tensor x = randn({5, 3});
  EXPECT_TRUE(testing::tensors_near(n.forward(x, "b"), m.forward(x, "b"), 0.0));

  // Only the trunk and the head used get gradients.
  optim::SGD opt(m.named_parameters(), optim::SGDOptions{.lr = 0.1});
  Tensor before_a = m.heads->get<Linear>("a")->weight.clone();
  Tensor before_b = m.heads->get<Linear>("b")->weight.clone();
  m.forward(x, "b").pow(2).sum().backward();
  EXPECT_FALSE(m.heads->get<Linear>("a")->weight.grad().defined());
  Tensor gb = m.heads->get<Linear>("b")->weight.grad().clone();
  opt.step();
  EXPECT_TRUE(testing::tensors_near(m.heads->get<Linear>("a")->weight, before_a, 0.0));
  EXPECT_TRUE(testing::tensors_near(m.heads->get<Linear>("b")->weight, before_b - gb * 0.1, 1e-7));

  MultiHead other(5);  // head b of another width
  EXPECT_WEFT_ERROR(other.load_state_dict(sd), "heads.b.weight");
}

TEST(ModuleDict, Errors) {
  ModuleDict d({{"enc", std::make_shared<Linear>(3, 4)}, {"head", std::make_shared<Linear>(4, 2)}});
  EXPECT_WEFT_ERROR(d["tail"], "ModuleDict: no key 'tail' (keys: 'enc', 'head')");
  EXPECT_WEFT_ERROR(d.pop("tail"), "no key 'tail'");
  EXPECT_WEFT_ERROR(d.get<Conv2d>("head"), "ModuleDict: the module under 'head' is a Linear");
  EXPECT_WEFT_ERROR(d.insert("a.b", std::make_shared<Linear>(1, 1)), "name 'a.b' must be non-empty and contain no '.'");
  EXPECT_WEFT_ERROR(d.insert("", std::make_shared<Linear>(1, 1)), "must be non-empty");
  EXPECT_WEFT_ERROR(d.insert("x", nullptr), "submodule 'x' is null");
  EXPECT_WEFT_ERROR(d.insert("enc", nullptr), "submodule 'enc' is null");
  EXPECT_EQ(d.keys(), (Names{"enc", "head"}));  // the refusals changed nothing
  EXPECT_WEFT_ERROR(ModuleDict().get<Linear>("x"), "no key 'x' (keys: none)");
}

TEST(ModuleList, ExtendAndConstruct) {
  ModuleList l({std::make_shared<Linear>(2, 2), std::make_shared<ReLU>()});
  l.extend({std::make_shared<Linear>(2, 1)});
  EXPECT_EQ(l.size(), 3u);
  EXPECT_EQ(names_of(l.named_parameters()), (Names{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(l[-1]->type_name(), "Linear");
  EXPECT_WEFT_ERROR(l[3], "ModuleList: index 3 is out of range for 3 modules");
}

TEST(ParameterList, NamesByIndexAndReplacesInPlace) {
  ParameterList pl({zeros({3}), ones({2, 2})});
  EXPECT_EQ(pl.size(), 2u);
  EXPECT_EQ(names_of(pl.named_parameters()), (Names{"0", "1"}));
  EXPECT_TRUE(pl[0].requires_grad());
  EXPECT_TRUE(pl[0].is_leaf());
  Tensor& c = pl.append(full({1}, 5.0));
  EXPECT_EQ(c.item<float>(), 5.0f);
  EXPECT_EQ(pl[-1].item<float>(), 5.0f);
  Tensor frozen = pl.append(zeros({2}), /*requires_grad=*/false);
  EXPECT_FALSE(frozen.requires_grad());
  pl.extend({ones({1})});
  EXPECT_EQ(names_of(pl.named_parameters()), (Names{"0", "1", "2", "3", "4"}));

  Tensor& h = pl[0];
  pl.set(0, full({3}, 2.0));
  EXPECT_EQ(names_of(pl.named_parameters()), (Names{"0", "1", "2", "3", "4"}));
  EXPECT_TRUE(testing::tensors_near(h, full({3}, 2.0), 0.0));  // the handle holds the new tensor
  EXPECT_TRUE(pl.parameters()[0].requires_grad());
  EXPECT_EQ(pl.repr(),
            "ParameterList(0: [3] float32, 1: [2, 2] float32, 2: [1] float32, 3: [2] float32, 4: [1] float32)");

  // Trains: d/dp0 sum(p0 * 3) = 3, one SGD step of lr 0.1.
  optim::SGD opt(pl.parameters(), optim::SGDOptions{.lr = 0.1});
  (pl[0] * 3.0).sum().backward();
  opt.step();
  EXPECT_TRUE(testing::tensors_near(pl[0], full({3}, 1.7), 1e-6));

  // The state dict loads into the registered tensors.
  ParameterList other({zeros({3}), zeros({2, 2}), zeros({1}), zeros({2}), zeros({1})});
  other.load_state_dict(pl.state_dict());
  EXPECT_TRUE(testing::tensors_near(other[0], pl[0], 0.0));
  EXPECT_TRUE(testing::tensors_near(other[2], full({1}, 5.0), 0.0));
}

TEST(ParameterList, Errors) {
  ParameterList pl({zeros({3})});
  EXPECT_WEFT_ERROR(pl[1], "ParameterList: index 1 is out of range for 1 parameters");
  EXPECT_WEFT_ERROR(pl.set(-2, zeros({3})), "index -2 is out of range for 1 parameters");
  Tensor x = ones({2}).requires_grad_(true);
  EXPECT_WEFT_ERROR(pl.append(x * 2.0), "parameter '1' must be a leaf tensor");
  EXPECT_WEFT_ERROR(pl.append(Tensor()), "ParameterList: append got an undefined tensor (index 1)");
  EXPECT_WEFT_ERROR(pl.set(0, x * 2.0), "parameter '0' must be a leaf tensor");
  EXPECT_EQ(pl.size(), 1u);
  EXPECT_TRUE(testing::tensors_near(pl[0], zeros({3}), 0.0));
}

TEST(ParameterDict, InsertReplacePopAndTrain) {
  ParameterDict pd({{"alpha", full({1}, 2.0)}, {"beta", zeros({2})}});
  EXPECT_EQ(pd.keys(), (Names{"alpha", "beta"}));
  EXPECT_TRUE(pd.contains("beta"));
  EXPECT_TRUE(pd["alpha"].requires_grad());
  pd.insert("alpha", full({1}, 4.0));  // replaced where it was
  EXPECT_EQ(pd.keys(), (Names{"alpha", "beta"}));
  EXPECT_EQ(pd["alpha"].item<float>(), 4.0f);
  pd.update({{"gamma", ones({1})}});
  EXPECT_EQ(pd.size(), 3u);
  EXPECT_EQ(pd.repr(), "ParameterDict(alpha: [1] float32, beta: [2] float32, gamma: [1] float32)");
  Tensor beta = pd.pop("beta");
  EXPECT_EQ(beta.numel(), 2);
  EXPECT_EQ(pd.keys(), (Names{"alpha", "gamma"}));

  // d/d alpha sum(alpha * gamma * 3) = 3 gamma = 3.
  optim::SGD opt(pd.named_parameters(), optim::SGDOptions{.lr = 0.1});
  (pd["alpha"] * pd["gamma"] * 3.0).sum().backward();
  opt.step();
  EXPECT_NEAR(pd["alpha"].item<float>(), 3.7f, 1e-6);
  EXPECT_NEAR(pd["gamma"].item<float>(), 1.0f - 0.1f * 12.0f, 1e-6);

  ParameterDict other({{"alpha", zeros({1})}, {"gamma", zeros({1})}});
  other.load_state_dict(pd.state_dict());
  EXPECT_EQ(other["alpha"].item<float>(), pd["alpha"].item<float>());
  pd.clear();
  EXPECT_TRUE(pd.parameters().empty());
}

TEST(ParameterDict, Errors) {
  ParameterDict pd({{"alpha", zeros({1})}});
  EXPECT_WEFT_ERROR(pd["beta"], "ParameterDict: no key 'beta' (keys: 'alpha')");
  EXPECT_WEFT_ERROR(pd.pop("beta"), "no key 'beta'");
  EXPECT_WEFT_ERROR(pd.insert("a.b", zeros({1})), "name 'a.b' must be non-empty and contain no '.'");
  EXPECT_WEFT_ERROR(pd.insert("beta", Tensor()), "ParameterDict: the tensor for 'beta' is undefined");
  const ParameterDict& c = pd;
  EXPECT_WEFT_ERROR(c["gamma"], "no key 'gamma' (keys: 'alpha')");
  EXPECT_EQ(pd.keys(), (Names{"alpha"}));
}

}  // namespace
}  // namespace weft::nn
