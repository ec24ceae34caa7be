#include "diff/kernel_names.hpp"

#include <cctype>
#include <cstdlib>
#include <memory>

#include <cxxabi.h>

namespace attnprof {
namespace {

std::string demangled_if_mangled(std::string_view name) {
  if (name.substr(0, 2) != "_Z") return std::string(name);
  int status = 0;
  const std::string mangled(name);
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

bool opens(char c) { return c == '<' || c == '(' || c == '{' || c == '['; }
bool closes(char c) { return c == '>' || c == ')' || c == '}' || c == ']'; }

// The text outside every bracket pair. A '>' after '-' is an arrow (decltype(p->x)), not a bracket.
std::string outside_brackets(std::string_view text) {
  std::string out;
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (opens(c)) ++depth;
    else if (closes(c) && depth > 0 && !(c == '>' && i > 0 && text[i - 1] == '-')) --depth;
    else if (depth == 0) out += c;
  }
  return out;
}

// A kernel returns void, which the demangler writes before a template's name.
std::string without_return_type(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text.rfind("void ", 0) == 0 ? text.substr(5) : text;
}

// "a::::b" (a dropped "(anonymous namespace)") as "a::b", and no leading "::".
std::string without_empty_scopes(std::string text) {
  for (auto at = text.find("::::"); at != std::string::npos; at = text.find("::::")) text.erase(at, 2);
  while (text.rfind("::", 0) == 0) text.erase(0, 2);
  return text;
}

std::string without_generator_ordinal(std::string text) {
  if (text.rfind("triton_", 0) != 0) return text;
  std::size_t end = text.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(text[end - 1]))) --end;
  if (end < text.size() && end > 1 && text[end - 1] == '_') text.erase(end - 1);
  return text;
}

}  // namespace

std::string normalize_kernel_name(std::string_view name) {
  std::string text = demangled_if_mangled(name);
  // MSVC's spelling has no brackets to drop.
  for (auto at = text.find("`anonymous namespace'::"); at != std::string::npos; at = text.find("`anonymous namespace'::"))
    text.erase(at, 23);
  text = without_generator_ordinal(without_empty_scopes(without_return_type(outside_brackets(text))));
  // A name that was all brackets keeps its text, so two such kernels are still told apart.
  return text.empty() ? std::string(name) : text;
}

}  // namespace attnprof
