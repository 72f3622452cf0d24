// Text schedules (contract in parse.h).
#include "parallel/pipe/parse.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace weft::parallel::pipe {
namespace {

// How an action kind is spelled after its name (to_string(Action)).
enum class Form {
  kCompute,     // <stage>.<mb>
  kSend,        // <stage>.<mb>->s<peer stage>@r<peer rank>
  kRecv,        // <stage>.<mb><-s<peer stage>@r<peer rank>
  kTieAtStage,  // <tie>@s<stage>
  kStage,       // <stage>
};

struct KindSyntax {
  ActionKind kind;
  Form form;
};

// Every action kind the text knows; its name is to_string(kind). A new
// ActionKind needs one row here (parse_test checks that every kind
// to_string(ActionKind) names has one).
constexpr KindSyntax kKindSyntax[] = {
    {ActionKind::kForward, Form::kCompute},
    {ActionKind::kBackward, Form::kCompute},
    {ActionKind::kWeight, Form::kCompute},
    {ActionKind::kSendActivation, Form::kSend},
    {ActionKind::kRecvActivation, Form::kRecv},
    {ActionKind::kSendGrad, Form::kSend},
    {ActionKind::kRecvGrad, Form::kRecv},
    {ActionKind::kTiedGrad, Form::kTieAtStage},
    // Data-parallel reductions (Note [gradient reduction] in schedule.h): "Reduce3", "ReduceTied0@s3".
    {ActionKind::kReduceGrad, Form::kStage},
    {ActionKind::kReduceTiedGrad, Form::kTieAtStage},
    // Note [overlapped F and B] in schedule.h: "Overlap3".
    {ActionKind::kOverlap, Form::kStage},
};

std::string pattern(const std::string& name, Form form) {
  switch (form) {
    case Form::kCompute: return name + "<stage>.<micro-batch>";
    case Form::kSend: return name + "<stage>.<micro-batch>->s<peer stage>@r<peer rank>";
    case Form::kRecv: return name + "<stage>.<micro-batch><-s<peer stage>@r<peer rank>";
    case Form::kTieAtStage: return name + "<tied group>@s<stage>";
    case Form::kStage: return name + "<stage>";
  }
  return name;
}

const std::map<std::string, KindSyntax, std::less<>>& kinds_by_name() {
  static const auto* table = [] {
    auto* m = new std::map<std::string, KindSyntax, std::less<>>;
    for (const KindSyntax& k : kKindSyntax) m->emplace(to_string(k.kind), k);
    return m;
  }();
  return *table;
}

std::string known_kinds() {
  std::string out;
  for (const KindSyntax& k : kKindSyntax) out += (out.empty() ? "" : ", ") + to_string(k.kind);
  return out;
}

struct Token {
  std::string text;
  int index = 0;  // 1-based among the line's words
};

template <typename... Args>
[[noreturn]] void token_error(int line, const Token& t, const Args&... args) {
  WEFT_ERROR("parse_schedule: line ", line, ", token ", t.index, " '", t.text, "': ", args...);
}

template <typename... Args>
[[noreturn]] void line_error(int line, const Args&... args) {
  WEFT_ERROR("parse_schedule: line ", line, ": ", args...);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Reads a token left to right: decimal numbers and fixed text.
struct Cursor {
  std::string_view s;
  size_t pos = 0;
  bool overflow = false;

  bool number(int& out) {
    const size_t start = pos;
    long long v = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (!overflow) v = v * 10 + (s[pos] - '0');
      overflow = overflow || v > std::numeric_limits<int>::max();
      ++pos;
    }
    out = static_cast<int>(v);
    return pos > start && !overflow;
  }
  bool literal(std::string_view lit) {
    if (s.substr(pos, lit.size()) != lit) return false;
    pos += lit.size();
    return true;
  }
  bool done() const { return pos == s.size(); }
};

// A whole token as one non-negative int, or an error naming it.
int parse_int(int line, const Token& t, std::string_view text) {
  Cursor c{text};
  int v = 0;
  if (!c.number(v) || !c.done())
    token_error(line, t, c.overflow ? "number out of range" : "expected a non-negative whole number");
  return v;
}

Action parse_action(int line, const Token& t) {
  size_t n = 0;
  while (n < t.text.size() && ((t.text[n] >= 'A' && t.text[n] <= 'Z') || (t.text[n] >= 'a' && t.text[n] <= 'z'))) ++n;
  const std::string_view name = std::string_view(t.text).substr(0, n);
  const auto& kinds = kinds_by_name();
  const auto it = kinds.find(name);
  if (it == kinds.end()) token_error(line, t, "unknown action kind '", name, "' (known: ", known_kinds(), ")");
  const KindSyntax k = it->second;
  Cursor c{std::string_view(t.text).substr(n)};
  Action a;
  a.kind = k.kind;
  bool ok = false;
  switch (k.form) {
    case Form::kCompute: ok = c.number(a.stage) && c.literal(".") && c.number(a.microbatch); break;
    case Form::kSend:
    case Form::kRecv:
      ok = c.number(a.stage) && c.literal(".") && c.number(a.microbatch) &&
           c.literal(k.form == Form::kSend ? "->s" : "<-s") && c.number(a.peer_stage) && c.literal("@r") &&
           c.number(a.peer_rank);
      break;
    case Form::kTieAtStage: ok = c.number(a.tie) && c.literal("@s") && c.number(a.stage); break;
    case Form::kStage: ok = c.number(a.stage); break;
  }
  if (c.overflow) token_error(line, t, "number out of range");
  if (!ok || !c.done()) token_error(line, t, "expected ", pattern(it->first, k.form));
  return a;
}

// The header's values, each with the token that gave it (for errors naming it).
template <typename T>
struct Keyed {
  std::optional<T> value;
  Token token;
};

struct Header {
  int line = 0;  // 0: no header
  std::string name = "custom";
  Keyed<int> ranks, microbatches, virtual_stages, stages;
  Keyed<bool> split, reduce;
  Keyed<std::vector<std::vector<int>>> tied;
  // placement=looped (empty list, as when left out), placement=v (v_placement), or each stage's rank.
  Keyed<std::vector<int>> placement;
  bool v_placement = false;
};

constexpr char kPlacementForms[] = "expected placement=looped, placement=v or each stage's rank (placement=0,1,1,0)";

std::vector<int> parse_placement(int line, const Token& t, std::string_view value) {
  std::vector<int> ranks;
  Cursor c{value};
  do {
    int r = 0;
    if (!c.number(r)) token_error(line, t, c.overflow ? "number out of range" : kPlacementForms);
    ranks.push_back(r);
  } while (c.literal(","));
  if (!c.done()) token_error(line, t, kPlacementForms);
  return ranks;
}

std::vector<std::vector<int>> parse_tied(int line, const Token& t, std::string_view value) {
  std::vector<std::vector<int>> groups;
  Cursor c{value};
  do {
    groups.emplace_back();
    do {
      int s = 0;
      if (!c.number(s))
        token_error(line, t, c.overflow ? "number out of range" : "expected tied=0+3,1+2 (groups of stages)");
      groups.back().push_back(s);
    } while (c.literal("+"));
  } while (c.literal(","));
  if (!c.done()) token_error(line, t, "expected tied=0+3,1+2 (groups of stages)");
  return groups;
}

void parse_header_key(Header& h, int line, const Token& t) {
  const size_t eq = t.text.find('=');
  if (eq == std::string::npos) token_error(line, t, "expected key=value in the header");
  const std::string_view key = std::string_view(t.text).substr(0, eq), value = std::string_view(t.text).substr(eq + 1);
  auto set = [&](auto& field, auto v) {
    if (field.value) token_error(line, t, "'", key, "' given twice (first as '", field.token.text, "')");
    field.value = v;
    field.token = t;
  };
  auto positive = [&] {
    const int v = parse_int(line, t, value);
    if (v < 1) token_error(line, t, key, " must be a positive integer");
    return v;
  };
  if (key == "ranks") {
    set(h.ranks, positive());
  } else if (key == "microbatches") {
    set(h.microbatches, positive());
  } else if (key == "virtual") {
    set(h.virtual_stages, positive());
  } else if (key == "stages") {
    set(h.stages, positive());
  } else if (key == "backward") {
    if (value != "full" && value != "split") token_error(line, t, "backward is 'full' or 'split'");
    set(h.split, value == "split");
  } else if (key == "reduce") {
    if (value != "dp") token_error(line, t, "reduce is 'dp' (data-parallel reduction) or left out");
    set(h.reduce, true);
  } else if (key == "tied") {
    set(h.tied, parse_tied(line, t, value));
  } else if (key == "placement") {
    h.v_placement = value == "v";
    set(h.placement, value == "v" || value == "looped" ? std::vector<int>{} : parse_placement(line, t, value));
  } else {
    token_error(line, t, "unknown header key '", key,
                "' (known: ranks, microbatches, virtual, stages, backward, reduce, tied, placement)");
  }
}

// More stages than any pipeline has: a typo, refused before placing them.
constexpr int64_t kMaxStages = 1 << 20;

// The values the header leaves out, from the rank lines (parse.h).
void derive(Schedule& s, const Header& h) {
  const int R = static_cast<int>(s.rank_actions.size());
  int max_stage = -1, max_mb = -1;
  bool any_w = false, any_reduce = false;
  std::map<int, std::set<int>> tied_from_actions;
  for (const auto& list : s.rank_actions)
    for (const Action& a : list) {
      max_stage = std::max({max_stage, a.stage, is_comm(a.kind) ? a.peer_stage : -1});
      if (is_compute(a.kind) || is_comm(a.kind)) max_mb = std::max(max_mb, a.microbatch);
      any_w = any_w || a.kind == ActionKind::kWeight;
      any_reduce = any_reduce || is_reduce(a.kind);
      if (is_tied(a.kind)) tied_from_actions[a.tie].insert(a.stage);
    }
  if (h.tied.value)
    for (const auto& g : *h.tied.value)
      for (int st : g) max_stage = std::max(max_stage, st);

  if (h.ranks.value && *h.ranks.value != R)
    token_error(h.line, h.ranks.token, "the header says ", *h.ranks.value, " ranks but the text has ", R,
                " rank line(s)");
  s.num_ranks = R;
  int64_t stages = 0;
  // A placement names the stage count: 2 ranks for v, the list's length for a list.
  if (h.placement.value && (h.v_placement || !h.placement.value->empty())) {
    const int64_t placed = h.v_placement ? 2 * int64_t{R} : static_cast<int64_t>(h.placement.value->size());
    if (h.stages.value && *h.stages.value != placed)
      token_error(h.line, h.stages.token, "the placement places ", placed, " stages but stages=", *h.stages.value);
    if (h.virtual_stages.value && int64_t{R} * *h.virtual_stages.value != placed)
      token_error(h.line, h.virtual_stages.token, "the placement places ", placed, " stages, not ranks * virtual = ", R,
                  " * ", *h.virtual_stages.value);
    if (placed % R)
      token_error(h.line, h.placement.token, "the placement places ", placed, " stages, which do not divide over ", R,
                  " ranks");
    stages = placed;
  } else if (h.stages.value) {
    stages = *h.stages.value;
    if (h.virtual_stages.value && stages != int64_t{R} * *h.virtual_stages.value)
      token_error(h.line, h.stages.token, "stages must be ranks * virtual = ", R, " * ", *h.virtual_stages.value);
    if (stages % R) token_error(h.line, h.stages.token, stages, " stages do not divide over ", R, " ranks");
  } else if (h.virtual_stages.value) {
    stages = int64_t{R} * *h.virtual_stages.value;
  } else {
    stages = int64_t{max_stage} + 1;
    WEFT_CHECK(stages > 0, "parse_schedule: no action names a stage: give virtual= or stages= in the header");
    WEFT_CHECK(stages % R == 0, "parse_schedule: the actions name stages 0 to ", max_stage, ", ", stages,
               " stages that do not divide over ", R, " ranks: give virtual= or stages= in the header");
  }
  WEFT_CHECK(stages <= kMaxStages, "parse_schedule: ", stages, " stages, more than ", kMaxStages);
  s.virtual_stages = static_cast<int>(stages / R);
  s.stage_to_rank = looped_placement(R, s.virtual_stages);
  if (h.v_placement) {
    s.stage_to_rank = v_placement(R);
  } else if (h.placement.value && !h.placement.value->empty()) {
    s.stage_to_rank = *h.placement.value;
    for (int st = 0; st < static_cast<int>(stages); ++st)
      if (s.stage_to_rank[st] >= R)
        token_error(h.line, h.placement.token, "stage ", st, " placed on rank ", s.stage_to_rank[st], ", outside [0, ",
                    R, ")");
  }

  if (h.microbatches.value) {
    s.num_microbatches = *h.microbatches.value;
  } else {
    WEFT_CHECK(max_mb >= 0,
               "parse_schedule: no F, B, W or message tells the micro-batch count: give microbatches= in the header");
    s.num_microbatches = max_mb + 1;
  }
  s.split_backward = h.split.value ? *h.split.value : any_w;
  s.reduce_grads = h.reduce.value ? *h.reduce.value : any_reduce;
  if (h.tied.value) {
    s.tied_stages = *h.tied.value;
  } else if (!tied_from_actions.empty()) {
    const int groups = tied_from_actions.rbegin()->first + 1;
    for (int g = 0; g < groups; ++g) {
      WEFT_CHECK(tied_from_actions.count(g), "parse_schedule: Tied actions name group ", groups - 1, " but not group ",
                 g, ": give tied= in the header");
      s.tied_stages.emplace_back(tied_from_actions[g].begin(), tied_from_actions[g].end());
    }
  }
}

}  // namespace

