// memory/simulate.cc — the liveness simulation of one training step.
//
// Contract: remat/memory.h (simulate_memory). One pass per graph, in node
// order. Storages are records with a reference count: every node holding a
// tensor of the storage counts once, from the moment it runs until FX code
// would release it; inputs, constants, the caller's outputs and gradients are
// pinned instead. Each record remembers when it was allocated and released,
// so the storages alive at the peak are found without a second pass. Under
// inductor's model, what generated kernels read last is released at the
// next extern kernel (memory/fusion.h in_kernel), and the step is run again
// with each graph in the kernel orders inductor's reorder pass may keep
// (memory/kernel_order.h), the graph rearranged and its fused groups kept;
// the highest peak is the profile, told in the graph's own node ids.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "analyze/analyze.h"
#include "graph/query.h"
#include "memory/bytes.h"
#include "memory/fusion.h"
#include "memory/kernel_order.h"
#include "memory/link.h"
#include "remat/error.h"
#include "remat/memory.h"

namespace remat {
namespace {

using memory::allocation_bytes;

constexpr uint32_t kNever = std::numeric_limits<uint32_t>::max();
constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();

// The storages alive at the peak, largest first (ties: forward first, then
// by node), as remat/memory.h's MemoryProfile::at_peak lists them.
void sort_at_peak(std::vector<LiveStorage>& at_peak) {
  std::stable_sort(at_peak.begin(), at_peak.end(), [](const LiveStorage& a, const LiveStorage& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.pass != b.pass) return a.pass < b.pass;
    return a.node < b.node;
  });
}

class Simulator {
 public:
  explicit Simulator(MemoryModel model) : model_(model) {}

  // Under inductor's model, the fused groups of one graph fixed
  // (inductor_fusion's `within`): a graph reordered after fusing.
  Simulator& with_groups(Pass p, std::span<const NodeId> within) {
    (p == Pass::kForward ? forward_within_ : backward_within_) = within;
    return *this;
  }

  MemoryProfile run(const Graph& fw, const Graph& bw, int num_fwd_outputs) {
    const memory::ForwardOutputs outs = memory::forward_outputs(fw, num_fwd_outputs);
    const std::vector<NodeId> link = memory::link_backward_inputs(fw, bw, outs);
    forward_size_ = fw.size();
    prof_.forward_timeline.reserve(fw.size());
    prof_.backward_timeline.reserve(bw.size());

    // Constants of both graphs live as long as their modules: all step.
    GraphState f(fw, Pass::kForward), b(bw, Pass::kBackward);
    pin_constants(f);
    pin_constants(b);

    saved_.assign(fw.size(), 0);
    for (NodeId v : outs.saved)
      if (v != kNoNode) saved_[v] = 1;
    run_graph(f, nullptr, nullptr, nullptr);
    // The caller keeps the outputs; the saved values wait for the backward.
    for (NodeId o : outs.outputs)
      if (o != kNoNode) for_each_storage(f, o, [&](uint32_t s) { st_[s].pinned = true; });
    prof_.between_bytes = live_;
    run_graph(b, &f, &link, &outs.saved);
    for (NodeId r : returned(bw))
      if (r != kNoNode) for_each_storage(b, r, [&](uint32_t s) { st_[s].pinned = true; });
    finish_at_peak();
    prof_.model = model_;
    return std::move(prof_);
  }

 private:
  struct Storage {
    int64_t bytes = 0;
    int32_t refs = 0;
    bool pinned = false;
    Pass pass = Pass::kForward;
    NodeId owner = kNoNode;
    uint32_t born = 0;       // the instant it was allocated
    uint32_t died = kNever;  // the first instant it is no longer alive
  };

  // Each fused group's members (memory/fusion.h group), by its first one.
  using Groups = std::unordered_map<NodeId, std::vector<NodeId>>;

