// The story of `attnprof diff`: parse the rules and the noise floor, read both sides (a folder,
// a summary or a trace, diff/diff_input.hpp), pair their cases and compare each pair
// (diff/diff.hpp), print the report, write the page when asked. Anything wrong with the input is
// a usage error that names the file; a valid comparison exits 0 whatever it found.
#include "commands/diff.hpp"

#include <iostream>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "diff/diff.hpp"
#include "diff/html_diff.hpp"
#include "diff/render_diff.hpp"
#include "summary/summary.hpp"

namespace attnprof {

int diff_command(const DiffRequest& r) {
  DiffOptions options;
  DiffInput a, b;
  OutputFormat format = OutputFormat::table;
  try {
    format = output_format_named(r.format);
    options.matching = parse_match_rules(r.match);
    options.noise_percent = parse_noise_percent(r.noise);
    a = load_diff_input(r.a_path);
    b = load_diff_input(r.b_path);
  } catch (const UsageError& e) {
    std::cerr << "attnprof diff: " << e.what() << "\n";
    return kExitUsage;
  }
  const DiffReport report = diff_runs(a, b, options);
  std::cout << render_diff(report, format);
  if (!r.html_path.empty()) {
    write_text_atomically(r.html_path, render_diff_html(report));
    std::cerr << fmt::format("attnprof diff: wrote {}\n", r.html_path);
  }
  return kExitOk;
}

}  // namespace attnprof
