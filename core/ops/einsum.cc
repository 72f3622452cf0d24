// einsum: PyTorch's torch.einsum over any number of operands, composed of
// diagonal, sum, permute, reshape, expand and bmm, so it runs on every device
// and differentiates through them.
//
// Contract: subscripts are letters (a-z, A-Z) and at most one "..." per
// operand; "->" gives the output, else the output is the ellipsis dims then
// the letters that appear once, in order (upper case before lower case).
// Ellipsis dims are aligned from the right across operands and broadcast; a
// letter's sizes must agree across operands or be 1 (broadcast). A letter
// repeated within one operand takes that operand's diagonal. Operands are
// folded left to right: each step sums the letters no later operand or the
// output needs, then contracts the shared ones with one batched GEMM
// (batch = letters both keep, rows / columns = letters one side keeps).
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "core/ops.h"

namespace weft {
namespace {

constexpr int kLetters = 52;  // A-Z then a-z; ellipsis dims are labels kLetters + i

int letter_label(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : 26 + (c - 'a'); }
bool is_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
std::string label_name(int l) {
  if (l >= kLetters) return "... dim " + std::to_string(l - kLetters);
  return std::string(1, l < 26 ? char('A' + l) : char('a' + l - 26));
}

// One term's subscripts: letters as labels, the ellipsis as -1.
std::vector<int> parse_term(const std::string& eq, const std::string& term) {
  std::vector<int> out;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == '.') {
      WEFT_CHECK(!ellipsis && term.compare(i, 3, "...") == 0, "einsum: equation '", eq, "': '", term,
                 "' has a '.' that is not one \"...\"");
      ellipsis = true;
      out.push_back(-1);
      i += 2;
      continue;
    }
    WEFT_CHECK(is_letter(c), "einsum: equation '", eq, "': subscript '", std::string(1, c),
               "' is not a letter (a-z, A-Z)");
    out.push_back(letter_label(c));
  }
  return out;
}

// A tensor and the label of each of its dims.
struct Labeled {
  Tensor t;
  std::vector<int> labels;
};

bool contains(const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); }