  // Per graph: each node's storage records (one per tensor, -1 where it has
  // none).
  struct GraphState {
    const Graph& g;
    Pass pass;
    std::vector<uint32_t> first;  // node -> index of its first tensor in `storage`
    std::vector<int64_t> storage; // per tensor: storage record, or -1
    // Value-less nodes -> (storage id, record) of the results their getitems
    // hold (see assign_computed).
    std::unordered_map<NodeId, std::vector<std::pair<int64_t, uint32_t>>> adopted;
    // Under inductor: placeholder -> the record of its channels-last copy.
    std::unordered_map<NodeId, uint32_t> layout_copy;
    GraphState(const Graph& graph, Pass p) : g(graph), pass(p), first(graph.size() + 1, 0) {
      uint32_t total = 0;
      for (NodeId n = 0; n < graph.size(); ++n) {
        first[n] = total;
        total += graph.node(n).tensors_count;
      }
      first[graph.size()] = total;
      storage.assign(total, -1);
    }
  };

  template <typename F>
  void for_each_storage(const GraphState& s, NodeId n, F&& f) {
    if (!s.adopted.empty()) {
      auto it = s.adopted.find(n);
      if (it != s.adopted.end()) {
        for (const auto& [sid, rec] : it->second) f(rec);
        return;
      }
    }
    // A node with two tensors in one storage holds it once.
    for (uint32_t i = s.first[n]; i < s.first[n + 1]; ++i) {
      const int64_t id = s.storage[i];
      if (id < 0) continue;
      bool seen = false;
      for (uint32_t j = s.first[n]; j < i; ++j) seen = seen || s.storage[j] == id;
      if (!seen) f(static_cast<uint32_t>(id));
    }
  }

  uint32_t allocate(int64_t bytes, Pass pass, NodeId owner) {
    Storage s;
    s.bytes = bytes;
    s.pass = pass;
    s.owner = owner;
    s.born = instant_;
    st_.push_back(s);
    live_ = live_ > kMaxBytes - bytes ? kMaxBytes : live_ + bytes;
    return static_cast<uint32_t>(st_.size() - 1);
  }

  void hold(const GraphState& s, NodeId n) {
    for_each_storage(s, n, [&](uint32_t id) { ++st_[id].refs; });
  }

  void release(const GraphState& s, NodeId n) {
    for_each_storage(s, n, [&](uint32_t id) { drop(id); });
  }

  // One holder of storage record `id` lets go.
  void drop(uint32_t id) {
    Storage& st = st_[id];
    if (--st.refs == 0 && !st.pinned && st.died == kNever) {
      live_ -= st.bytes;
      // record() has already moved instant_ past the node that released
      // it: instant_ is the first instant it is not alive.
      st.died = instant_;
    }
  }

  // inductor's channels-last copies of the forward's placeholders that
  // convolution v is the first to read (memory/fusion.h copy_from): each a
  // fresh storage, held until its last convolution, or, when the forward
  // saves the placeholder, by the backward (it saves the copy).
  void copy_layouts_for(GraphState& s, NodeId v, const memory::InductorFusion& fusion) {
    for (size_t i = 0; i < 2; ++i) {
      const NodeId p = node_arg(s.g, v, i);
      if (p == kNoNode || fusion.copy_from[p] != v || s.layout_copy.count(p)) continue;
      const uint32_t rec = allocate(allocation_bytes(s.g, s.g.tensors(p)[0]), s.pass, p);
      ++st_[rec].refs;
      s.layout_copy.emplace(p, rec);
    }
  }

  void drop_layout_copies_after(const GraphState& s, NodeId v, const memory::InductorFusion& fusion) {
    for (size_t i = 0; i < 2; ++i) {
      const NodeId p = node_arg(s.g, v, i);
      if (p == kNoNode || fusion.copy_until[p] != v || saved_[p]) continue;
      const auto copy = s.layout_copy.find(p);
      // Twice an argument of v (input and weight): dropped once.
      if (copy != s.layout_copy.end() && st_[copy->second].died == kNever && st_[copy->second].refs > 0 &&
          (i == 0 || node_arg(s.g, v, 0) != p))
        drop(copy->second);
    }
  }

  void pin_constants(GraphState& s) {
    for (NodeId n = 0; n < s.g.size(); ++n) {
      if (s.g.node(n).kind != NodeKind::kGetAttr) continue;
      assign_fresh(s, n);
      for_each_storage(s, n, [&](uint32_t id) {
        st_[id].pinned = true;
        prof_.inputs_bytes += st_[id].bytes;
      });
    }
  }

