// Routing-path JSON (docs/routing-paths.md): round trip and validation errors that
// name the file and the entry.
#include "lol/routing_path.h"
#include "model/file_test_util.h"
#include "util/error.h"

using namespace reftest;

TEST(RoutingPath, JsonRoundTrip) {
  TempDir tmp("path_rt");
  lol::RoutingPath p;
  p.library_size = 5;
  p.set(0, 0, 4, std::nullopt);
  p.set(0, 3, 1, 0.25);
  p.set(2, 1, 0, 1.0);  // depth 2 (index 1) left empty
  p.meta = {{"strategy", "S3"}};
  p.save(tmp / "p.json");
  auto q = lol::RoutingPath::load(tmp / "p.json");
  EXPECT_EQ(q.library_size, 5);
  EXPECT_EQ(q.depth(), 3);
  EXPECT_EQ(q.meta, p.meta);
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t k = 0; k < 6; ++k) {
      auto a = p.at(d, k), b = q.at(d, k);
      ASSERT_EQ(a.has_value(), b.has_value()) << d << "," << k;
      if (!a) continue;
      EXPECT_EQ(a->expert, b->expert);
      EXPECT_EQ(a->alpha, b->alpha);
    }
  EXPECT_FALSE(q.at(0, 1).has_value());  // null entry
  EXPECT_FALSE(q.at(1, 0).has_value());  // empty row
  EXPECT_FALSE(q.at(7, 0).has_value());  // beyond the last row
  EXPECT_EQ(q.to_json()["expert"][0], (nlohmann::json{4, nullptr, nullptr, 1}));
  EXPECT_EQ(q.to_json()["alpha"][0], (nlohmann::json{nullptr, nullptr, nullptr, 0.25}));
  // `alpha` may be left out entirely.
  write_text(tmp / "q.json", R"({"format": "lol-routing-path", "version": 1, "library_size": 2, "expert": [[1, null]]})");
  auto r = lol::RoutingPath::load(tmp / "q.json");
  ASSERT_TRUE(r.at(0, 0).has_value());
  EXPECT_EQ(r.at(0, 0)->expert, 1);
  EXPECT_FALSE(r.at(0, 0)->alpha.has_value());
}

TEST(RoutingPath, ValidationErrorsNameFileAndEntry) {
  TempDir tmp("path_bad");
  const std::string f = tmp / "p.json";
  const std::string head = R"("format": "lol-routing-path", "version": 1, "library_size": 3)";
  struct Bad {
    std::string body, needle;
  };
  const std::vector<Bad> bads = {
      {R"({"format": "lol-routing-path", "version": 1, )", "JSON"},
      {R"([1, 2])", "object"},
      {R"({"format": "other", "version": 1, "library_size": 3, "expert": []})", "format"},
      {R"({"format": "lol-routing-path", "version": 2, "library_size": 3, "expert": []})", "version"},
      {R"({"format": "lol-routing-path", "version": 1, "library_size": 0, "expert": []})", "library_size"},
      {"{" + head + "}", "expert"},
      {"{" + head + R"(, "expert": [[0, 3]]})", "expert[0][1]"},
      {"{" + head + R"(, "expert": [[0, -1]]})", "expert[0][1]"},
      {"{" + head + R"(, "expert": [[0, 1.5]]})", "expert[0][1]"},
      {"{" + head + R"(, "expert": [0, 1]})", "expert[0]"},
      {"{" + head + R"(, "expert": [[0, 1]], "alpha": [[0.5, 1.5]]})", "alpha[0][1]"},
      {"{" + head + R"(, "expert": [[0, 1]], "alpha": [[0.5, "x"]]})", "alpha[0][1]"},
      {"{" + head + R"(, "expert": [[0, 1]], "alpha": [[0.5]]})", "alpha[0]"},
      {"{" + head + R"(, "expert": [[0, 1]], "alpha": []})", "alpha"},
      {"{" + head + R"(, "core_depth": 2, "expert": [[0, 1]]})", "core_depth"},
      {"{" + head + R"(, "expert": [[0, 1]], "experts": []})", "experts"},
  };
  for (const auto& b : bads) {
    SCOPED_TRACE(b.body);
    write_text(f, b.body);
    try {
      lol::RoutingPath::load(f);
      ADD_FAILURE() << "accepted";
    } catch (const lol::InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(f), std::string::npos) << msg;
      EXPECT_NE(msg.find(b.needle), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(lol::RoutingPath::load(tmp / "missing.json"), lol::InputError);
}
