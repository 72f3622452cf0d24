// EpochRecord (train/history.h).
#include "train/history.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace weft::train {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// Reads "nan" too (operator>> does not).
double read_double(std::istringstream& in, const std::string& text) {
  std::string tok;
  in >> tok;
  WEFT_CHECK(!tok.empty(), "EpochRecord: history entry '", text, "' is incomplete");
  char* end = nullptr;
  const double v = std::strtod(tok.c_str(), &end);
  WEFT_CHECK(end && *end == '\0', "EpochRecord: '", tok, "' in history entry '", text, "' is not a number");
  return v;
}

}  // namespace

double EpochRecord::get(const std::string& key, const std::string& metric, const std::string& valid) const {
  if (key == "epoch") return static_cast<double>(epoch);
  if (key == "step") return static_cast<double>(step);
  if (key == "train_loss") return train_loss;
  if (!metric.empty() && key == "train_" + metric) return train_metric;
  if (key == valid + "_loss") return valid_loss;
  if (!metric.empty() && key == valid + "_" + metric) return valid_metric;
  if (key == "lr") return lr;
  if (key == "samples_per_second") return samples_per_second;
  if (key == "seconds") return seconds;
  auto it = extra.find(key);
  if (it != extra.end()) return it->second;
  std::string known = "epoch, step, train_loss, " + (metric.empty() ? "" : "train_" + metric + ", ") + valid +
                      "_loss, " + (metric.empty() ? "" : valid + "_" + metric + ", ") +
                      "lr, samples_per_second, seconds";
  for (const auto& [k, v] : extra) known += ", " + k;
  WEFT_ERROR("EpochRecord: no value named '", key, "' (known: ", known, ")");
}

std::string EpochRecord::json(const std::string& metric, const std::string& valid) const {
  std::ostringstream out;
  out << "{\"epoch\": " << epoch << ", \"step\": " << step;
  auto field = [&](const std::string& key, double v, const char* fmt) {
    if (std::isnan(v)) return;
    char buf[64];
    std::snprintf(buf, sizeof(buf), fmt, v);
    out << ", \"" << key << "\": " << buf;
  };
  field("train_loss", train_loss, "%.6f");
  if (!metric.empty()) field("train_" + metric, train_metric, "%.6f");
  field(valid + "_loss", valid_loss, "%.6f");
  if (!metric.empty()) field(valid + "_" + metric, valid_metric, "%.6f");
  field("lr", lr, "%.9g");
  for (const auto& [k, v] : extra) field(k, v, "%.9g");
  field("samples_per_second", samples_per_second, "%.1f");
  field("seconds", seconds, "%.2f");
  out << "}";
  return out.str();
}

std::string EpochRecord::encode() const {
  std::string s = std::to_string(epoch) + " " + std::to_string(step);
  for (double v : {train_loss, train_metric, valid_loss, valid_metric, lr, samples_per_second, seconds})
    s.append(" ").append(num(v));
  for (const auto& [k, v] : extra) {
    WEFT_CHECK(!k.empty() && k.find_first_of(" \t\n") == std::string::npos, "EpochRecord: extra key '", k,
               "' must be one word");
    s.append(" ").append(k).append(" ").append(num(v));
  }
  return s;
}

EpochRecord EpochRecord::decode(const std::string& text) {
  EpochRecord r;
  std::istringstream in(text);
  WEFT_CHECK(static_cast<bool>(in >> r.epoch >> r.step), "EpochRecord: history entry '", text, "' is not one");
  for (double* v :
       {&r.train_loss, &r.train_metric, &r.valid_loss, &r.valid_metric, &r.lr, &r.samples_per_second, &r.seconds})
    *v = read_double(in, text);
  std::string key;
  while (in >> key) r.extra[key] = read_double(in, text);
  return r;
}

EpochRecord EpochRecord::decode_legacy(int64_t epoch, const std::string& text) {
  EpochRecord r;
  r.epoch = epoch;
  std::istringstream in(text);
  for (double* v : {&r.train_loss, &r.train_metric, &r.valid_loss, &r.valid_metric, &r.samples_per_second, &r.seconds})
    *v = read_double(in, text);
  return r;
}

}  // namespace weft::train
