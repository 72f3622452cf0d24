// StepLog (train/step_log.h).
#include "train/step_log.h"

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "train/trainer.h"

namespace weft::train {

void StepLog::on_fit_begin(Trainer& t) {
  if (!t.lead()) return;
  std::vector<std::string> keep;
  if (t.state().step > 0) {
    std::ifstream in(path_);
    static const std::regex kLine(R"(^\{"step": (\d{1,18}), "epoch": \d+, "loss": [^}]*\}$)");
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      WEFT_CHECK(std::regex_match(line, m, kLine), "StepLog: ", path_, " line ", n,
                 " is not a step record {\"step\": N, \"epoch\": E, \"loss\": L}: ", line.substr(0, 120));
      if (std::stoll(m[1].str()) <= t.state().step) keep.push_back(line);
    }
  }
  std::ofstream out(path_, std::ios::trunc);
  WEFT_CHECK(out.good(), "StepLog: cannot open '", path_, "' for writing");
  for (const auto& line : keep) out << line << "\n";
  WEFT_CHECK(out.good(), "StepLog: writing '", path_, "' failed");
}

void StepLog::on_step_end(Trainer& t) {
  if (!t.lead()) return;
  std::ofstream out(path_, std::ios::app);
  WEFT_CHECK(out.good(), "StepLog: cannot open '", path_, "' for appending");
  char loss[64];
  std::snprintf(loss, sizeof(loss), "%.17g", t.state().loss);
  out << "{\"step\": " << t.state().step << ", \"epoch\": " << t.state().epoch << ", \"loss\": " << loss << "}\n";
  WEFT_CHECK(out.good(), "StepLog: writing '", path_, "' failed");
}

}  // namespace weft::train