  // Every tensor of n a storage of its own (inputs, constants, tangents).
  void assign_fresh(GraphState& s, NodeId n) {
    const auto tensors = s.g.tensors(n);
    for (size_t k = 0; k < tensors.size(); ++k) {
      const int64_t sid = tensors[k].storage;
      int64_t rec = -1;
      for (size_t j = 0; j < k && sid >= 0; ++j)
        if (tensors[j].storage == sid) rec = s.storage[s.first[n] + j];
      if (rec < 0) rec = allocate(allocation_bytes(s.g, tensors[k]), s.pass, n);
      s.storage[s.first[n] + k] = rec;
    }
  }

  // The storage record a tensor `t` of node n shares with one of its inputs,
  // or -1 for a fresh allocation. Equal storage ids say so; when they do not
  // (CSE merged the producer; a graph without storage ids), a getitem still
  // picks its element, a view aliases its first input, and a mutable op with
  // one result returns its first argument.
  int64_t aliased(const GraphState& s, NodeId n, const TensorMeta& t) const {
    const Graph& g = s.g;
    const auto inputs = g.inputs(n);
    if (t.storage >= 0) {
      for (NodeId in : inputs) {
        const auto its = g.tensors(in);
        for (size_t j = 0; j < its.size(); ++j)
          if (its[j].storage == t.storage && s.storage[s.first[in] + j] >= 0)
            return s.storage[s.first[in] + j];
        auto adopted = s.adopted.find(in);
        if (adopted != s.adopted.end())
          for (const auto& [sid, rec] : adopted->second)
            if (sid == t.storage) return rec;
      }
    }
    if (inputs.empty()) return -1;
    const NodeId in = inputs[0];
    if (is_getitem(g, n)) {
      const int64_t index = getitem_index(g, n).value_or(-1);
      const auto its = g.tensors(in);
      for (size_t j = 0; j < its.size(); ++j)
        if (its[j].index == index) return s.storage[s.first[in] + j];
      return -1;
    }
    const OpInfo* op = g.op(n);
    if (op == nullptr || op->kind != OpKind::kOverload) return -1;
    if (op->is_view || (op->is_mutable && op->num_returns == 1)) {
      const NodeId first = node_arg(g, n, 0);
      if (first != kNoNode && s.first[first] < s.first[first + 1]) return s.storage[s.first[first]];
    }
    return -1;
  }

  // A computed node's tensors: aliases of its inputs' storages, fresh
  // allocations otherwise. A node without a value (a higher-order op such as
  // run_with_rng_state) allocates what its getitems hold: its result exists
  // as soon as it runs.
  void assign_computed(GraphState& s, NodeId n) {
    const Graph& g = s.g;
    const auto tensors = g.tensors(n);
    for (size_t k = 0; k < tensors.size(); ++k) {
      const TensorMeta& t = tensors[k];
      int64_t rec = aliased(s, n, t);
      for (size_t j = 0; j < k && rec < 0 && t.storage >= 0; ++j)
        if (tensors[j].storage == t.storage) rec = s.storage[s.first[n] + j];
      if (rec < 0) rec = allocate(allocation_bytes(g, t), s.pass, n);
      s.storage[s.first[n] + k] = rec;
    }
    if (tensors.empty() && g.node(n).value == ValueKind::kMissing) adopt_getitem_results(s, n);
  }

  void adopt_getitem_results(GraphState& s, NodeId n) {
    const Graph& g = s.g;
    std::vector<std::pair<int64_t, uint32_t>> adopted;
    for (NodeId user : g.users(n)) {
      if (!is_getitem(g, user)) continue;
      for (const TensorMeta& t : g.tensors(user)) {
        if (t.storage >= 0) {
          bool known = false;
          for (const auto& [sid, rec] : adopted) known = known || sid == t.storage;
          if (known || aliased_input_storage(s, n, t.storage) >= 0) continue;
        }
        adopted.emplace_back(t.storage, allocate(allocation_bytes(g, t), s.pass, n));
      }
    }
    if (!adopted.empty()) s.adopted.emplace(n, std::move(adopted));
  }

