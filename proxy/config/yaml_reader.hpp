#pragma once
// Private to config: typed reads of YAML nodes that report every problem to an IssueSink with the
// node's position instead of throwing, so one load lists all the mistakes in a file.
// Every scalar value goes through ${VAR} expansion before it is interpreted.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config_loader.hpp"
#include "config/issue_sink.hpp"

namespace idem::config::detail {

// A value as messages show it: in double quotes.
std::string quoted(std::string_view text);

// One `key: value` entry of a mapping.
struct Field {
  std::string name;
  YAML::Node key;
  YAML::Node value;
};

// The entries of a mapping whose keys were checked against the names allowed there.
class Fields {
 public:
  explicit Fields(YAML::Mark mark) : mark_(mark) {}
  const Field* find(std::string_view name) const;
  void add(Field field) { fields_.push_back(std::move(field)); }
  YAML::Mark mark() const { return mark_; }

 private:
  std::vector<Field> fields_;
  YAML::Mark mark_;
};

// "a" + "b" -> "a.b"; "" + "b" -> "b" (the top level has no prefix).
std::string join_path(std::string_view parent, std::string_view child);

// Stores a value the reader returned; a failed read (already reported) keeps the default.
template <class T>
void assign(std::optional<T> value, T& target) {
  if (value) target = std::move(*value);
}

class YamlReader {
 public:
  YamlReader(IssueSink& issues, const EnvLookup& env) : issues_(issues), env_(env) {}

  IssueSink& issues() { return issues_; }
  // The environment ${VAR} expansion reads (also where store.encryption `env:` keys come from).
  const EnvLookup& env() const { return env_; }

  // `node` as a mapping whose keys are all in `allowed`: unknown and duplicate keys are reported
  // (at the key) and left out. A null node (a section whose entries are all commented out) is an
  // empty mapping. `path` is "" for the top level.
  std::optional<Fields> mapping(const YAML::Node& node, const YAML::Mark& fallback, std::string_view path,
                                const std::vector<std::string_view>& allowed);
  // The elements of a sequence; a null node is an empty sequence.
  std::optional<std::vector<YAML::Node>> sequence(const Field& field, std::string_view path);

  // Scalar values. `path` names the value in messages ("routes[0].ttl").
  std::optional<std::string> string(const Field& field, std::string_view path);
  std::optional<std::string> string(const YAML::Node& value, const YAML::Mark& fallback, std::string_view path);
  std::optional<std::chrono::milliseconds> duration(const Field& field, std::string_view path, bool allow_zero);
  // Sizes must be at least one byte.
  std::optional<std::size_t> byte_size(const Field& field, std::string_view path,
                                       std::size_t max = static_cast<std::size_t>(-1));
  std::optional<std::uint64_t> integer(const Field& field, std::string_view path, std::uint64_t min, std::uint64_t max);
  std::optional<bool> boolean(const Field& field, std::string_view path);
  // A member that must be present and non-empty; `missing` is reported at the value when empty,
  // at the mapping when absent.
  std::optional<std::string> required_string(const Fields& fields, std::string_view key, std::string_view path,
                                             std::string_view missing);

  template <class Enum>
  std::optional<Enum> one_of(const Field& field, std::string_view path,
                             std::initializer_list<std::pair<std::string_view, Enum>> choices) {
    const std::optional<std::string> text = string(field, path);
    if (!text) return std::nullopt;
    std::string expected;
    for (const auto& [name, value] : choices) {
      if (name == *text) return value;
      expected += expected.empty() ? "" : " | ";
      expected += name;
    }
    report_bad_choice(field, path, *text, expected);
    return std::nullopt;
  }

 private:
  void report_bad_choice(const Field& field, std::string_view path, std::string_view text, std::string_view expected);

  IssueSink& issues_;
  const EnvLookup& env_;
};

}  // namespace idem::config::detail
