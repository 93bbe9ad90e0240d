#pragma once
// The short name of a CPU model for table columns (header-only: the report,
// which links neither Kokkos nor MPI, uses it too).
#include <sstream>
#include <string>

namespace asgd {

// "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz" -> "Xeon 8375C";
// "AMD EPYC 9654 96-Core Processor" -> "EPYC 9654". "unknown CPU" for "".
inline std::string short_cpu(const std::string& cpu_model) {
  static const char* const drop[] = {"(R)", "(TM)", "(tm)", "Intel", "AMD", "CPU", "Processor",
                                     "Genuine"};
  std::string s = cpu_model;
  if (auto at = s.find('@'); at != std::string::npos) s.resize(at);  // "@ 2.90GHz"
  for (const char* d : drop)
    for (auto p = s.find(d); p != std::string::npos; p = s.find(d)) s.erase(p, std::string(d).size());
  std::istringstream words(s);
  std::string w, out;
  while (words >> w) {
    if (w == "Platinum" || w == "Gold" || w == "Silver" || w == "Bronze" || w == "Scalable" ||
        w.find("-Core") != std::string::npos || w == "with" || w == "Radeon" || w == "Graphics")
      continue;
    out += (out.empty() ? "" : " ") + w;
  }
  return out.empty() ? (cpu_model.empty() ? "unknown CPU" : cpu_model) : out;
}

// "OpenBLAS 0.3.21 ... (core Cooperlake)" -> "Cooperlake"; "" if none.
inline std::string blas_kernel(const std::string& blas) {
  const auto at = blas.rfind("(core ");
  if (at == std::string::npos) return "";
  const auto end = blas.find(')', at);
  return end == std::string::npos ? "" : blas.substr(at + 6, end - at - 6);
}

}  // namespace asgd