  // The record of an input of n holding storage id `sid`, or -1.
  int64_t aliased_input_storage(const GraphState& s, NodeId n, int64_t sid) const {
    for (NodeId in : s.g.inputs(n)) {
      const auto its = s.g.tensors(in);
      for (size_t j = 0; j < its.size(); ++j)
        if (its[j].storage == sid && s.storage[s.first[in] + j] >= 0) return s.storage[s.first[in] + j];
    }
    return -1;
  }

  static std::vector<NodeId> returned(const Graph& g) {
    return split_outputs(g, 0).bwd;
  }

  void record(const GraphState& s, NodeId n) {
    (s.pass == Pass::kForward ? prof_.forward_timeline : prof_.backward_timeline).push_back(live_);
    int64_t& pass_peak =
        s.pass == Pass::kForward ? prof_.forward_peak_bytes : prof_.backward_peak_bytes;
    pass_peak = std::max(pass_peak, live_);
    if (live_ > prof_.peak_bytes || prof_.peak_node == kNoNode) {
      peak_instant_ = instant_;
      prof_.peak_bytes = live_;
      prof_.peak_pass = s.pass;
      prof_.peak_node = n;
    }
    ++instant_;
  }

  // Runs one graph. For the backward, `fw`, `link` and `fw_saved` say which
  // placeholders receive which saved values.
  void run_graph(GraphState& s, GraphState* fw, const std::vector<NodeId>* link,
                 const std::vector<NodeId>* fw_saved) {
    const Graph& g = s.g;
    const size_t n = g.size();
    // Under inductor's model, fused values allocate nothing and their
    // inputs live until the kernels that inline them run.
    memory::InductorFusion fusion;
    if (model_ == MemoryModel::kInductor)
      fusion = memory::inductor_fusion(g, s.pass == Pass::kForward ? forward_within_ : backward_within_);
    const bool inductor = model_ == MemoryModel::kInductor;
    // release_after: node -> values whose last use it is (CSR).
    std::vector<uint32_t> count(n + 1, 0);
    auto last_user = [&](NodeId v) -> NodeId {
      if (inductor && fusion.last_read[v] != kNoNode) return fusion.last_read[v];
      const auto users = g.users(v);
      if (!users.empty()) return users.back();
      return g.node(v).kind == NodeKind::kPlaceholder ? kNoNode : v;
    };
    for (NodeId v = 0; v < n; ++v) {
      if (g.node(v).kind == NodeKind::kOutput) continue;
      const NodeId u = last_user(v);
      if (u != kNoNode && g.node(u).kind != NodeKind::kOutput) ++count[u + 1];
    }
    for (size_t i = 0; i < n; ++i) count[i + 1] += count[i];
    std::vector<NodeId> released(count[n]);
    std::vector<uint8_t> done(inductor ? count[n] : 0, 0);  // released early (in place)
    std::vector<uint32_t> fill(count.begin(), count.end() - 1);
    for (NodeId v = 0; v < n; ++v) {
      if (g.node(v).kind == NodeKind::kOutput) continue;
      const NodeId u = last_user(v);
      if (u != kNoNode && g.node(u).kind != NodeKind::kOutput) released[fill[u]++] = v;
    }

    // The backward's saved inputs: its placeholders take over the forward's
    // storages before anything else happens, and the runtime's own
    // references (ctx, the arguments list) go.
    if (fw != nullptr) {
      for (NodeId v = 0; v < n; ++v) {
        if (g.node(v).kind != NodeKind::kPlaceholder || (*link)[v] == kNoNode) continue;
        const NodeId from = (*link)[v];
        const auto ts = g.tensors(v);
        const uint32_t avail = fw->first[from + 1] - fw->first[from];
        const auto copy = fw->layout_copy.find(from);
        for (size_t k = 0; k < ts.size(); ++k)
          s.storage[s.first[v] + k] = k == 0 && copy != fw->layout_copy.end() ? copy->second
                                      : k < avail ? fw->storage[fw->first[from] + k]
                                                  : allocate(allocation_bytes(g, ts[k]), s.pass, v);
        hold(s, v);
      }
      std::vector<NodeId> saved = *fw_saved;
      std::sort(saved.begin(), saved.end());
      saved.erase(std::unique(saved.begin(), saved.end()), saved.end());
      for (NodeId from : saved) {
        if (from == kNoNode) continue;
        release(*fw, from);
        // The forward's hold on a saved layout copy passes to the backward.
        const auto copy = fw->layout_copy.find(from);
        if (copy != fw->layout_copy.end()) drop(copy->second);
      }
    }
    // Under inductor: generated kernels fused into an earlier one's kernel
    // (memory/fusion.h kernel_at) allocate there; head -> its members. And
    // each fused group's members, by its first member (for in-place writes).
    std::unordered_map<NodeId, std::vector<NodeId>> members;
    Groups groups;
    if (inductor)
      for (NodeId v = 0; v < n; ++v) {
        if (fusion.kernel_at[v] != v) members[fusion.kernel_at[v]].push_back(v);
        if (fusion.group[v] != v) groups[fusion.group[v]].push_back(v);
      }
    for (auto& [first, rest] : groups) rest.insert(rest.begin(), first);
    // Where each fused group's kernel ends: its last member that runs at
    // its own node (one fused into the kernel across an extern kernel runs
    // at the kernel's head).
    std::unordered_map<NodeId, NodeId> group_end;
    for (const auto& [first, all] : groups)
      for (NodeId m : all) {
        NodeId& end = group_end[first];
        end = std::max(end, fusion.kernel_at[m] == m ? m : fusion.kernel_at[m]);
      }
    // Under inductor: values the kernels since the last extern kernel read
    // last, released when the next extern kernel (or the end) comes, each
    // with the node before which it may not go: its reader's fused
    // kernel's end.
    std::vector<std::pair<NodeId, NodeId>> pending;
    auto flush = [&](NodeId at) {
      size_t kept = 0;
      for (const auto& [p, until] : pending)
        if (until <= at)
          release(s, p);
        else
          pending[kept++] = {p, until};
      pending.resize(kept);
    };
    for (NodeId v = 0; v < n; ++v) {
      const Node& node = g.node(v);
      // A scatter's copy of its input is a generated kernel's: it joins the
      // kernels before it, and the values they read go after it, but for
      // those a fused kernel still running reads (max_min_dim's backward is
      // one kernel with both its scatters, the tangent read before them).
      const bool scatters = inductor && memory::inductor_scatters_into_copy(g, v);
      if (inductor && node.kind == NodeKind::kOutput) flush(kNoNode);
      if (inductor && fusion.external[v] && !scatters) flush(v);
      switch (node.kind) {
        case NodeKind::kPlaceholder:
          if (link != nullptr && (*link)[v] != kNoNode) break;  // held above
          assign_fresh(s, v);
          if (s.pass == Pass::kForward)
            for_each_storage(s, v, [&](uint32_t id) {
              if (!st_[id].pinned) prof_.inputs_bytes += st_[id].bytes;
              st_[id].pinned = true;
            });
          hold(s, v);
          break;
        case NodeKind::kGetAttr:
          hold(s, v);  // allocated and pinned before the step
          break;
        case NodeKind::kCallFunction:
          if (inductor && s.pass == Pass::kForward) copy_layouts_for(s, v, fusion);
          if (inductor && (fusion.fused[v] || fusion.kernel_at[v] != v)) break;  // inlined, or allocated earlier
          if (inductor && fusion.view_copy[v]) {  // a copy, not an alias
            assign_fresh(s, v);
            hold(s, v);
            break;
          }
          if (inductor) {
            const auto group = members.find(v);
            if (group != members.end()) {
              run_group(s, v, group->second, fusion, groups, released, count, done);
              break;
            }
          }
          if (inductor && fusion.inplace[v])
            reuse_dying_input(s, v, released, count[v], count[v + 1], done, inplace_rule(s, v, fusion, groups));
          assign_computed(s, v);
          hold(s, v);
          break;
        case NodeKind::kOutput:
          break;
      }
      record(s, v);
      if (scatters) flush(v);
      for (uint32_t i = count[v]; i < count[v + 1]; ++i) {
        if (!done.empty() && done[i]) continue;
        if (inductor && fusion.in_kernel[v]) {
          const auto end = group_end.find(fusion.group[v]);
          pending.emplace_back(released[i], end == group_end.end() ? v : end->second);
        } else {
          release(s, released[i]);
        }
      }
      if (inductor && s.pass == Pass::kForward) drop_layout_copies_after(s, v, fusion);
    }
    // Returning ends the frame: placeholders nothing used go too.
    for (NodeId v = 0; v < n; ++v) {
      const Node& node = g.node(v);
      if (node.kind == NodeKind::kPlaceholder && g.users(v).empty()) release(s, v);
    }
  }

