// Reads a joint graph, runs the min-cut partitioner with torch 2.13's
// defaults and prints the values the forward saves, one per line.
#include <cstdio>

#include <remat/remat.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s JOINT.json\n", argv[0]);
    return 2;
  }
  try {
    remat::JointGraph joint = remat::read_joint_graph_file(argv[1]);
    remat::PartitionOptions options;
    remat::PartitionResult r = remat::min_cut_rematerialization_partition(joint, options);
    for (remat::NodeId id : r.saved_values) {
      std::printf("%s\n", std::string(joint.graph.name(id)).c_str());
    }
  } catch (const remat::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
