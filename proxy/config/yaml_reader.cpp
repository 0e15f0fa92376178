#include "config/yaml_reader.hpp"

#include <algorithm>
#include <charconv>

#include "config/env_expansion.hpp"

namespace idem::config::detail {
namespace {

std::string kind_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "a single value";
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return "empty";
  }
  return "empty";
}

}  // namespace

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

const Field* Fields::find(std::string_view name) const {
  const auto it = std::find_if(fields_.begin(), fields_.end(), [&](const Field& field) { return field.name == name; });
  return it == fields_.end() ? nullptr : &*it;
}

std::string join_path(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  return std::string(parent) + "." + std::string(child);
}

std::optional<Fields> YamlReader::mapping(const YAML::Node& node, const YAML::Mark& fallback, std::string_view path,
                                          const std::vector<std::string_view>& allowed) {
  const std::string where = path.empty() ? "at the top level" : "in " + std::string(path);
  if (node.IsNull()) return Fields(fallback);
  if (!node.IsMap()) {
    issues_.error(node.Mark(), (path.empty() ? std::string("the config") : std::string(path)) +
                                   " must be a mapping of options, not " + kind_name(node));
    return std::nullopt;
  }
  Fields fields(node.Mark());
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      issues_.error(key.Mark(), "option names must be plain words " + where);
      continue;
    }
    const std::string& name = key.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string expected;
      for (std::string_view candidate : allowed) {
        expected += expected.empty() ? "" : ", ";
        expected += candidate;
      }
      std::string message = "unknown key " + quoted(name);
      message.append(" ").append(where).append(" (expected one of: ").append(expected).append(")");
      issues_.error(key.Mark(), message);
      continue;
    }
    if (const Field* first = fields.find(name)) {
      issues_.error(key.Mark(), "duplicate key " + quoted(name) + " " + where + " (first given at line " +
                                    std::to_string(first->key.Mark().line + 1) + ")");
      continue;
    }
    fields.add(Field{.name = name, .key = key, .value = it->second});
  }
  return fields;
}

std::optional<std::vector<YAML::Node>> YamlReader::sequence(const Field& field, std::string_view path) {
  if (field.value.IsNull()) return std::vector<YAML::Node>{};
  if (!field.value.IsSequence()) {
    issues_.error(field.value.Mark(), std::string(path) + " must be a list, not " + kind_name(field.value));
    return std::nullopt;
  }
  std::vector<YAML::Node> elements;
  for (const YAML::Node& element : field.value) elements.push_back(element);
  return elements;
}

std::optional<std::string> YamlReader::required_string(const Fields& fields, std::string_view key,
                                                       std::string_view path, std::string_view missing) {
  const Field* f = fields.find(key);
  if (f == nullptr) {
    issues_.error(fields.mark(), std::string(missing));
    return std::nullopt;
  }
  std::optional<std::string> text = string(*f, path);
  if (text && text->empty()) {
    issues_.error(f->value.Mark(), std::string(missing));
    return std::nullopt;
  }
  return text;
}

std::optional<std::string> YamlReader::string(const Field& field, std::string_view path) {
  return string(field.value, field.key.Mark(), path);
}