  // A fused kernel at `head` (memory/fusion.h kernel_at): head's buffer as
  // any kernel's, then the buffers of the members that run there (in node
  // order: a member may read an earlier one). Their other reads still end
  // at their own places (the safe side, which the optimizer's rows follow).
  // released[begin[m], begin[m + 1]) are the values whose last read is m.
  void run_group(GraphState& s, NodeId head, const std::vector<NodeId>& members,
                 const memory::InductorFusion& fusion, const Groups& groups, const std::vector<NodeId>& released,
                 const std::vector<uint32_t>& begin, std::vector<uint8_t>& done) {
    std::vector<NodeId> run{head};
    run.insert(run.end(), members.begin(), members.end());
    for (NodeId m : run) {
      if (fusion.inplace[m])
        reuse_dying_input(s, m, released, begin[m], begin[m + 1], done, inplace_rule(s, m, fusion, groups));
      assign_computed(s, m);
      hold(s, m);
    }
  }

  // The storage records kernel k loads, appended to `out`; false when they
  // were not all listed (then nothing may be taken in place of them).
  bool loaded_records(const GraphState& s, NodeId k, const memory::InductorFusion& fusion,
                      std::vector<uint32_t>& out) {
    const Graph& g = s.g;
    if (fusion.fused[k] || g.node(k).kind != NodeKind::kCallFunction) return true;
    const bool generated = fusion.in_kernel[k] && !fusion.view_copy[k];
    if (generated && fusion.loads_partial[k]) return false;
    const auto roots = generated ? std::span<const NodeId>(fusion.loads[k]) : g.inputs(k);
    for (NodeId r : roots) for_each_storage(s, r, [&](uint32_t rec) { out.push_back(rec); });
    return true;
  }

