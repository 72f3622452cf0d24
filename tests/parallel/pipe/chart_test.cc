// Charts: the text chart of small cases against hand-written strings; the SVG is
// a well-formed document with one box per compute action.
#include "parallel/pipe/chart.h"

#include <gtest/gtest.h>

#include "parallel/pipe/generators.h"
#include "tests/testing.h"

namespace weft::parallel::pipe {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A small XML well-formedness check: tags nest and close, attributes are quoted,
// text holds no raw '<' or '&' other than entities. Returns "" or what is wrong.
std::string xml_problem(const std::string& doc) {
  std::vector<std::string> open;
  size_t i = 0;
  bool seen_root = false;
  while (i < doc.size()) {
    if (doc[i] == '&') {
      const size_t semi = doc.find(';', i);
      const std::string entity = semi == std::string::npos ? "" : doc.substr(i, semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;")
        return "bad entity at " + std::to_string(i);
      i = semi + 1;
      continue;
    }
    if (doc[i] != '<') {
      if (doc[i] == '>') return "stray '>' at " + std::to_string(i);
      ++i;
      continue;
    }
    // Scan the tag, honouring quoted attribute values.
    size_t j = i + 1;
    bool quoted = false;
    for (; j < doc.size() && (quoted || doc[j] != '>'); ++j) {
      if (doc[j] == '"') quoted = !quoted;
      if (quoted && (doc[j] == '<')) return "'<' inside an attribute at " + std::to_string(j);
    }
    if (j >= doc.size()) return "unterminated tag at " + std::to_string(i);
    const std::string tag = doc.substr(i + 1, j - i - 1);
    i = j + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (!seen_root && name != "svg") return "root is <" + name + ">";
    if (seen_root && open.empty()) return "content after the root";
    seen_root = true;
    if (tag.back() != '/') open.push_back(name);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return seen_root ? "" : "no root";
}

TEST(PipeChart, TextChartGPipeTwoRanksTwoMicrobatches) {
  Schedule s = gpipe_schedule(2, 2);
  Simulation sim = simulate(s, CostModel::uniform(2, 1, 1, 1));
  EXPECT_EQ(text_chart(s, sim),
            "gpipe: 2 ranks, 2 micro-batches, 1 stage per rank; column = 1 time unit; makespan 9, bubble 33.3%\n"
            "rank 0 |F0 F1 .. .. .. B0 B0 B1 B1|\n"
            "rank 1 |.. F0 F1 B0 B0 B1 B1 .. ..|\n"
            "F forward, B backward, number = micro-batch, dots = idle\n");
}

TEST(PipeChart, TextChartOneFOneBAndZeroBubble) {
  Schedule s = one_f_one_b_schedule(2, 4);
  Simulation sim = simulate(s, CostModel::uniform(2, 1, 1, 1));
  const std::string chart = text_chart(s, sim);
  EXPECT_NE(chart.find("rank 0 |F0 F1 .. .. B0 B0 F2 B1 B1 F3 B2 B2 .. B3 B3|\n"), std::string::npos) << chart;
  EXPECT_NE(chart.find("rank 1 |.. F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3 .. ..|\n"), std::string::npos) << chart;
  Schedule z = zero_bubble_h1_schedule(2, 4);
  Simulation zsim = simulate(z, CostModel::uniform(2, 1, 1, 1));
  EXPECT_EQ(text_chart(z, zsim),
            "zb-h1: 2 ranks, 4 micro-batches, 1 stage per rank; column = 1 time unit; makespan 13, bubble 7.7%\n"
            "rank 0 |F0 F1 .. B0 W0 F2 B1 W1 F3 B2 W2 B3 W3|\n"
            "rank 1 |.. F0 B0 F1 B1 W0 F2 B2 W1 F3 B3 W2 W3|\n"
            "F forward, B backward (input gradient), W weight gradient, number = micro-batch, dots = idle\n");
}

TEST(PipeChart, TextChartInterleavedLabelsTheRanksStage) {
  // Rank 0 holds stages 0 (a) and 2 (b), rank 1 stages 1 (a) and 3 (b). Worked by hand: makespan 15, idle 3 each.
  Schedule s = interleaved_schedule(2, 2, 2);
  Simulation sim = simulate(s, CostModel::uniform(4, 1, 1, 1));
  EXPECT_EQ(text_chart(s, sim),
            "interleaved: 2 ranks, 2 micro-batches, 2 stages per rank; column = 1 time unit; makespan 15, bubble "
            "20.0%\n"
            "rank 0 |F0a F1a F0b F1b ... ... B0b B0b ... B1b B1b B0a B0a B1a B1a|\n"
            "rank 1 |... F0a F1a F0b B0b B0b F1b B1b B1b B0a B0a B1a B1a ... ...|\n"
            "F forward, B backward, number = micro-batch, letter = the rank's stage (a = first), dots = idle\n");
}

TEST(PipeChart, TextChartUnitAndWidth) {
  Schedule s = gpipe_schedule(2, 2);
  Simulation sim = simulate(s, CostModel::uniform(2, 1, 1, 1));
  ChartOptions half;
  half.unit = 0.5;
  EXPECT_NE(text_chart(s, sim, half).find("rank 1 |.. .. F0 F0 F1 F1 B0 B0 B0 B0 B1 B1 B1 B1 .. .. .. ..|"),
            std::string::npos);
  ChartOptions narrow;
  narrow.max_columns = 3;  // 3 columns of 3 time units: midpoints 1.5, 4.5, 7.5
  EXPECT_NE(text_chart(s, sim, narrow).find("rank 0 |F1 .. B1|"), std::string::npos) << text_chart(s, sim, narrow);
  // Eleven ranks pad the rank names to one width.
  Schedule t = gpipe_schedule(11, 1);
  const std::string wide = text_chart(t, simulate(t, CostModel::uniform(11, 1, 1, 1)));
  EXPECT_EQ(wide.rfind("gpipe: 11 ranks, 1 micro-batch, 1 stage per rank;", 0), 0u) << wide;
  EXPECT_NE(wide.find("\nrank 0  |F0 .. "), std::string::npos) << wide;
  EXPECT_NE(wide.find("\nrank 9  |.. .. .. .. .. .. .. .. .. F0 .. .. .. B0 B0 .. "), std::string::npos) << wide;
  EXPECT_NE(wide.find("\nrank 10 |.. .. .. .. .. .. .. .. .. .. F0 B0 B0 .. "), std::string::npos) << wide;
}

TEST(PipeChart, SvgIsWellFormedWithABoxPerComputeAction) {
  for (ScheduleKind kind :
       {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved1F1B, ScheduleKind::kZeroBubbleH1}) {
    const int v = kind == ScheduleKind::kInterleaved1F1B ? 2 : 1;
    Schedule s = make_schedule(kind, 4, 8, v);
    Simulation sim = simulate(s, CostModel::uniform(4 * v, 1, 1, 1));
    const std::string svg = svg_chart(s, sim);
    EXPECT_EQ(xml_problem(svg), "") << s.name;
    EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << s.name;
    EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n") << s.name;
    const size_t computes = 4 * v * 8 * (s.split_backward ? 3 : 2);
    EXPECT_EQ(count(svg, "<rect class=\"action "), computes) << s.name;
    EXPECT_EQ(count(svg, "<rect class=\"action F\""), computes / (s.split_backward ? 3 : 2)) << s.name;
    EXPECT_EQ(count(svg, "<rect class=\"action W\""), s.split_backward ? computes / 3 : 0) << s.name;
    EXPECT_EQ(count(svg, "<rect class=\"lane\""), 4u) << s.name;
    EXPECT_NE(svg.find(format_percent(sim.bubble_fraction)), std::string::npos) << s.name;
  }
}

TEST(PipeChart, SvgBoxesSitAtTheirTimes) {
  // GPipe p=2, m=2: the shortest action (F, 1 unit) is 28 px; rank 1's B0.0 runs 3..5, at x = 64 + 3 * 28.
  Schedule s = gpipe_schedule(2, 2);
  const std::string svg = svg_chart(s, simulate(s, CostModel::uniform(2, 1, 1, 1)));
  EXPECT_NE(svg.find("<rect class=\"action B\" x=\"148\" y=\"64\" width=\"56\" height=\"24\""), std::string::npos)
      << svg;
  EXPECT_NE(svg.find("<title>B1.0 (stage 1, micro-batch 0): 3 to 5</title>"), std::string::npos);
}

TEST(PipeChart, SvgEscapesTheName) {
  Schedule s = gpipe_schedule(1, 1);
  s.name = "a<b & \"c\"";
  const std::string svg = svg_chart(s, simulate(s, CostModel::uniform(1, 1, 1, 1)));
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find("a&lt;b &amp; &quot;c&quot;"), std::string::npos);
}

TEST(PipeChart, XmlCheckerCatchesBrokenDocuments) {
  EXPECT_EQ(xml_problem("<svg><rect/></svg>"), "");
  EXPECT_NE(xml_problem("<svg><rect></svg>"), "");
  EXPECT_NE(xml_problem("<svg>a < b</svg>"), "");
  EXPECT_NE(xml_problem("<svg>a & b</svg>"), "");
  EXPECT_NE(xml_problem("<svg></svg><svg></svg>"), "");
}

}  // namespace
}  // namespace weft::parallel::pipe
