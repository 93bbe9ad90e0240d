#include "common/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>

namespace asgd {

std::size_t utf8_sequence(const std::string& v, std::size_t i) {
  const auto* s = reinterpret_cast<const unsigned char*>(v.data());
  const unsigned c = s[i];
  std::size_t len = 0;
  unsigned cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f;
  else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f;
  else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07;
  else return 0;
  if (i + len > v.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((s[i + k] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i + k] & 0x3f);
  }
  const unsigned min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

std::string shorten(const std::string& v, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  for (std::size_t shown = 0; i < v.size() && shown < max; ++shown) {  // shown: characters
    const auto ch = static_cast<unsigned char>(v[i]);
    const std::size_t len = utf8_sequence(v, i);
    if (ch == '\n') out += "\\n";
    else if (ch == '\r') out += "\\r";
    else if (ch == '\t') out += "\\t";
    else if (ch < 0x20 || ch == 0x7f || len == 0) out += fmt::format("\\x{:02x}", ch);  // not text: a byte
    else out.append(v, i, len);
    i += std::max<std::size_t>(len, 1);
  }
  if (i < v.size()) {
    std::size_t chars = 0;  // a byte that is not text counts as one
    for (std::size_t k = 0; k < v.size(); ++chars) k += std::max<std::size_t>(utf8_sequence(v, k), 1);
    out += fmt::format("... ({} characters)", chars);
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
  for (std::size_t i = 0; i < v.size();) {
    const std::size_t len = utf8_sequence(v, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace asgd