  // Which dying buffers kernel v may take in place (reuse_dying_input's
  // `allowed`): any, for a kernel in no fused group; for a member of one
  // (memory/fusion.h group), only a buffer v loads whose other loaders are
  // ancestors of v: inductor's decide_inplace_update, where a reader among
  // v's ancestors has read it already (within the kernel, its loop nest
  // comes first), and any other reader, a member or a kernel outside the
  // group between its first member and v, still needs it.
  std::function<bool(uint32_t)> inplace_rule(const GraphState& s, NodeId v, const memory::InductorFusion& fusion,
                                            const Groups& groups) {
    const auto group = groups.find(fusion.group[v]);
    if (group == groups.end()) return [](uint32_t) { return true; };
    const NodeId first = group->first;
    std::vector<uint32_t> own, others;
    bool known = loaded_records(s, v, fusion, own);
    const std::unordered_set<NodeId> before = ancestors(s.g, v, first);
    auto other = [&](NodeId k) {
      if (known && !is_ancestor(s.g, before, k)) known = loaded_records(s, k, fusion, others);
    };
    for (NodeId m : group->second)
      if (m != v) other(m);
    for (NodeId k = first + 1; k < v; ++k)
      if (fusion.group[k] != first) other(k);
    if (!known) return [](uint32_t) { return false; };
    return [own = std::move(own), others = std::move(others)](uint32_t rec) {
      return std::find(own.begin(), own.end(), rec) != own.end() &&
             std::find(others.begin(), others.end(), rec) == others.end();
    };
  }

