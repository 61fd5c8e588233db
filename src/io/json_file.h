// Reading JSON files with errors that name the file.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace lol::io {

/// Parses the JSON document in `path`. Throws InputError "<path>: cannot read ..."
/// when the file cannot be read and "<path>: not valid JSON: <parser message with
/// byte position>" when it does not parse. Structure is checked by the caller
/// (util/json_fields.h).
nlohmann::json read_json_file(const std::string& path);

}  // namespace lol::io
