// Text inside the HTML report: every string from a summary (kernel names hold '<', '>' and '&',
// labels and notes come from the user) goes through escape_html, in element text and in
// attribute values alike.
#pragma once

#include <string>
#include <string_view>

namespace attnprof::html {

// &, <, >, " and ' as character references.
std::string escape_html(std::string_view text);

// format_microseconds with the micro sign the page can show: "412.3 µs", "4.20 ms".
std::string microseconds_text(double us);

}  // namespace attnprof::html
