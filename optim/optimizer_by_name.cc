// Optimizer state keyed by parameter name (Note [optimizer state by name] in
// optimizer.h): saving, and loading one partition's entries out of a whole
// model's dict.
#include <set>
#include <sstream>
#include <unordered_map>

#include "optim/optimizer.h"

namespace weft::optim {

namespace detail {

bool split_state_key(const std::string& rest, std::string& param, std::string& leaf) {
  const size_t dot = rest.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size()) return false;
  param = rest.substr(0, dot);
  leaf = rest.substr(dot + 1);
  return true;
}

std::string format_option_value(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace detail

std::vector<std::string> Optimizer::param_names() const { return resolve_names(nullptr, nullptr); }

std::vector<std::string> Optimizer::resolve_names(const char* op, const NamedParameters* names) const {
  const std::string where = name_ + (op ? std::string(".") + op : std::string(".param_names"));
  std::vector<std::string> out;
  if (names) {
    std::unordered_map<const TensorImpl*, const std::string*> by_param;
    for (const auto& [n, p] : *names)
      if (p.defined()) by_param.emplace(p.impl(), &n);
    std::set<std::string> seen;
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      for (size_t k = 0; k < groups_[gi].params.size(); ++k) {
        const Tensor& p = groups_[gi].params[k];
        auto it = by_param.find(p.impl());
        WEFT_CHECK(it != by_param.end(), where, ": parameter ", k, " of group ", gi, " (shape ", shape_str(p.sizes()),
                   ") is not among the ", names->size(), " names given");
        WEFT_CHECK(seen.insert(*it->second).second, where, ": parameter name '", *it->second, "' appears twice");
        out.push_back(*it->second);
      }
    }
    return out;
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& g = groups_[gi];
    WEFT_CHECK(g.param_names.size() == g.params.size(), where, ": parameter group ", gi,
               " has no parameter names; build the optimizer from named_parameters() or pass the names");
    out.insert(out.end(), g.param_names.begin(), g.param_names.end());
  }
  return out;
}

OptimizerStateDict Optimizer::state_dict_by_name() const {
  return state_dict_by_name_impl(resolve_names("state_dict_by_name", nullptr));
}

OptimizerStateDict Optimizer::state_dict_by_name(const NamedParameters& names) const {
  return state_dict_by_name_impl(resolve_names("state_dict_by_name", &names));
}

OptimizerStateDict Optimizer::state_dict_by_name_impl(const std::vector<std::string>& names) const {
  OptimizerStateDict sd;
  size_t i = 0;
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) {
      const std::string& n = names[i++];
      auto it = state_.find(p.impl());
      if (it != state_.end())
        for (const auto& [state_name, t] : it->second) sd["state." + n + "." + state_name] = t;
      for (const auto& [key, value] : g.options)
        sd["options." + n + "." + key] = scalar_tensor(value, TensorOptions{DType::Float64});
    }
  }
  return sd;
}

std::vector<std::string> Optimizer::load_state_dict_by_name(const OptimizerStateDict& sd) {
  return load_by_name_impl(sd, resolve_names("load_state_dict_by_name", nullptr));
}

std::vector<std::string> Optimizer::load_state_dict_by_name(const OptimizerStateDict& sd,
                                                            const NamedParameters& names) {
  return load_by_name_impl(sd, resolve_names("load_state_dict_by_name", &names));
}

std::vector<std::string> Optimizer::load_by_name_impl(const OptimizerStateDict& sd,
                                                      const std::vector<std::string>& names) {
  const std::string op = name_ + ".load_state_dict_by_name";
  std::set<std::string> mine(names.begin(), names.end());
  // ---- sort the keys: this optimizer's state and options, and the rest ----
  std::map<std::string, std::map<std::string, Tensor>> state_of, options_of;
  std::vector<std::string> unused;
  for (const auto& [key, t] : sd) {
    WEFT_CHECK(t.defined(), op, ": entry '", key, "' is an undefined tensor");
    WEFT_CHECK(key.rfind("param_groups.", 0) != 0, op, ": '", key,
               "' is a key of a positional state dict (Note [optimizer state dict]); load it with load_state_dict");
    std::string param, leaf;
    const bool is_state = key.rfind("state.", 0) == 0 && detail::split_state_key(key.substr(6), param, leaf);
    const bool is_option =
        !is_state && key.rfind("options.", 0) == 0 && detail::split_state_key(key.substr(8), param, leaf);
    WEFT_CHECK(is_state || is_option, op, ": unexpected key '", key,
               "' (expected state.<param name>.<state> or options.<param name>.<option>)");
    if (!mine.count(param)) {
      unused.push_back(key);
      continue;
    }
    (is_state ? state_of : options_of)[param][leaf] = t;
  }

  // ---- options: complete for every parameter, equal within each group ----
  std::vector<OptionMap> new_options(groups_.size());
  size_t i = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string* first = nullptr;
    for (size_t k = 0; k < groups_[gi].params.size(); ++k) {
      const std::string& n = names[i++];
      auto it = options_of.find(n);
      WEFT_CHECK(it != options_of.end(), op, ": no entry for parameter '", n, "' (missing 'options.", n,
                 ".lr' and its other hyper-parameters): is the state dict from a model with these parameter names?");
      OptionMap opts;
      for (const auto& [key, t] : it->second) {
        WEFT_CHECK(defaults_.count(key), op, ": unknown hyper-parameter 'options.", n, ".", key, "'");
        WEFT_CHECK(t.numel() == 1, op, ": hyper-parameter 'options.", n, ".", key,
                   "' must have one element, got shape ", shape_str(t.sizes()));
        opts[key] = t.item<double>();
      }
      complete_loaded_options(opts, op, "options." + n + ".");
      if (!first) {
        first = &n;
        new_options[gi] = opts;
        continue;
      }
      for (const auto& [key, value] : opts)
        WEFT_CHECK(value == new_options[gi].at(key), op, ": parameters '", *first, "' and '", n, "' share group ", gi,
                   " here but were saved with different ", key, " (",
                   detail::format_option_value(new_options[gi].at(key)), " and ", detail::format_option_value(value),
                   "); group the parameters as they were when saved");
    }
    check_options(new_options[gi]);
  }

  // ---- state: known names, shapes ----
  std::vector<const Tensor*> params;
  std::vector<std::map<std::string, Tensor>> entries_of;
  i = 0;
  for (const ParamGroup& g : groups_) {
    for (const Tensor& p : g.params) {
      const std::string& n = names[i++];
      auto it = state_of.find(n);
      if (it == state_of.end()) continue;
      for (const auto& [state_name, t] : it->second)
        check_state_entry(op, "state." + n + "." + state_name, state_name, t, p, "parameter '" + n + "'");
      params.push_back(&p);
      entries_of.push_back(it->second);
    }
  }

  // ---- everything checked: replace options and state ----
  for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].options = new_options[gi];
  replace_state(params, entries_of);
  return unused;
}

}  // namespace weft::optim
