// tests/cpp/test_torch_release.cc — which torch release remat reproduces
// (remat/torch_release.h): version strings, the supported range, the one
// table of switches, and how the release reaches PartitionOptions (options
// JSON, the graph's recorded torch_version).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "graph_fixture.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/options.h"
#include "remat/torch_release.h"

namespace remat {
namespace {

using testing::has;

ErrorCode code_of(const auto& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;  // no error: never the expected code
}

TEST(TorchVersion, ReleasesPatchesAndBuildSuffixesParse) {
  for (const char* text : {"2.15", "2.15.0", "2.15.0+cu132", "2.15.3+cpu", "2.15.0.post1"}) {
    const auto v = parse_torch_version(text);
    ASSERT_TRUE(v) << text;
    EXPECT_EQ(v->release, (TorchRelease{2, 15})) << text;
    EXPECT_FALSE(v->prerelease) << text;
  }
}

TEST(TorchVersion, PreReleasesAndNightliesAreMarked) {
  for (const char* text : {"2.16.0.dev20261101+cpu", "2.15.0a0+git1234", "2.15.0rc1", "2.15.0b2"}) {
    const auto v = parse_torch_version(text);
    ASSERT_TRUE(v) << text;
    EXPECT_TRUE(v->prerelease) << text;
  }
}

TEST(TorchVersion, AnythingElseIsNoVersion) {
  for (const char* text : {"", "2", "2.", "x.15", "2.15.x", "2.15.0-beta", "torch 2.15"}) {
    EXPECT_FALSE(parse_torch_version(text)) << text;
  }
}

TEST(TorchRelease, TheRangeIsTwoElevenToTwoFifteen) {
  EXPECT_TRUE(is_supported({2, 11}));
  EXPECT_TRUE(is_supported({2, 15}));
  EXPECT_FALSE(is_supported({2, 10}));
  EXPECT_FALSE(is_supported({2, 16}));
  EXPECT_FALSE(is_supported({3, 0}));
  EXPECT_EQ(supported_torch_releases(), "torch 2.11 to 2.15");
  EXPECT_EQ(nearest_supported({2, 9}), (TorchRelease{2, 11}));
  EXPECT_EQ(nearest_supported({2, 17}), (TorchRelease{2, 15}));
  EXPECT_EQ(nearest_supported({2, 13}), (TorchRelease{2, 13}));
}

TEST(TorchRelease, AnUnsupportedReleaseHasNoBehaviorAndTheErrorNamesTheRange) {
  try {
    TorchBehavior::of({2, 16});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_TRUE(has(e.what(), "2.16")) << e.what();
    EXPECT_TRUE(has(e.what(), "torch 2.11 to 2.15")) << e.what();
  }
}

// Every switch is off before its release and on from it: the table alone
// decides, and no two rows share a name or a member.
TEST(TorchSwitches, EachIsOnExactlyFromItsRelease) {
  std::set<std::string_view> names;
  for (const TorchSwitch& s : torch_switches()) {
    EXPECT_TRUE(names.insert(s.name).second) << "two switches named " << s.name;
    EXPECT_TRUE(is_supported(s.since)) << s.name;
    EXPECT_GT(s.since, kOldestTorchRelease) << s.name << ": the oldest release has no switches";
    for (int minor = kOldestTorchRelease.minor; minor <= kNewestTorchRelease.minor; ++minor) {
      const TorchRelease r{2, minor};
      EXPECT_EQ(TorchBehavior::of(r).*s.member, r >= s.since) << s.name << " under " << r.str();
    }
    EXPECT_FALSE(s.where.empty()) << s.name;
    EXPECT_FALSE(s.what.empty()) << s.name;
    EXPECT_TRUE(has(std::string(s.test), "::test_" + std::string(s.name))) << s.name << ": " << s.test;
  }
  for (const TorchSwitch& s : torch_switches()) {
    EXPECT_EQ(find_torch_switch(s.name), &s);
  }
  EXPECT_EQ(find_torch_switch("no_such_switch"), nullptr);
}

TEST(TorchSwitches, TheDefaultIsTheNewestRelease) {
  const PartitionOptions o;
  EXPECT_EQ(o.torch.release, kNewestTorchRelease);
  for (const TorchSwitch& s : torch_switches()) EXPECT_TRUE(o.torch.*s.member) << s.name;
}

TEST(OptionsTorchRelease, TheReleaseSetsEverySwitchWhateverTheKeyOrder) {
  const PartitionOptions o = read_options(
      R"({"torch_switches": {"cse_partition_key": true}, "torch_release": "2.12.1"})");
  EXPECT_EQ(o.torch.release, (TorchRelease{2, 12}));
  EXPECT_FALSE(o.torch.sdpa_zero_dropout_not_random);  // 2.14's
  EXPECT_TRUE(o.torch.output_stack_traces_meta);        // 2.12's
  EXPECT_TRUE(o.torch.cse_partition_key);                // flipped on over 2.12's off
}

TEST(OptionsTorchRelease, UnknownSwitchesAndUnsupportedReleasesAreErrors) {
  EXPECT_EQ(code_of([] { read_options(R"({"torch_switches": {"no_such": true}})"); }),
            ErrorCode::kInvalidOption);
  EXPECT_EQ(code_of([] { read_options(R"({"torch_switches": {"cse_partition_key": 1}})"); }),
            ErrorCode::kInvalidOption);
  EXPECT_EQ(code_of([] { read_options(R"({"torch_release": "two"})"); }),
            ErrorCode::kInvalidOption);
  EXPECT_EQ(code_of([] { read_options(R"({"torch_release": "2.16"})"); }),
            ErrorCode::kUnsupported);
  EXPECT_EQ(code_of([] { read_options(R"({"torch_release": "2.15.0rc1"})"); }),
            ErrorCode::kUnsupported);
}

// A two-node joint graph that records `version` as its torch_version.
JointGraph recorded(const std::string& version) {
  testing::TestGraph t;
  const testing::Ref x = t.placeholder("primals_1", {4});
  const testing::Ref y = t.call("aten.relu.default", {x}, {4});
  t.output({y});
  JointGraph j = testing::joint_of(t);
  j.torch_version = version;
  return j;
}

TEST(GraphTorchVersion, TheRecordedReleaseIsTheDefaultAndAnExplicitOneWins) {
  const JointGraph j = recorded("2.12.1+cu130");
  EXPECT_EQ(default_options(j).torch.release, (TorchRelease{2, 12}));
  EXPECT_EQ(read_options("", {}, &j).torch.release, (TorchRelease{2, 12}));
  EXPECT_EQ(read_options(R"({"torch_release": "2.14"})", {}, &j).torch.release,
            (TorchRelease{2, 14}));
  EXPECT_EQ(default_options(recorded("")).torch.release, kNewestTorchRelease);
}

TEST(GraphTorchVersion, AGraphFromAnUnsupportedTorchNeedsAnExplicitRelease) {
  const JointGraph j = recorded("2.16.0.dev20261101");
  try {
    default_options(j);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_TRUE(has(e.what(), "torch_version")) << e.what();
    EXPECT_TRUE(has(e.what(), "2.16.0.dev20261101")) << e.what();
  }
  EXPECT_EQ(read_options(R"({"torch_release": "2.15"})", {}, &j).torch.release,
            (TorchRelease{2, 15}));
}

TEST(GraphTorchVersion, TheFieldRoundTripsAndABadOneNamesTheField) {
  const JointGraph j = recorded("2.14.1");
  EXPECT_EQ(read_joint_graph(write_joint_graph(j)).torch_version, "2.14.1");
  std::string doc = write_joint_graph(j);
  doc.replace(doc.find("2.14.1"), 6, "two.x");
  try {
    read_joint_graph(doc);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParse);
    EXPECT_TRUE(has(e.what(), "torch_version")) << e.what();
  }
}

}  // namespace
}  // namespace remat
