// A test's scratch directory: <temp>/<suite>/<name>, emptied first so nothing of an earlier run
// can pass for this run's output. `create` false leaves it absent (its parent made), for a test
// that checks the program under test makes it.
#pragma once

#include <filesystem>
#include <string>

namespace attnprof::test {

inline std::filesystem::path fresh_dir(const std::string& suite, const std::string& name, bool create = true) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / suite / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(create ? dir : dir.parent_path());
  return dir;
}

}  // namespace attnprof::test