Schedule parse_schedule(const std::string& text) {
  Schedule s;
  Header h;
  size_t begin = 0;
  for (int line = 1; begin <= text.size(); ++line) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view content = std::string_view(text).substr(begin, end - begin);
    begin = end + 1;
    content = content.substr(0, content.find('#'));
    const size_t colon = content.find(':');
    const std::string_view head = content.substr(0, colon);
    const std::string_view tail = colon == std::string_view::npos ? std::string_view() : content.substr(colon + 1);
    std::vector<Token> tokens;
    for (auto& w : words(head)) tokens.push_back({w, static_cast<int>(tokens.size()) + 1});
    const size_t n_head = tokens.size();
    for (auto& w : words(tail)) tokens.push_back({w, static_cast<int>(tokens.size()) + 1});
    if (tokens.empty()) continue;

    if (tokens[0].text == "rank") {
      if (colon == std::string_view::npos) line_error(line, "a rank line is 'rank <r>: <actions>' (no ':')");
      if (n_head < 2) line_error(line, "a rank line is 'rank <r>: <actions>' (no rank number before ':')");
      if (n_head > 2) token_error(line, tokens[2], "a rank line is 'rank <r>: <actions>' (expected ':')");
      const int r = parse_int(line, tokens[1], tokens[1].text);
      const int want = static_cast<int>(s.rank_actions.size());
      if (r != want)
        token_error(line, tokens[1],
                    "rank line out of order: ", r < want ? "rank " + std::to_string(r) + " was given before; " : "",
                    "rank ", want, " comes next");
      auto& list = s.rank_actions.emplace_back();
      for (size_t i = n_head; i < tokens.size(); ++i) list.push_back(parse_action(line, tokens[i]));
      continue;
    }
    if (!s.rank_actions.empty()) line_error(line, "the header '<name>: key=value ...' must come before the rank lines");
    if (h.line) line_error(line, "a second header (the first is on line ", h.line, ")");
    // The header; without ':' it has no name, and then its first word must be a key.
    const bool named = colon != std::string_view::npos;
    if (!named && tokens[0].text.find('=') == std::string::npos)
      line_error(line, "expected the header '<name>: key=value ...' or a rank line 'rank <r>: <actions>'");
    h.line = line;
    if (named) h.name = std::string(trim(head));
    for (size_t i = named ? n_head : 0; i < tokens.size(); ++i) parse_header_key(h, line, tokens[i]);
  }
  WEFT_CHECK(!s.rank_actions.empty(), "parse_schedule: no rank lines ('rank <r>: <actions>')");
  s.name = h.name;
  derive(s, h);
  return s;
}

}  // namespace weft::parallel::pipe
