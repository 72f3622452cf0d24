// The GPT example's corpus (contract in corpus.h).
#include "examples/gpt/corpus.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "core/ops.h"
#include "core/rng.h"

namespace weft::examples::gpt {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  WEFT_CHECK(in.good(), "gpt corpus: cannot read '", p.string(), "'");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t") == std::string::npos; }

// Joins lines [a, b) after trimming blank lines at both ends and trailing spaces.
std::string make_record(const std::vector<std::string>& lines, size_t a, size_t b) {
  while (a < b && blank(lines[a])) ++a;
  while (b > a && blank(lines[b - 1])) --b;
  std::string out;
  for (size_t i = a; i < b; ++i) {
    std::string l = lines[i];
    l.erase(l.find_last_not_of(" \t") + 1);
    if (i > a) out += '\n';
    out += l;
  }
  return out;
}

bool clean(const std::string& record) {
  return std::none_of(record.begin(), record.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f;
  });
}

}  // namespace

std::vector<std::string> split_records(const std::string& text, bool* fortune) {
  const std::vector<std::string> lines = lines_of(text);
  const bool is_fortune = std::any_of(lines.begin(), lines.end(), [](const std::string& l) { return l == "%"; });
  if (fortune) *fortune = is_fortune;
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= lines.size(); ++i) {
    const bool cut = i == lines.size() || (is_fortune ? lines[i] == "%" : blank(lines[i]));
    if (!cut) continue;
    std::string r = make_record(lines, start, i);
    if (!r.empty()) out.push_back(std::move(r));
    start = i + 1;
  }
  return out;
}

Corpus load_corpus(const std::string& path, double val_fraction) {
  WEFT_CHECK(val_fraction > 0 && val_fraction <= 0.5, "gpt corpus: the validation fraction must be in (0, 0.5], got ",
             val_fraction);
  Corpus c;
  c.path = path;
  std::error_code ec;
  const fs::path root(path);
  WEFT_CHECK(fs::exists(root, ec), "gpt corpus: '", path,
             "' does not exist (the default is Debian's fortunes package, which ./bazelw installs; or give --data "
             "FILE_OR_DIR)");
  std::vector<fs::path> files;
  if (fs::is_directory(root, ec)) {
    for (const auto& e : fs::directory_iterator(root, ec)) {
      if (e.is_symlink() || !e.is_regular_file()) continue;
      if (ends_with(e.path().filename().string(), ".dat")) continue;
      files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(root);
  }
  std::vector<std::pair<std::string, bool>> records;  // (text, fortune file)
  for (const fs::path& f : files) {
    const std::string text = read_file(f);
    if (text.find('\0') != std::string::npos) continue;  // binary
    bool fortune = false;
    std::vector<std::string> rs = split_records(text, &fortune);
    if (rs.empty()) continue;
    c.files.push_back(f.string());
    for (auto& r : rs) {
      if (!clean(r)) {
        ++c.dropped_records;
        continue;
      }
      records.emplace_back(std::move(r), fortune);
    }
  }
  WEFT_CHECK(!records.empty(), "gpt corpus: no text in '", path, "' (", files.size(),
             " file(s) looked at; the corpus needs text files, records separated by '%' lines or blank lines)");
  c.records = static_cast<int64_t>(records.size());
  for (int64_t i = 0; i < c.records; ++i) {
    const bool val =
        std::floor(static_cast<double>(i + 1) * val_fraction) > std::floor(static_cast<double>(i) * val_fraction);
    std::vector<uint8_t>& out = val ? c.val : c.train;
    (val ? c.val_records : c.train_records)++;
    const auto& [text, fortune] = records[i];
    out.insert(out.end(), text.begin(), text.end());
    const std::string sep = fortune ? "\n%\n" : "\n\n";
    out.insert(out.end(), sep.begin(), sep.end());
  }
  return c;
}

void check_fits(const Corpus& c, int64_t context) {
  const auto n_train = static_cast<int64_t>(c.train.size()), n_val = static_cast<int64_t>(c.val.size());
  WEFT_CHECK(n_train > context && n_val > context, "gpt corpus: '", c.path, "' is too small for --context ", context,
             ": the training split has ", n_train, " tokens (", c.train_records, " records) and the validation split ",
             n_val, " (", c.val_records, " records); each needs more than ", context,
             " (give more text or a shorter --context)");
}

Batch draw_batch(const std::vector<uint8_t>& tokens, int64_t batch, int64_t context, uint64_t seed, int64_t step,
                 int64_t row_begin, int64_t row_end) {
  const auto n = static_cast<int64_t>(tokens.size());
  WEFT_CHECK(n > context, "draw_batch: ", n, " tokens cannot hold a window of ", context, " plus its target");
  WEFT_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= batch, "draw_batch: rows [", row_begin, ", ", row_end,
             ") of a batch of ", batch);
  const uint64_t per_step = static_cast<uint64_t>((2 * batch + 3) / 4 * 4);  // two values per row, whole blocks
  PhiloxReader rng(PhiloxState{seed, static_cast<uint64_t>(step) * per_step});
  const int64_t rows = row_end - row_begin;
  Batch b{empty({rows, context}, DType::Int64), empty({rows, context}, DType::Int64)};
  int64_t* x = b.x.data_ptr<int64_t>();
  int64_t* y = b.y.data_ptr<int64_t>();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint64_t u = (static_cast<uint64_t>(rng.value(2 * r)) << 32) | rng.value(2 * r + 1);
    const auto s = static_cast<int64_t>(u % static_cast<uint64_t>(n - context));
    for (int64_t t = 0; t < context; ++t) {
      x[(r - row_begin) * context + t] = tokens[s + t];
      y[(r - row_begin) * context + t] = tokens[s + t + 1];
    }
  }
  return b;
}

Batch eval_windows(const std::vector<uint8_t>& tokens, int64_t context, int64_t count) {
  const auto n = static_cast<int64_t>(tokens.size());
  WEFT_CHECK(n > context && count >= 1, "eval_windows: ", n, " tokens, context ", context, ", ", count, " windows");
  const int64_t last = n - context - 1;  // the last start
  Batch b{empty({count, context}, DType::Int64), empty({count, context}, DType::Int64)};
  int64_t* x = b.x.data_ptr<int64_t>();
  int64_t* y = b.y.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t s = count == 1 ? 0 : i * last / (count - 1);
    for (int64_t t = 0; t < context; ++t) {
      x[i * context + t] = tokens[s + t];
      y[i * context + t] = tokens[s + t + 1];
    }
  }
  return b;
}

Tensor encode(const std::string& text) {
  Tensor t = empty({1, static_cast<int64_t>(text.size())}, DType::Int64);
  int64_t* p = t.data_ptr<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) p[i] = static_cast<unsigned char>(text[i]);
  return t;
}

std::string decode(const Tensor& tokens) {
  Tensor t = tokens.to(DType::Int64).contiguous();
  const int64_t* p = t.data_ptr<int64_t>();
  std::string out(static_cast<size_t>(t.numel()), '\0');
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<char>(static_cast<uint8_t>(p[i]));
  return out;
}

}  // namespace weft::examples::gpt
