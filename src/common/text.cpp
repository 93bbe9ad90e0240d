#include "common/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>

namespace asgd {

std::string shorten(const std::string& v, std::size_t max) {
  std::string out;
  std::size_t shown = 0;  // characters of v taken
  for (std::size_t i = 0; i < v.size() && shown < max; ++i, ++shown) {
    const auto ch = static_cast<unsigned char>(v[i]);
    if (ch == '\n') out += "\\n";
    else if (ch == '\r') out += "\\r";
    else if (ch == '\t') out += "\\t";
    else if (ch < 0x20 || ch == 0x7f) out += fmt::format("\\x{:02x}", ch);
    else out += static_cast<char>(ch);
  }
  if (shown < v.size()) {
    // do not end inside a UTF-8 sequence
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0xC0) out.pop_back();
    out += fmt::format("... ({} characters)", v.size());
  }
  return out;
}

namespace {
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates) {
  if (key.size() > 256) return "";  // nothing is that long; spare the quadratic distance
  std::string best;
  std::size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(key, c);
    const bool near = d <= 2 && d < key.size();
    const bool prefix = key.size() >= 2 && c.size() >= 2 && (c.starts_with(key) || key.starts_with(c));
    if ((near || prefix) && d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
}

std::string name_problem(const std::string& what, const std::string& v, std::size_t max_len) {
  if (v.empty()) return fmt::format("{} must not be empty", what);
  if (v == "." || v == "..")
    return fmt::format("{} '{}' is not a name (it is used as a folder or file name)", what, v);
  if (v.size() > max_len)
    return fmt::format("{} '{}' is too long ({} characters, at most {})", what, shorten(v, 40),
                       v.size(), max_len);
  for (char ch : v)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'))
      return fmt::format("{} '{}' may hold only letters, digits, '-', '_', '.'", what, shorten(v));
  return "";
}

std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t / 60 % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

bool valid_utf8(const std::string& v) {
  const auto* s = reinterpret_cast<const unsigned char*>(v.data());
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = s[i];
    std::size_t len = 0;
    unsigned cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07;
    else return false;
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    const unsigned min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

}  // namespace asgd
