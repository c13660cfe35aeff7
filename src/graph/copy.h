// graph/copy.h — copying nodes from one Graph into a GraphBuilder.
//
// Passes that build a new graph out of an old one's nodes (extraction, the
// rewrites) copy them here, with their arguments and value metadata. Within
// one family of graphs (a builder made from the source) strings and value
// entries are shared, so a copy is the node record and its argument trees;
// otherwise strings and ops are re-interned in the destination. Node
// references are remapped by the caller's table. Passes that only drop,
// merge or reorder nodes use GraphBuilder::rearrange instead.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "remat/graph.h"

namespace remat {

// What a pass returns when it changes nothing: its input itself, with origins
// stamped as a copy would have them (a node without one is its own). Passes
// take their graph by value, so a caller that moves it in pays no copy.
Graph unchanged(Graph g);

// The nodes of g with keep[id] set, in order, as a new graph (a copy of g,
// as unchanged() gives it, when every node is kept): the tail of every
// dead-code elimination.
Graph copy_kept(const Graph& g, const std::vector<uint8_t>& keep);

class NodeCopier {
 public:
  NodeCopier(const Graph& src, GraphBuilder& dst);

  // Copies the argument tree rooted at `root`, mapping node references
  // through `remap` (src id -> dst id). Returns the new root.
  ArgId copy_args(ArgId root, std::span<const NodeId> remap);

  // Copies node `id`: args remapped through `remap`, value metadata, meta and
  // op. The copy's origin is `origin` if given; otherwise the source's origin
  // when it has one (kCreatedNode included), else the source id. So chained
  // passes keep pointing at the joint graph. Returns the new id.
  // `name`, when not 0, is a string of the destination's pool that replaces
  // the source name (FX renames a copy whose name is already taken there).
  NodeId copy(NodeId id, std::span<const NodeId> remap, NodeId origin = kNoNode,
              StrId name = 0);

  // Copies node `id` as a placeholder with the same name and value metadata
  // (torch turns saved values into backward placeholders this way).
  // The FX target stays the source name even when `name` (not 0) renames
  // the node: fx.Graph.placeholder(n) targets n and names it create_name(n).
  NodeId copy_as_placeholder(NodeId id, NodeId origin = kNoNode, StrId name = 0);

  // Re-interns a string / op of the source graph in the destination.
  StrId str(StrId s);
  OpId op(OpId o);

  // Copies value metadata and meta fields of `id` into `out` (name, kind,
  // target and op included; a rewrite that gives a new node another node's
  // meta overwrites those).
  void copy_value(NodeId id, Node& out);

 private:
  // Appends a source tensor entry (and its dims) to the destination's pool.
  uint32_t copy_tensor(const TensorMeta& t);

  const Graph& src_;
  GraphBuilder& dst_;
  const bool same_pool_;        // src and dst share a string pool: ids map to themselves
  const bool same_values_;      // and a value pool: value ranges do too
  std::vector<StrId> str_map_;  // otherwise src StrId -> dst StrId (0 = not yet mapped)
  std::vector<OpId> op_map_;
};

}  // namespace remat
