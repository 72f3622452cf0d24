// Test helpers for error messages: error_of(f) is the message of the
// weft::Error f throws ("" when it throws none); EXPECT_HAS(text, part)
// expects `part` inside `text`, printing both when it is not.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

namespace weft::testing {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace weft::testing

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text) << "\nexpected: " << (part)
