#pragma once
// Bounds on the nesting depth of JSON and YAML input. Parsers and the code
// that walks a parsed document recurse once a level: a file of 200,000
// nested arrays (2 MB) would overflow the stack. Every reader of JSON or
// YAML refuses input nested deeper than kMaxNesting, with one line, before
// the parser sees it.
#include <cstddef>
#include <string>
#include <string_view>

namespace asgd {

inline constexpr int kMaxNesting = 64;

// Where JSON text first nests deeper than limit arrays and objects (strings
// skipped): its 1-based line, or 0 when it never does. Says nothing of
// whether the text is valid JSON.
std::size_t json_too_deep(std::string_view text, int limit = kMaxNesting);
// "<what>: nested deeper than 64 levels (line N)", or "" when it is not.
std::string json_nesting_problem(std::string_view text, const std::string& what);
// Throws asgd::Error with json_nesting_problem() when there is one.
void check_json_nesting(std::string_view text, const std::string& what);

// Where YAML text first nests deeper than limit levels, counted from the
// text (indentation levels, "- " and "? " entries opened on one line, flow
// brackets), or 0. The count can exceed the parsed depth (a flow list
// continued on an indented line counts twice), never fall short of it;
// readers scan with 2 * kMaxNesting and check the parsed tree with
// yaml_depth_exceeds() against kMaxNesting.
std::size_t yaml_too_deep(std::string_view text, int limit = 2 * kMaxNesting);
// The 1-based line of a quoted YAML scalar that the text never closes, or 0.
// (yaml-cpp takes a quote left open at the end of the file as a value.)
// Block scalars (| and >) are skipped: a quote in them is text.
std::size_t yaml_unclosed_quote(std::string_view text);
// The 1-based line where a second YAML document begins ("---" or "..." at
// column 0 after the first document's content), or 0: readers take one
// document a file, and yaml-cpp's Load would drop the rest unread.
std::size_t yaml_second_document(std::string_view text);
// Throws asgd::Error "<what>: nested deeper than 64 levels (line N)",
// "<what>: line N: a quote opened here is never closed" or "<what>: line N: a
// second YAML document begins here".
void check_yaml_text(std::string_view text, const std::string& what);

// JSON parsed as json::parse(text, nullptr, false) does, discarded (is_discarded())
// when nested deeper than kMaxNesting.
template <class Json>
Json parse_json_bounded(std::string_view text) {
  if (json_too_deep(text) != 0) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, false);
}

std::string nesting_message(const std::string& what, std::size_t line);

// Whether a parsed YAML node (yaml-cpp's YAML::Node) nests deeper than
// limit; line: the 1-based line of the first node too deep. Aliases share
// subtrees that a walk visits once per use: budget bounds the nodes visited
// (a document that exhausts it counts as too deep, at line 0).
template <class Node>
bool yaml_depth_exceeds(const Node& n, int limit, std::size_t& line, long& budget, int depth = 1) {
  if (depth > limit || --budget < 0) {
    line = depth > limit && n.Mark().line >= 0 ? static_cast<std::size_t>(n.Mark().line) + 1 : 0;
    return true;
  }
  if (n.IsSequence()) {
    for (const auto& e : n)
      if (yaml_depth_exceeds(e, limit, line, budget, depth + 1)) return true;
  } else if (n.IsMap()) {
    for (const auto& kv : n)
      if (yaml_depth_exceeds(kv.first, limit, line, budget, depth + 1) ||
          yaml_depth_exceeds(kv.second, limit, line, budget, depth + 1))
        return true;
  }
  return false;
}

// Throws asgd::Error "<what>: nested deeper than 64 levels (line N)" for a
// parsed YAML document too deep (or with more than 10 million nodes through
// its aliases).
void throw_nesting(const std::string& what, std::size_t line);
template <class Node>
void check_yaml_depth(const Node& root, const std::string& what) {
  std::size_t line = 0;
  long budget = 10'000'000;
  if (yaml_depth_exceeds(root, kMaxNesting, line, budget)) throw_nesting(what, line);
}

}  // namespace asgd
