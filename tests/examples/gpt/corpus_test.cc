// The GPT example's corpus (examples/gpt/corpus.h): records of fortune files
// ('%' lines) and of other text (paragraphs), trimming and dropped records, the
// directory walk (name order; *.dat, symbolic links and binary files skipped),
// the every-10th-record validation split with its separators, errors for a
// missing path, no text and a corpus too small for the context, and batches:
// targets shifted by one, rows of a global batch equal for any slicing,
// deterministic by (seed, step), evaluation windows spread over the split.
// Also Debian's fortunes, where installed.
#include "examples/gpt/corpus.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "tests/testing.h"

namespace weft::examples::gpt {
namespace {

namespace fs = std::filesystem;

std::string bytes(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "gpt_corpus_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return (path_ / name).string();
  }
  std::string str() const { return path_.string(); }
  fs::path path() const { return path_; }

 private:
  fs::path path_;
};

TEST(GptCorpus, FortuneRecords) {
  bool fortune = false;
  auto r = split_records("A fool.  \n\t-- Anon\n%\n\nTwo\nlines\n\n%\n%\nlast", &fortune);
  EXPECT_TRUE(fortune);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], "A fool.\n\t-- Anon");
  EXPECT_EQ(r[1], "Two\nlines");
  EXPECT_EQ(r[2], "last");
}

TEST(GptCorpus, ParagraphRecords) {
  bool fortune = true;
  auto r = split_records("one\r\ntwo\r\n\r\n\n  \nthree\n", &fortune);
  EXPECT_FALSE(fortune);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], "one\ntwo");
  EXPECT_EQ(r[1], "three");
  EXPECT_TRUE(split_records("\n\n  \n").empty());
}

TEST(GptCorpus, DirectoryAndSplit) {
  TempDir d;
  std::string f;
  for (int i = 0; i < 12; ++i) f += "f" + std::to_string(i) + "\n%\n";
  d.write("b_fortunes", f);
  d.write("a_text", "p0\n\np1 line\n");
  d.write("b_fortunes.dat", "index");
  d.write("c_binary", std::string("x\0y", 3));
  d.write("d_art", "ok\n%\nover\bstrike\n%\n");
  fs::create_symlink(d.path() / "a_text", d.path() / "a_text.u8");
  Corpus c = load_corpus(d.str(), 0.1);
  ASSERT_EQ(c.files.size(), 3u);
  EXPECT_EQ(fs::path(c.files[0]).filename(), "a_text");
  EXPECT_EQ(fs::path(c.files[1]).filename(), "b_fortunes");
  EXPECT_EQ(fs::path(c.files[2]).filename(), "d_art");
  // Records: p0 p1 (a_text), f0..f11, ok; "over\bstrike" dropped.
  EXPECT_EQ(c.records, 15);
  EXPECT_EQ(c.dropped_records, 1);
  EXPECT_EQ(c.val_records, 1);  // record 9 (f7)
  EXPECT_EQ(c.train_records, 14);
  EXPECT_EQ(bytes(c.val), "f7\n%\n");
  EXPECT_EQ(bytes(c.train).substr(0, 22), "p0\n\np1 line\n\nf0\n%\nf1\n%");
  EXPECT_EQ(bytes(c.train).substr(c.train.size() - 17), "f10\n%\nf11\n%\nok\n%\n");
  // 0.5: every other record.
  Corpus half = load_corpus(d.str(), 0.5);
  EXPECT_EQ(half.val_records, 7);
  EXPECT_EQ(half.train_records, 8);
  // One file.
  Corpus one = load_corpus(d.str() + "/a_text", 0.5);
  EXPECT_EQ(bytes(one.train), "p0\n\n");
  EXPECT_EQ(bytes(one.val), "p1 line\n\n");
}

TEST(GptCorpus, Errors) {
  TempDir d;
  EXPECT_WEFT_ERROR(load_corpus(d.str() + "/nope"), "does not exist");
  EXPECT_WEFT_ERROR(load_corpus(d.str()), "gpt corpus: no text in '" + d.str() + "' (0 file(s) looked at");
  d.write("empty", "");
  d.write("blank", "\n\n \n");
  EXPECT_WEFT_ERROR(load_corpus(d.str()), "no text in '" + d.str() + "' (2 file(s) looked at");
  EXPECT_WEFT_ERROR(load_corpus(d.str() + "/empty"), "no text in");
  EXPECT_WEFT_ERROR(load_corpus(d.str(), 0.0), "validation fraction must be in (0, 0.5], got 0");
  d.write("small", "abcdefgh\n%\nijkl\n%\n");
  Corpus c = load_corpus(d.str() + "/small", 0.5);  // train "abcdefgh\n%\n" (11), val "ijkl\n%\n" (7)
  EXPECT_NO_THROW(check_fits(c, 6));
  EXPECT_WEFT_ERROR(check_fits(c, 7),
                    "is too small for --context 7: the training split has 11 tokens (1 records) and the validation "
                    "split 7 (1 records); each needs more than 7");
}

