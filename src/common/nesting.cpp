#include "common/nesting.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/error.hpp"

namespace asgd {

std::size_t json_too_deep(std::string_view text, int limit) {
  int depth = 0;
  std::size_t line = 1;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return line;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return 0;
}

std::string nesting_message(const std::string& what, std::size_t line) {
  return line > 0 ? fmt::format("{}: nested deeper than {} levels (line {})", what, kMaxNesting, line)
                  : fmt::format("{}: nested deeper than {} levels, or too many nodes through aliases", what,
                                kMaxNesting);
}

void throw_nesting(const std::string& what, std::size_t line) { throw Error(nesting_message(what, line)); }

std::string json_nesting_problem(std::string_view text, const std::string& what) {
  const std::size_t line = json_too_deep(text);
  return line == 0 ? std::string() : nesting_message(what, line);
}

void check_json_nesting(std::string_view text, const std::string& what) {
  if (const std::size_t line = json_too_deep(text); line != 0) throw_nesting(what, line);
}

std::size_t yaml_too_deep(std::string_view text, int limit) {
  std::vector<std::size_t> indents;  // columns of the open block levels
  int flow = 0;                      // open [ and { (they span lines)
  std::size_t line = 0, pos = 0;
  while (pos <= text.size()) {
    ++line;
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    std::size_t col = l.find_first_not_of(" \t");
    if (col == std::string_view::npos || l[col] == '#') {
      if (end == text.size()) break;
      continue;
    }
    if (flow == 0) {
      while (!indents.empty() && indents.back() > col) indents.pop_back();
      if (indents.empty() || indents.back() < col) indents.push_back(col);
    }
    // "- - - x" and "? ? x" open a level each on one line
    int compact = 0;
    while (col + 1 < l.size() && (l[col] == '-' || l[col] == '?') && (l[col + 1] == ' ' || l[col + 1] == '\t')) {
      ++compact;
      col = l.find_first_not_of(" \t", col + 1);
      if (col == std::string_view::npos) break;
    }
    char quote = 0;
    int deepest = flow;
    for (std::size_t i = col == std::string_view::npos ? l.size() : col; i < l.size(); ++i) {
      const char c = l[i];
      if (quote) {
        if (c == '\\' && quote == '"') ++i;
        else if (c == quote) quote = 0;
        continue;
      }
      if (c == '#' && (i == 0 || l[i - 1] == ' ' || l[i - 1] == '\t')) break;
      const bool token_start = i == 0 || std::string_view(" \t[{,:").find(l[i - 1]) != std::string_view::npos;
      if ((c == '"' || c == '\'') && token_start) quote = c;
      else if (c == '[' || c == '{') deepest = std::max(deepest, ++flow);
      else if ((c == ']' || c == '}') && flow > 0) --flow;
    }
    if (static_cast<long>(indents.size()) + compact + deepest > limit) return line;
    if (end == text.size()) break;
  }
  return 0;
}

std::size_t yaml_unclosed_quote(std::string_view text) {
  std::size_t line = 1, opened = 0;
  char quote = 0;
  long block_indent = -1;  // inside a block scalar: lines indented deeper than this are its text
  bool line_start = true;
  std::size_t indent = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (line_start && !quote) {
      const std::size_t first = text.find_first_not_of(' ', i);
      indent = (first == std::string_view::npos ? text.size() : first) - i;
      const bool blank = first == std::string_view::npos || text[first] == '\n' || text[first] == '\r';
      if (block_indent >= 0 && (blank || static_cast<long>(indent) > block_indent)) {
        const std::size_t eol = text.find('\n', i);
        if (eol == std::string_view::npos) break;
        i = eol;
        ++line;
        continue;
      }
      block_indent = -1;
    }
    line_start = false;
    if (c == '\n') {
      ++line;
      line_start = true;
      continue;
    }
    if (quote) {
      if (quote == '"' && c == '\\') ++i;
      else if (c == quote && quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    const bool token_start = i == 0 || std::string_view(" \t[{,:\n").find(text[i - 1]) != std::string_view::npos;
    if (c == '#' && token_start) {  // a comment, to the end of the line
      const std::size_t eol = text.find('\n', i);
      if (eol == std::string_view::npos) break;
      i = eol - 1;
    } else if ((c == '"' || c == '\'') && token_start) {
      quote = c;
      opened = line;
    } else if ((c == '|' || c == '>') && token_start) {
      // a block scalar when only indicators, spaces or a comment follow on the line
      std::size_t k = i + 1;
      while (k < text.size() && (text[k] == '-' || text[k] == '+' || (text[k] >= '1' && text[k] <= '9'))) ++k;
      while (k < text.size() && text[k] == ' ') ++k;
      if (k >= text.size() || text[k] == '\n' || text[k] == '\r' || text[k] == '#') block_indent = static_cast<long>(indent);
    }
  }
  return quote ? opened : 0;
}

std::size_t yaml_second_document(std::string_view text) {
  bool content = false;  // a line of the first document seen (not blank, comment or directive)
  std::size_t line = 0;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view l = text.substr(at, end - at);
    ++line;
    at = end + 1;
    // at column 0, "---" and "..." (alone or before a space) mark documents, in block scalars too
    const bool marker = (l.starts_with("---") || l.starts_with("...")) &&
                        (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    if (marker) {
      if (content) return line;
      if (l.starts_with("...")) content = true;  // an end before any content: whatever follows is a second one
      continue;
    }
    const std::size_t first = l.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && l[first] != '#' && !(first == 0 && l[0] == '%')) content = true;
  }
  return 0;
}

void check_yaml_text(std::string_view text, const std::string& what) {
  if (const std::size_t line = yaml_too_deep(text); line != 0) throw_nesting(what, line);
  if (const std::size_t line = yaml_unclosed_quote(text); line != 0)
    throw Error(fmt::format("{}: line {}: a quote opened here is never closed", what, line));
  if (const std::size_t line = yaml_second_document(text); line != 0)
    throw Error(fmt::format("{}: line {}: a second YAML document begins here (one document a file)", what, line));
}

}  // namespace asgd