  // v's ancestors from `lowest` on, searched back from v over at most
  // kAncestorSearch nodes: a node in the set is an ancestor, one outside
  // it may be one past the search (is_ancestor then says no: the safe side
  // for inplace_rule, no buffer taken).
  static std::unordered_set<NodeId> ancestors(const Graph& g, NodeId v, NodeId lowest) {
    constexpr size_t kAncestorSearch = 512;
    std::unordered_set<NodeId> seen;
    std::vector<NodeId> stack{v};
    while (!stack.empty() && seen.size() < kAncestorSearch) {
      const NodeId u = stack.back();
      stack.pop_back();
      for (NodeId in : g.inputs(u))
        if (in >= lowest && seen.insert(in).second) stack.push_back(in);
    }
    return seen;
  }

  // Whether k is among `before` (ancestors) in inductor's sense: for an op
  // of several results, through each getitem taking one out (inductor
  // lowers each result as a node of its own: max.dim's values and indices,
  // so a reader of the values only is no descendant of the indices' node;
  // var_mean's reader of both is).
  static bool is_ancestor(const Graph& g, const std::unordered_set<NodeId>& before, NodeId k) {
    if (!before.count(k)) return false;
    if (g.node(k).tensors_count <= 1) return true;
    for (NodeId u : g.users(k))
      if (is_getitem(g, u) && !before.count(u)) return false;
    return true;
  }

  // inductor's inplace_buffers: a pointwise kernel writes its result into a
  // buffer it reads for the last time when the sizes match, so that buffer
  // is released before the result is allocated. released[begin, end) are
  // the values whose last read is v; the ones released here are marked in
  // `done`. allowed(rec): whether v may take storage record rec (every
  // dying input for a kernel at its own place; run_group's rule for a
  // member of a fused kernel).
  template <typename Allowed>
  void reuse_dying_input(const GraphState& s, NodeId v, const std::vector<NodeId>& released,
                         uint32_t begin, uint32_t end, std::vector<uint8_t>& done, Allowed&& allowed) {
    const auto out = s.g.tensors(v);
    if (out.size() != 1 || aliased(s, v, out[0]) >= 0) return;
    const int64_t bytes = allocation_bytes(s.g, out[0]);
    for (uint32_t i = begin; i < end; ++i) {
      const int64_t rec = sole_storage(s, released[i]);
      if (rec < 0) continue;
      const Storage& st = st_[static_cast<uint32_t>(rec)];
      if (st.pinned || st.died != kNever || st.bytes != bytes || !allowed(static_cast<uint32_t>(rec))) continue;
      if (backward_tangent(s, st)) continue;
      // A scatter's result is a mutated buffer: inductor writes nothing
      // in place of it.
      if (st.pass == s.pass && st.owner != kNoNode && memory::inductor_scatters_into_copy(s.g, st.owner)) continue;
      // Every holder of the buffer must die here, or it is not free.
      std::vector<uint32_t> holders;
      for (uint32_t j = begin; j < end; ++j)
        if (!done[j] && sole_storage(s, released[j]) == rec) holders.push_back(j);
      if (static_cast<int32_t>(holders.size()) != st.refs) continue;
      for (uint32_t j : holders) {
        release(s, released[j]);
        done[j] = 1;
      }
      return;
    }
  }

  // Whether `st` is a tangent of the backward graph s (a placeholder the
  // forward did not save): inductor's wrapper writes nothing in place of a
  // graph input (can_reuse) but the donated ones, and AOTAutograd donates
  // the saved values only. The forward's inputs are pinned.
  bool backward_tangent(const GraphState& s, const Storage& st) const {
    return s.pass == Pass::kBackward && st.pass == s.pass && st.owner != kNoNode &&
           s.g.node(st.owner).kind == NodeKind::kPlaceholder;
  }

  // The one storage record a value holds, or -1 (none, or several).
  int64_t sole_storage(const GraphState& s, NodeId n) {
    int64_t rec = -1;
    int count = 0;
    for_each_storage(s, n, [&](uint32_t id) {
      rec = id;
      ++count;
    });
    return count == 1 ? rec : -1;
  }