// Sums the dims whose labels are not in `keep`.
Labeled sum_except(Labeled x, const std::vector<int>& keep) {
  std::vector<int64_t> dims;
  std::vector<int> rest;
  for (size_t d = 0; d < x.labels.size(); ++d) {
    if (contains(keep, x.labels[d])) rest.push_back(x.labels[d]);
    else dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return x;
  return {sum(x.t, dims), rest};
}

// x's dims in the order of `order` (every label of x, once).
Tensor arranged(const Labeled& x, const std::vector<int>& order) {
  std::vector<int64_t> perm;
  for (int l : order) perm.push_back(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
  return permute(x.t, perm);
}

// Contracts a and b (no label repeated within either) keeping the labels in `keep`.
Labeled contract(const Labeled& a_in, const Labeled& b_in, const std::vector<int>& keep) {
  // a label one side has and the other lacks is summed now unless it is kept
  std::vector<int> keep_a = keep, keep_b = keep;
  for (int l : b_in.labels) keep_a.push_back(l);
  for (int l : a_in.labels) keep_b.push_back(l);
  Labeled a = sum_except(a_in, keep_a), b = sum_except(b_in, keep_b);
  std::vector<int> batch, left, right, inner;
  for (int l : a.labels) {
    if (contains(b.labels, l)) (contains(keep, l) ? batch : inner).push_back(l);
    else left.push_back(l);
  }
  for (int l : b.labels)
    if (!contains(a.labels, l)) right.push_back(l);
  // a label's size here: the larger of the two sides' (one may be a broadcast 1)
  auto size_of = [&](int l) {
    int64_t n = 1;
    for (const Labeled* x : {&a, &b}) {
      auto it = std::find(x->labels.begin(), x->labels.end(), l);
      if (it != x->labels.end()) n = std::max(n, x->t.size(it - x->labels.begin()));
    }
    return n;
  };
  auto prod = [&](const std::vector<int>& ls) {
    int64_t p = 1;
    for (int l : ls) p *= size_of(l);
    return p;
  };
  auto full = [&](const std::vector<int>& ls) {
    Shape s;
    for (int l : ls) s.push_back(size_of(l));
    return s;
  };
  std::vector<int> a_order = batch, b_order = batch;
  a_order.insert(a_order.end(), left.begin(), left.end());
  a_order.insert(a_order.end(), inner.begin(), inner.end());
  b_order.insert(b_order.end(), inner.begin(), inner.end());
  b_order.insert(b_order.end(), right.begin(), right.end());
  // shared dims of size 1 on one side broadcast to the other's size
  Tensor at = expand(arranged(a, a_order), full(a_order)).reshape({prod(batch), prod(left), prod(inner)});
  Tensor bt = expand(arranged(b, b_order), full(b_order)).reshape({prod(batch), prod(inner), prod(right)});
  Tensor r = bmm(at, bt);  // (batch, left, right)
  std::vector<int> labels = batch;
  labels.insert(labels.end(), left.begin(), left.end());
  labels.insert(labels.end(), right.begin(), right.end());
  return {r.reshape(full(labels)), labels};
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  const std::string& eq = equation;
  std::string s;
  for (char c : eq)
    if (c != ' ') s.push_back(c);
  const size_t arrow = s.find("->");
  const std::string lhs = s.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  WEFT_CHECK(terms.size() == operands.size(), "einsum: equation '", eq, "' has ", terms.size(),
             " operand subscripts but ", operands.size(), " operands were given");
  for (size_t k = 0; k < operands.size(); ++k)
    WEFT_CHECK(operands[k].defined(), "einsum: operand ", k, " is undefined");

  // labels per operand, with the ellipsis spelled out as right-aligned ellipsis labels
  std::vector<std::vector<int>> raw(terms.size());
  int64_t E = 0;  // the most ellipsis dims of any operand
  for (size_t k = 0; k < terms.size(); ++k) {
    raw[k] = parse_term(eq, terms[k]);
    const int64_t letters = static_cast<int64_t>(raw[k].size()) - (contains(raw[k], -1) ? 1 : 0);
    const int64_t dims = operands[k].dim();
    if (contains(raw[k], -1)) {
      WEFT_CHECK(dims >= letters, "einsum: equation '", eq, "': operand ", k, " of shape ",
                 shape_str(operands[k].sizes()), " has fewer dims than the ", letters, " letters of '", terms[k], "'");
      E = std::max(E, dims - letters);
    } else {
      WEFT_CHECK(dims == letters, "einsum: equation '", eq, "': operand ", k, " of shape ",
                 shape_str(operands[k].sizes()), " has ", dims, " dims but '", terms[k], "' names ", letters);
    }
  }
  WEFT_CHECK(E <= 64, "einsum: at most 64 ellipsis dims, got ", E);
  std::array<int64_t, kLetters + 64> size;
  size.fill(-1);
  std::vector<Labeled> xs;
  std::array<int, kLetters + 64> count{};
  for (size_t k = 0; k < terms.size(); ++k) {
    const Tensor& t = operands[k];
    const int64_t letters = static_cast<int64_t>(raw[k].size()) - (contains(raw[k], -1) ? 1 : 0);
    const int64_t e = t.dim() - letters;
    std::vector<int> labels;
    for (int l : raw[k]) {
      if (l >= 0) labels.push_back(l);
      else
        for (int64_t i = 0; i < e; ++i) labels.push_back(kLetters + static_cast<int>(E - e + i));
    }
    for (int l : labels) ++count[l];
    // a letter repeated within the operand: its diagonal (the letter's dim moves last)
    Labeled x{t, labels};
    for (bool repeated = true; repeated;) {
      repeated = false;
      for (size_t i = 0; i < x.labels.size() && !repeated; ++i) {
        for (size_t j = i + 1; j < x.labels.size() && !repeated; ++j) {
          if (x.labels[j] != x.labels[i]) continue;
          WEFT_CHECK(x.t.size(i) == x.t.size(j), "einsum: equation '", eq, "': subscript ", label_name(x.labels[i]),
                     " repeated in operand ", k, " of shape ", shape_str(t.sizes()), " covers dims of sizes ",
                     x.t.size(i), " and ", x.t.size(j));
          const int l = x.labels[i];
          x.t = diagonal(x.t, 0, static_cast<int64_t>(i), static_cast<int64_t>(j));
          x.labels.erase(x.labels.begin() + j);
          x.labels.erase(x.labels.begin() + i);
          x.labels.push_back(l);
          repeated = true;
        }
      }
    }
    for (size_t d = 0; d < x.labels.size(); ++d) {
      const int l = x.labels[d];
      const int64_t n = x.t.size(d);
      WEFT_CHECK(size[l] < 0 || size[l] == n || size[l] == 1 || n == 1, "einsum: equation '", eq, "': subscript ",
                 label_name(l), " has size ", n, " in operand ", k, " of shape ", shape_str(t.sizes()), " but size ",
                 size[l], " in an earlier operand");
      size[l] = std::max(size[l], n);
    }
    xs.push_back(std::move(x));
  }

  // the output's labels
  std::vector<int> out;
  if (arrow != std::string::npos) {
    const std::string rhs = s.substr(arrow + 2);
    for (int l : parse_term(eq, rhs)) {
      if (l < 0) {
        for (int64_t i = 0; i < E; ++i) out.push_back(kLetters + static_cast<int>(i));
        continue;
      }
      WEFT_CHECK(!contains(out, l), "einsum: equation '", eq, "': output subscript ", label_name(l),
                 " appears more than once");
      WEFT_CHECK(count[l] > 0, "einsum: equation '", eq, "': output subscript ", label_name(l),
                 " appears in no operand");
      out.push_back(l);
    }
  } else {
    for (int64_t i = 0; i < E; ++i) out.push_back(kLetters + static_cast<int>(i));
    for (int l = 0; l < kLetters; ++l)
      if (count[l] == 1) out.push_back(l);
  }

  // fold left to right; each step keeps what the output or a later operand needs
  Labeled acc = xs[0];
  for (size_t k = 1; k <= xs.size(); ++k) {
    std::vector<int> keep = out;
    for (size_t j = k + 1; j < xs.size(); ++j) keep.insert(keep.end(), xs[j].labels.begin(), xs[j].labels.end());
    if (k == xs.size()) {
      acc = sum_except(acc, keep);
      break;
    }
    acc = contract(acc, xs[k], keep);
  }
  // labels the output has that the result broadcast away stay at size 1: expand them
  Shape out_sizes;
  for (int l : out) out_sizes.push_back(size[l]);
  return expand(arranged(acc, out), out_sizes);
}

}  // namespace weft
