// Guide, chapter 1: tensors and autograd. Builds a small expression with
// broadcasting, runs backward, and checks every gradient against the formula
// worked out by hand.
#include <cmath>
#include <iostream>

#include "autograd/engine.h"
#include "core/ops.h"

int main() {
  using weft::Tensor;

  // Leaves that require gradients.
  Tensor x = weft::tensor({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();  // (2, 3)
  Tensor w = weft::tensor({0.5, -1, 2}, {3}).requires_grad_();           // (3), broadcast over the rows
  Tensor b = weft::tensor({0.25}, {1}).requires_grad_();                 // (1), broadcast everywhere

  // y = sum(w * x^2 + b): the ops record the graph as they run.
  Tensor y = (w * x * x + b).sum();  // scalar
  std::cout << "y = " << y.item<float>() << "\n";

  // Views share storage with their base: a transpose and a row.
  Tensor xt = x.t();  // (3, 2)
  Tensor row = x[1];  // (3), the second row
  std::cout << "x.t():\n" << xt << "\nx[1]:\n" << row << "\n";

  y.backward();  // fills x.grad(), w.grad(), b.grad()

  // By hand: dy/dx[i][j] = 2 w[j] x[i][j], dy/dw[j] = sum_i x[i][j]^2, dy/db = 6.
  float worst = 0;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      const float xij = x[i][j].item<float>(), wj = w[j].item<float>();
      worst = std::max(worst, std::abs(x.grad()[i][j].item<float>() - 2 * wj * xij));
    }
  }
  for (int j = 0; j < 3; ++j) {
    const float x0 = x[0][j].item<float>(), x1 = x[1][j].item<float>();
    worst = std::max(worst, std::abs(w.grad()[j].item<float>() - (x0 * x0 + x1 * x1)));
  }
  worst = std::max(worst, std::abs(b.grad()[0].item<float>() - 6));
  std::cout << "dy/dx:\n" << x.grad() << "\ndy/dw:\n" << w.grad() << "\ndy/db:\n" << b.grad() << "\n";
  std::cout << "largest difference from the hand-worked gradients: " << worst << "\n";
  std::cout << (worst < 1e-5 ? "gradients: ok" : "gradients: WRONG") << "\n";
  return worst < 1e-5 ? 0 : 1;
}
