// `attnprof diff --html`: the comparison as one self-contained page in the HTML report's style
// (the same style sheet and Content-Security-Policy: no script, nothing loaded), A and B side by
// side. What tests and scripts can rely on in the DOM:
//   <tr class="case-pair" data-verdict="faster|slower|within noise|unknown"> per paired case;
//   <section class="case-changes"> per paired case with changes, a <tr class="change"> per change;
//   <li class="unmatched" data-side="A|B"> per case without a partner.
#pragma once

#include <string>

#include "diff/diff.hpp"

namespace attnprof {

std::string render_diff_html(const DiffReport& report);

}  // namespace attnprof