std::vector<uint8_t> ramp(int n) {
  std::vector<uint8_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % 251);
  return v;
}

TEST(GptCorpus, Batches) {
  const auto tokens = ramp(1000);
  Batch b = draw_batch(tokens, 8, 16, 7, 3, 0, 8);
  ASSERT_EQ(b.x.sizes(), (Shape{8, 16}));
  auto x = testing::values(b.x), y = testing::values(b.y);
  std::set<int64_t> starts;
  for (int r = 0; r < 8; ++r) {
    const int64_t s0 = static_cast<int64_t>(x[r * 16]);  // the start mod 251 (token i is i mod 251)
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(x[r * 16 + t], tokens[s0 + t]);                               // consecutive tokens
      EXPECT_EQ(y[r * 16 + t], (static_cast<int>(x[r * 16 + t]) + 1) % 251);  // the target is the next one
    }
    starts.insert(s0);
  }
  EXPECT_GT(starts.size(), 4u);  // spread
  // Any row slicing gives the same rows; the same (seed, step) the same batch; another step another.
  Batch part = draw_batch(tokens, 8, 16, 7, 3, 2, 6);
  EXPECT_TRUE(testing::tensors_near(part.x, b.x.narrow(0, 2, 4), 0));
  EXPECT_TRUE(testing::tensors_near(part.y, b.y.narrow(0, 2, 4), 0));
  EXPECT_TRUE(testing::tensors_near(draw_batch(tokens, 8, 16, 7, 3, 0, 8).x, b.x, 0));
  EXPECT_FALSE(testing::tensors_near(draw_batch(tokens, 8, 16, 7, 4, 0, 8).x, b.x, 0));
  EXPECT_FALSE(testing::tensors_near(draw_batch(tokens, 8, 16, 8, 3, 0, 8).x, b.x, 0));
  // Every start keeps its target inside: the last window may end at the last token.
  const auto short_tokens = ramp(18);
  for (int step = 0; step < 20; ++step) {
    Batch s = draw_batch(short_tokens, 4, 16, 1, step, 0, 4);
    for (double v : testing::values(s.y)) EXPECT_LE(v, 17);
  }
  EXPECT_WEFT_ERROR(draw_batch(short_tokens, 4, 18, 1, 0, 0, 4), "18 tokens cannot hold a window of 18");
  EXPECT_WEFT_ERROR(draw_batch(tokens, 4, 16, 1, 0, 2, 5), "rows [2, 5) of a batch of 4");
}

TEST(GptCorpus, EvalWindows) {
  const auto tokens = ramp(101);
  Batch w = eval_windows(tokens, 10, 5);
  ASSERT_EQ(w.x.sizes(), (Shape{5, 10}));
  auto x = testing::values(w.x), y = testing::values(w.y);
  const int64_t want[] = {0, 22, 45, 67, 90};  // i * 90 / 4
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(x[i * 10], want[i]);
    EXPECT_EQ(y[i * 10 + 9], want[i] + 10);
  }
  Batch many = eval_windows(ramp(13), 10, 5);  // 3 distinct starts: 0, 0, 1, 1, 2
  ASSERT_EQ(many.x.size(0), 5);
  EXPECT_TRUE(testing::tensor_near(many.x.select(1, 0), {0, 0, 1, 1, 2}, 0));
  EXPECT_TRUE(testing::tensor_near(eval_windows(ramp(13), 10, 1).x.select(1, 0), {0}, 0));
}

TEST(GptCorpus, EncodeDecode) {
  const std::string s = "h\xc3\xa9\n%";
  Tensor t = encode(s);
  EXPECT_EQ(t.sizes(), (Shape{1, 5}));
  EXPECT_TRUE(testing::tensor_near(t, {104, 195, 169, 10, 37}, 0));
  EXPECT_EQ(decode(t), s);
}

TEST(GptCorpus, DebianFortunes) {
  if (!fs::exists(kFortunesDir)) GTEST_SKIP() << kFortunesDir << " is not installed";
  Corpus c = load_corpus(kFortunesDir, 0.1);
  EXPECT_GT(c.records, 10000);
  EXPECT_GT(c.train.size(), 1000000u);
  EXPECT_GT(c.val.size(), 100000u);
  EXPECT_NEAR(static_cast<double>(c.val_records) / static_cast<double>(c.records), 0.1, 1e-3);
  for (const auto& f : c.files) {
    EXPECT_FALSE(f.size() >= 4 && f.substr(f.size() - 4) == ".dat") << f;
    EXPECT_FALSE(f.size() >= 3 && f.substr(f.size() - 3) == ".u8") << f;
  }
}

}  // namespace
}  // namespace weft::examples::gpt
