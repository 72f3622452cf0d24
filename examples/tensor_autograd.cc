// tensor_autograd: the smallest tour of weft. Builds a tensor expression with
// broadcasting and views, runs backward, and prints values and gradients.
//
// Run with: ./bazelw run //examples:tensor_autograd
#include <iostream>

#include "autograd/engine.h"
#include "core/ops.h"

int main() {
  using weft::Tensor;

  // Leaves that require gradients.
  Tensor x = weft::tensor({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();  // (2, 3)
  Tensor w = weft::tensor({0.5, -1, 2}, {3}).requires_grad_();           // (3,), broadcast over rows
  Tensor b = weft::full({2, 1}, 0.25).requires_grad_();                  // (2, 1), broadcast over columns

  // y = (x * w + b) / (x - b), then a transposed view and a column slice.
  Tensor y = (x * w + b) / (x - b);               // (2, 3)
  Tensor yt = y.t();                              // (3, 2), a view of y
  Tensor picked = yt.slice(0, 1, 3);              // (2, 2): rows 1..2 of the transposed view
  Tensor loss = (-picked).sum() + y.sum() * 0.5;  // scalar

  // Each tensor prints on its own lines, PyTorch-style, under a label.
  auto show = [](const char* label, const Tensor& t) { std::cout << label << ":\n" << t << "\n"; };
  show("x", x);
  show("w", w);
  show("b", b);
  show("y = (x * w + b) / (x - b)", y);
  show("y.t()[1:3]", picked);
  show("loss = -sum(y.t()[1:3]) + 0.5 * sum(y)", loss);

  loss.backward();

  std::cout << "\n-- after loss.backward() --\n";
  show("dloss/dx", x.grad());
  show("dloss/dw", w.grad());
  show("dloss/db", b.grad());

  // A hand check of one entry: d loss / d x[0][0] = 0.5 * dy00/dx00 (x[0][0]
  // is in column 0, which the slice drops), with y00 = (x w + b) / (x - b).
  double x00 = 1, w0 = 0.5, b0 = 0.25;
  double dy = (w0 * (x00 - b0) - (x00 * w0 + b0)) / ((x00 - b0) * (x00 - b0));
  std::cout << "\ncheck: dloss/dx[0][0] by hand = " << 0.5 * dy
            << ", autograd = " << x.grad().select(0, 0).select(0, 0).item<float>() << "\n";
  return 0;
}
