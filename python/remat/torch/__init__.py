"""remat.torch: the PyTorch front door (FX joint graphs <-> format v1).

Contract:
  export_joint_graph(gm, num_fwd_outputs, static_lifetime_input_indices=None,
                     *, as_json=False, handles=None) -> dict | bytes
  import_graph(doc, joint_gm=None, handles=None) -> fx.GraphModule
  import_result(result_doc, joint_gm, handles=None) -> (fw_module, bw_module)
  capture() / CaptureSession / save_capture(path, session)
Importing this package imports torch; `import remat` alone does not.
"""

from ._capture import CapturedJoint, CaptureSession, capture, save_capture
from ._export import export_graph_nodes, export_joint_graph
from ._import import import_graph, import_result
from ._targets import resolve_target, target_name

__all__ = [
    "export_joint_graph",
    "export_graph_nodes",
    "import_graph",
    "import_result",
    "capture",
    "CaptureSession",
    "CapturedJoint",
    "save_capture",
    "target_name",
    "resolve_target",
]
