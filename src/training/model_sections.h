// The "model" section of a run config as the trainer completes it from the data.
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

namespace lol::training {

/// `section` (a run config's "model" section, any architecture) with the fields the
/// trainer takes from the data when the section leaves them out: `vocab_size` (the
/// dataset's vocabulary) and `max_seq_len` (max(1024, `seq_len`), the training row
/// length). Fields the section sets are kept as they are (checked by the model).
nlohmann::json with_data_sizes(nlohmann::json section, int64_t vocab_size, int64_t seq_len);

}  // namespace lol::training
