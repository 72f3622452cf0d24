// Reads core/kernels/INDEX.md (the kernel-table checklist for backends) and checks
// tables against it: a table's name and the exact set of dtypes registered on the
// CPU must match its row ("none": the CPU registers nothing). Used by tests/core and
// tests/optim kernel_tables_test.
#pragma once

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dispatch.h"

namespace weft::testing {

struct IndexRow {
  std::string name, accessor, header;
  uint32_t cpu_dtypes = 0;
};

inline std::string strip_cell(std::string s) {
  size_t b = s.find_first_not_of(" `"), e = s.find_last_not_of(" `");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

inline uint32_t parse_dtypes(const std::string& cell) {
  std::istringstream in(cell);
  std::string w;
  uint32_t set = 0;
  while (in >> w) {
    if (w == "none") continue;
    if (w == "all") set |= kAllTypes;
    else if (w == "numeric") set |= kNumericTypes;
    else if (w == "floating") set |= kFloatingTypes;
    else {
      bool found = false;
      for (int i = 0; i < kNumDTypes; ++i)
        if (dtype_name(static_cast<DType>(i)) == w) set |= 1u << i, found = true;
      if (!found) ADD_FAILURE() << "INDEX.md: unknown dtype word '" << w << "'";
    }
  }
  return set;
}

// Rows of INDEX.md's table whose header starts with `header_prefix`, by accessor.
inline std::map<std::string, IndexRow> read_kernel_index(const std::string& header_prefix) {
  std::ifstream f("core/kernels/INDEX.md");
  EXPECT_TRUE(f.good()) << "cannot open core/kernels/INDEX.md (test data)";
  std::map<std::string, IndexRow> rows;
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream in(line.substr(1));
    std::string c;
    while (std::getline(in, c, '|')) cells.push_back(strip_cell(c));
    EXPECT_GE(cells.size(), 4u) << line;
    if (cells.size() < 4 || cells[2].rfind(header_prefix, 0) != 0) continue;
    IndexRow r{cells[0], cells[1], cells[2], parse_dtypes(cells[3])};
    EXPECT_TRUE(rows.emplace(r.accessor, r).second) << "INDEX.md lists " << r.accessor << " twice";
  }
  return rows;
}

// One table as the code has it: accessor spelling, name, and the CPU registrations.
struct TableFacts {
  std::string accessor;
  std::string name;
  uint32_t cpu_dtypes;
};

template <typename Table>
TableFacts facts(const std::string& accessor, const Table& t) {
  uint32_t set = 0;
  for (int i = 0; i < kNumDTypes; ++i)
    if (t.has(DeviceType::CPU, static_cast<DType>(i))) set |= 1u << i;
  return {accessor, t.name(), set};
}

inline std::string dtype_list(uint32_t set) {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i)
    if (in_set(static_cast<DType>(i), set)) s += std::string(dtype_name(static_cast<DType>(i))) + " ";
  return s;
}

// Every table in `tables` has a matching INDEX.md row and every row under
// `header_prefix` is one of `tables`.
inline void expect_index_matches(const std::vector<TableFacts>& tables, const std::string& header_prefix) {
  auto rows = read_kernel_index(header_prefix);
  EXPECT_EQ(rows.size(), tables.size()) << "INDEX.md rows under " << header_prefix << " vs tables in the test";
  for (const TableFacts& t : tables) {
    auto it = rows.find(t.accessor);
    if (it == rows.end()) {
      ADD_FAILURE() << "INDEX.md has no row for " << t.accessor;
      continue;
    }
    EXPECT_EQ(it->second.name, t.name) << t.accessor;
    EXPECT_EQ(it->second.cpu_dtypes, t.cpu_dtypes)
        << t.accessor << ": INDEX.md says " << dtype_list(it->second.cpu_dtypes) << ", CPU registers "
        << dtype_list(t.cpu_dtypes);
  }
}

}  // namespace weft::testing