  void finish_at_peak() {
    for (const Storage& s : st_) {
      if (s.born <= peak_instant_ && peak_instant_ < s.died && s.bytes > 0) {
        LiveStorage live{s.pass, s.owner, s.bytes};
        // Instants number the forward's nodes, then the backward's; the
        // storage is released after the node of the instant before it died.
        if (s.died != kNever && !s.pinned) {
          const uint32_t last = s.died - 1;
          live.released_pass = last < forward_size_ ? Pass::kForward : Pass::kBackward;
          live.released_after = last < forward_size_ ? last : last - forward_size_;
        }
        prof_.at_peak.push_back(live);
      }
    }
    sort_at_peak(prof_.at_peak);
  }

  MemoryModel model_;
  std::span<const NodeId> forward_within_, backward_within_;
  std::vector<uint8_t> saved_;  // forward nodes the forward saves for the backward
  MemoryProfile prof_;
  std::vector<Storage> st_;

  int64_t live_ = 0;
  uint32_t instant_ = 0;
  uint32_t peak_instant_ = 0;
  uint32_t forward_size_ = 0;
};

}  // namespace

namespace {

// A profile simulated with pass p's graph in node order `order` (its node
// k is the graph's order[k]), told in the graph's own node ids.
void rename_nodes(MemoryProfile& m, Pass p, const std::vector<NodeId>& order) {
  auto own = [&](Pass q, NodeId n) { return q == p && n != kNoNode ? order[n] : n; };
  std::vector<int64_t>& timeline = p == Pass::kForward ? m.forward_timeline : m.backward_timeline;
  std::vector<int64_t> renamed(timeline.size());
  for (size_t k = 0; k < timeline.size(); ++k) renamed[order[k]] = timeline[k];
  timeline = std::move(renamed);
  m.peak_node = own(m.peak_pass, m.peak_node);
  for (LiveStorage& s : m.at_peak) {
    s.node = own(s.pass, s.node);
    s.released_after = own(s.released_pass, s.released_after);
  }
  sort_at_peak(m.at_peak);
}

// Under inductor's model: the step with each graph in the orders of its
// kernels inductor's reorder pass may keep (memory/kernel_order.h), the
// highest peak kept. One graph is reordered at a time: the forward's order
// moves the forward's peak, the backward's the backward's.
MemoryProfile simulate_kernel_orders(const Graph& forward, const Graph& backward, int num_fwd_outputs) {
  MemoryProfile worst = Simulator(MemoryModel::kInductor).run(forward, backward, num_fwd_outputs);
  std::string forward_order = "graph", backward_order = "graph";
  std::vector<std::string> forward_orders{"graph"}, backward_orders{"graph"};
  for (Pass p : {Pass::kForward, Pass::kBackward}) {
    const Graph& g = p == Pass::kForward ? forward : backward;
    for (memory::KernelOrder& o : memory::kernel_orders(g, memory::inductor_fusion(g)).orders) {
      const Graph reordered = GraphBuilder::rearrange(g, o.nodes);
      MemoryProfile m = Simulator(MemoryModel::kInductor)
                            .with_groups(p, o.groups)
                            .run(p == Pass::kForward ? reordered : forward,
                                 p == Pass::kBackward ? reordered : backward, num_fwd_outputs);
      (p == Pass::kForward ? forward_orders : backward_orders).push_back(o.name);
      if (m.peak_bytes <= worst.peak_bytes) continue;
      rename_nodes(m, p, o.nodes);
      worst = std::move(m);
      (p == Pass::kForward ? forward_order : backward_order) = o.name;
      (p == Pass::kForward ? backward_order : forward_order) = "graph";
    }
  }
  worst.forward_orders = std::move(forward_orders);
  worst.backward_orders = std::move(backward_orders);
  worst.forward_order = std::move(forward_order);
  worst.backward_order = std::move(backward_order);
  return worst;
}

}  // namespace

MemoryProfile simulate_memory(const Graph& forward, const Graph& backward, int num_fwd_outputs,
                              MemoryModel model, bool kernel_orders) {
  if (model == MemoryModel::kInductor && kernel_orders)
    return simulate_kernel_orders(forward, backward, num_fwd_outputs);
  return Simulator(model).run(forward, backward, num_fwd_outputs);
}

const char* pass_name(Pass p) { return p == Pass::kForward ? "forward" : "backward"; }

}  // namespace remat
