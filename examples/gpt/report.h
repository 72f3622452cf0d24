// The GPT example's reporting: a progress bar by training step (loss,
// tokens/s, ETA), metrics as JSON lines (one per evaluation), and an SVG chart
// of training and validation loss against the step, for a browser.
//
// Contract:
// - StepProgress draws on stderr at most every 200 ms and at the last step:
//   "train [####......] 120/3000 loss=2.1043 4821 tok/s ETA 9m58s". Rates
//   count the tokens since the bar was made (a resumed run's bar starts at
//   its first step).
// - EvalRecord is one evaluation: the step (1-based: steps done), the mean
//   training loss over the steps since the previous record, the validation
//   loss, the learning rate, tokens/s over those steps and the seconds since
//   the run started. encode/decode round-trip it exactly (a checkpoint keeps
//   the history so a resumed run's chart covers the whole run).
// - append_jsonl writes one object per line:
//   {"step": 250, "train_loss": 2.104321, "val_loss": 2.087654, "lr": 0.00098,
//    "tokens_per_second": 4821.3, "seconds": 123.45}
// - write_loss_svg writes the chart (train and validation loss against the
//   step, both lines, axes with ticks and a legend) atomically.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::examples::gpt {

class StepProgress {
 public:
  StepProgress(int64_t first_step, int64_t total_steps, bool enabled);
  // After step `step` (1-based: steps done) with the running loss; `tokens` trained since the bar began.
  void update(int64_t step, double loss, int64_t tokens);
  void finish();

 private:
  int64_t first_, total_;
  bool enabled_, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// "9m58s", "42s", "1h02m"
std::string format_duration(double seconds);

struct EvalRecord {
  int64_t step = 0;
  double train_loss = 0, val_loss = 0, lr = 0, tokens_per_second = 0, seconds = 0;
};

std::string encode(const std::vector<EvalRecord>& history);
std::vector<EvalRecord> decode_history(const std::string& s);

void append_jsonl(const std::string& path, const EvalRecord& r);
void write_loss_svg(const std::string& path, const std::vector<EvalRecord>& history, const std::string& title);

}  // namespace weft::examples::gpt
