#pragma once
// What the security tests read and alter behind the proxy's back: its records as Postgres holds
// them, over a plain blocking libpq connection to the suite's database. Test threads only.
#include <optional>
#include <string>

namespace idem::test::security {

// The stored response_body of key's record, as raw bytes; nullopt when there is none.
std::optional<std::string> raw_stored_body(const std::string& key);

// Every column of every record with this key (any scope), as the raw bytes Postgres holds,
// concatenated: what someone reading the table (or a dump of it) would see.
std::string raw_record_bytes(const std::string& key);

// XORs one byte of the stored response_body; returns the number of rows changed.
int flip_stored_body_byte(const std::string& key);

}  // namespace idem::test::security
