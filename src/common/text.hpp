#pragma once
// Text for messages and names: echoed values cut short, "did you mean"
// suggestions, safe path components, durations.
#include <cstddef>
#include <string>
#include <vector>

namespace asgd {

// v itself when short, else its first max characters + "..." (so a 1 MB value
// is never echoed whole); control characters and bytes that are not UTF-8
// text are escaped (\x..), so a message is always valid UTF-8.
std::string shorten(const std::string& v, std::size_t max = 60);
// " (did you mean 'x'?)" for the closest candidate within edit distance 2
// (and shorter than key) or sharing a prefix of at least 2 characters; "".
std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates);
// "" when v is one safe path component: not empty, not "." or "..", at most
// max_len characters, only letters, digits, '-', '_', '.'. Otherwise the
// problem, naming `what` ("suite", "run id", "name").
std::string name_problem(const std::string& what, const std::string& v, std::size_t max_len);
// Whether v is valid UTF-8 (no overlong forms, surrogates or code points
// above U+10FFFF): text stored in JSON (configurations, results files'
// records, profiles' names) must be, and is checked when read.
bool valid_utf8(const std::string& v);
// The length of the valid UTF-8 sequence that starts at v[i] (1 for ASCII),
// 0 where none does (a stray continuation byte, a cut or overlong sequence,
// a surrogate, a code point above U+10FFFF). i < v.size().
std::size_t utf8_sequence(const std::string& v, std::size_t i);
// "42s", "3m07s", "2h05m"; "?" for a negative or non-finite time.
std::string fmt_duration(double seconds);

}  // namespace asgd
