#include "html/html_text.hpp"

#include "summary/render.hpp"

namespace attnprof::html {

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string microseconds_text(double us) {
  std::string text = format_microseconds(us);
  if (const auto at = text.find(" us"); at != std::string::npos) text.replace(at, 3, " \u00b5s");
  return text;
}

}  // namespace attnprof::html