std::optional<std::string> YamlReader::string(const YAML::Node& value, const YAML::Mark& fallback,
                                              std::string_view path) {
  // yaml-cpp places a null value's mark (`ttl:` with nothing after it) at the next token, so
  // the key, passed as `fallback`, is the useful place to point at.
  if (value.IsNull()) {
    issues_.error(fallback, std::string(path) + " has no value");
    return std::nullopt;
  }
  if (!value.IsScalar()) {
    issues_.error(value.Mark(), std::string(path) + " must be a single value, not " + kind_name(value));
    return std::nullopt;
  }
  Expansion expansion = expand_variables(value.Scalar(), env_);
  switch (expansion.problem) {
    case ExpansionProblem::none: return std::move(expansion.value);
    case ExpansionProblem::unknown_variable:
      issues_.error(value.Mark(), "unknown variable ${" + expansion.reference + "} in " + std::string(path) +
                                      " (set it or give a default with ${" + expansion.reference + ":-value})");
      return std::nullopt;
    case ExpansionProblem::bad_reference:
      issues_.error(value.Mark(), "bad variable reference \"${" + expansion.reference + "}\" in " + std::string(path) +
                                      " (expected ${NAME} or ${NAME:-default}; write $$ for a literal $)");
      return std::nullopt;
    case ExpansionProblem::unterminated:
      issues_.error(value.Mark(), "unterminated \"${" + expansion.reference + "\" in " + std::string(path) +
                                      " (expected ${NAME} or ${NAME:-default}; write $$ for a literal $)");
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> YamlReader::duration(const Field& field, std::string_view path,
                                                              bool allow_zero) {
  const std::optional<std::string> text = string(field, path);
  if (!text) return std::nullopt;
  const std::optional<std::chrono::milliseconds> value = parse_duration(*text);
  if (!value) {
    issues_.error(field.value.Mark(), "bad duration " + quoted(*text) + " for " + std::string(path) +
                                          " (expected e.g. 250ms, 30s, 5m, 24h)");
    return std::nullopt;
  }
  if (!allow_zero && value->count() == 0) {
    issues_.error(field.value.Mark(), std::string(path) + " must be greater than 0");
    return std::nullopt;
  }
  return value;
}

std::optional<std::size_t> YamlReader::byte_size(const Field& field, std::string_view path, std::size_t max) {
  const std::optional<std::string> text = string(field, path);
  if (!text) return std::nullopt;
  const std::optional<std::size_t> value = parse_byte_size(*text);
  if (!value) {
    issues_.error(field.value.Mark(), "bad size " + quoted(*text) + " for " + std::string(path) +
                                          " (expected e.g. 512, 64KiB, 10MiB, 1GB)");
    return std::nullopt;
  }
  if (*value == 0) {
    issues_.error(field.value.Mark(), std::string(path) + " must be greater than 0");
    return std::nullopt;
  }
  if (*value > max) {
    issues_.error(field.value.Mark(),
                  std::string(path) + " must be at most " + std::to_string(max) + " bytes (got " + *text + ")");
    return std::nullopt;
  }
  return value;
}

std::optional<std::uint64_t> YamlReader::integer(const Field& field, std::string_view path, std::uint64_t min,
                                                 std::uint64_t max) {
  const std::optional<std::string> text = string(field, path);
  if (!text) return std::nullopt;
  std::uint64_t value = 0;
  const char* const end = text->data() + text->size();
  const auto [stop, ec] = std::from_chars(text->data(), end, value);
  const bool all_digits =
      !text->empty() && std::all_of(text->begin(), text->end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!all_digits || (ec != std::errc{} && ec != std::errc::result_out_of_range) || stop != end) {
    issues_.error(field.value.Mark(), "bad number " + quoted(*text) + " for " + std::string(path) +
                                          " (expected an integer from " + std::to_string(min) + " to " +
                                          std::to_string(max) + ")");
    return std::nullopt;
  }
  if (ec == std::errc::result_out_of_range || value > max) {
    issues_.error(field.value.Mark(),
                  std::string(path) + " must be at most " + std::to_string(max) + " (got " + *text + ")");
    return std::nullopt;
  }
  if (value < min) {
    issues_.error(field.value.Mark(),
                  std::string(path) + " must be at least " + std::to_string(min) + " (got " + *text + ")");
    return std::nullopt;
  }
  return value;
}

std::optional<bool> YamlReader::boolean(const Field& field, std::string_view path) {
  const std::optional<std::string> text = string(field, path);
  if (!text) return std::nullopt;
  // YAML 1.2 core schema booleans only: yes/no/on/off are strings there, and `key: off` is one.
  if (*text == "true" || *text == "True" || *text == "TRUE") return true;
  if (*text == "false" || *text == "False" || *text == "FALSE") return false;
  issues_.error(field.value.Mark(),
                "bad boolean " + quoted(*text) + " for " + std::string(path) + " (expected true or false)");
  return std::nullopt;
}

void YamlReader::report_bad_choice(const Field& field, std::string_view path, std::string_view text,
                                   std::string_view expected) {
  issues_.error(field.value.Mark(), "bad value " + quoted(text) + " for " + std::string(path) + " (expected " +
                                        std::string(expected) + ")");
}

}  // namespace idem::config::detail
