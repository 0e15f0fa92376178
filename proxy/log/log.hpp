#pragma once
// Structured logging: one JSON object per line on stderr, written with a single write(2) so lines
// from several threads never interleave. Fields are strings or integers; values are escaped.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace idem::log {

enum class Level { debug, info, warn, error };

struct Field {
  std::string_view name;
  std::variant<std::string_view, std::int64_t> value;
  Field(std::string_view n, std::string_view v) : name(n), value(v) {}
  Field(std::string_view n, const std::string& v) : name(n), value(std::string_view(v)) {}
  Field(std::string_view n, const char* v) : name(n), value(std::string_view(v)) {}
  Field(std::string_view n, std::int64_t v) : name(n), value(v) {}
  Field(std::string_view n, int v) : name(n), value(std::int64_t{v}) {}
  Field(std::string_view n, unsigned v) : name(n), value(std::int64_t{v}) {}
  Field(std::string_view n, std::size_t v) : name(n), value(static_cast<std::int64_t>(v)) {}
};

void set_min_level(Level level);
bool enabled(Level level);
// {"time":"2026-11-22T01:02:03.456Z","level":"info","event":"listening",<fields>}
void write(Level level, std::string_view event, std::initializer_list<Field> fields = {});

inline void info(std::string_view event, std::initializer_list<Field> fields = {}) {
  write(Level::info, event, fields);
}
inline void warn(std::string_view event, std::initializer_list<Field> fields = {}) {
  write(Level::warn, event, fields);
}
inline void error(std::string_view event, std::initializer_list<Field> fields = {}) {
  write(Level::error, event, fields);
}

// Appends `text` to `out` as a JSON string literal (with quotes).
void append_json_string(std::string& out, std::string_view text);

}  // namespace idem::log
