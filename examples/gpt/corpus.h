// The GPT example's text corpus: byte-level tokens (vocabulary 256) from a
// file or a directory of text files, split into training and validation text
// by record, and the batches drawn from it.
//
// Contract:
// - load_corpus(path, val_fraction): `path` is a text file or a directory.
//   A directory contributes its regular files (symbolic links are skipped:
//   the fortunes package's *.u8 links duplicate its files) in name order,
//   except *.dat (the fortune indexes) and files holding a NUL byte (binary).
//   A missing path, an unreadable file, or no text at all is a weft::Error
//   naming the path.
// - Records: a file in fortune format (some line is exactly "%") is split at
//   those lines; any other file at blank lines (paragraphs). Records are
//   trimmed of surrounding blank lines and trailing spaces; empty ones and
//   ones holding control bytes other than newline and tab (the overstruck
//   ASCII art of some fortunes) are dropped. Each record is written as its
//   text plus its file's separator, "\n%\n" for fortune files and "\n\n" for
//   paragraphs, so the model sees (and samples) fortunes ended by a "%" line.
// - Split: records are numbered in file order; record i goes to validation
//   when floor((i + 1) * f) > floor(i * f), f = val_fraction in (0, 0.5]
//   (every 10th record for 0.1), the rest to training, both in order.
// - check_fits(corpus, context) is an error naming both splits' sizes unless
//   each holds more than `context` tokens (one window plus its target).
// - Batches (draw_batch): window starts for global step k are drawn from
//   Philox (seed, offset from k): row r starts at u mod (N - T), u a 64-bit
//   draw, so x = tokens[s, s + T) and y = tokens[s + 1, s + T + 1). Rows
//   [row_begin, row_end) of the global batch are returned: every replica
//   layout sees the same global batches, and a resumed run the same
//   batches from step k on.
// - eval_windows(tokens, T, count): `count` windows whose starts are spread
//   evenly over the split, start i = floor(i (N - T - 1) / (count - 1)): the
//   first at 0, the last at N - T - 1 (a split with fewer distinct windows
//   repeats some).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace weft::examples::gpt {

inline constexpr int64_t kVocab = 256;
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

struct Corpus {
  std::string path;
  std::vector<std::string> files;  // the files read, in order
  int64_t records = 0, train_records = 0, val_records = 0, dropped_records = 0;
  std::vector<uint8_t> train, val;  // the two splits' bytes (= tokens)
};

Corpus load_corpus(const std::string& path, double val_fraction = 0.1);
void check_fits(const Corpus& corpus, int64_t context);

// A file's records (the contract's rules); `fortune` tells which separator it uses.
std::vector<std::string> split_records(const std::string& text, bool* fortune = nullptr);

struct Batch {
  Tensor x, y;  // (rows, T) int64 each
};
Batch draw_batch(const std::vector<uint8_t>& tokens, int64_t batch, int64_t context, uint64_t seed, int64_t step,
                 int64_t row_begin, int64_t row_end);
Batch eval_windows(const std::vector<uint8_t>& tokens, int64_t context, int64_t count);

// Bytes to a (1, n) int64 token tensor and back.
Tensor encode(const std::string& text);
std::string decode(const Tensor& tokens);

}  // namespace weft::examples::gpt
