"""A container runtime for the consumers tests: the CRI's RuntimeService (the calls unbounded-nvidia-consumers
makes) served on a unix socket with python3-grpcio, from the message classes cri.generate() makes, and
kubelet's part: a stopped container of a pod whose restart policy is Always is replaced, after
`restart_delay`, by a new one of the same name (a new id, created now), and its `on_start` runs (the
device plugin's writes its CDI spec from the root, as the real one does at its start).

What the fake does not model is what the helper must not depend on: it answers label selectors as
containerd does (every label must match) and lists running containers only when asked for them."""

import threading
import time
import uuid
from concurrent import futures


class FakeRuntime:
    def __init__(self, pb, socket, restart_delay=0.3, name="containerd", version="v1.7.24"):
        import grpc  # python3-grpcio
        self.pb = pb
        self.lock = threading.Lock()
        self.pods = {}        # id -> dict(name, namespace, uid, labels, back, on_start)
        self.containers = {}  # id -> dict(pod, name, created_at, state)
        self.stops = []       # the ids StopContainer was called for, in order
        self.calls = []
        self.restart_delay = restart_delay
        self.name, self.version = name, version
        handlers = {
            "Version": (pb.VersionRequest, self._version),
            "ListPodSandbox": (pb.ListPodSandboxRequest, self._list_pods),
            "ListContainers": (pb.ListContainersRequest, self._list_containers),
            "StopContainer": (pb.StopContainerRequest, self._stop),
        }
        generic = grpc.method_handlers_generic_handler("runtime.v1.RuntimeService", {
            m: grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req.FromString,
                                                   response_serializer=lambda resp: resp.SerializeToString())
            for m, (req, fn) in handlers.items()})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((generic,))
        if self.server.add_insecure_port(f"unix://{socket}") == 0:
            raise RuntimeError(f"the fake runtime could not listen on {socket}")
        self.server.start()

    def close(self):
        self.server.stop(None)

    def pod(self, name, labels, containers=("main",), namespace="kube-system", created_at=None, back=True, on_start=None):
        """A ready pod with running containers created at `created_at` (ns, default now); returns its id."""
        pid = uuid.uuid4().hex
        with self.lock:
            self.pods[pid] = dict(name=name, namespace=namespace, uid=str(uuid.uuid4()), labels=dict(labels), back=back,
                                  on_start=on_start)
            for c in containers:
                self.containers[uuid.uuid4().hex] = dict(pod=pid, name=c, created_at=created_at or time.time_ns(), state="running")
        return pid

    def running(self, pod_id):
        with self.lock:
            return {cid: dict(c) for cid, c in self.containers.items() if c["pod"] == pod_id and c["state"] == "running"}

    # -- the RPCs ---------------------------------------------------------------------------------
    def _version(self, req, ctx):
        self.calls.append("Version")
        return self.pb.VersionResponse(version="0.1.0", runtime_name=self.name, runtime_version=self.version,
                                       runtime_api_version="v1")

    def _list_pods(self, req, ctx):
        self.calls.append("ListPodSandbox")
        want = dict(req.filter.label_selector) if req.HasField("filter") else {}
        items = []
        with self.lock:
            for pid, p in self.pods.items():
                if all(p["labels"].get(k) == v for k, v in want.items()):
                    items.append(self.pb.PodSandbox(
                        id=pid, state=self.pb.SANDBOX_READY, labels=p["labels"],
                        metadata=self.pb.PodSandboxMetadata(name=p["name"], uid=p["uid"], namespace=p["namespace"])))
        return self.pb.ListPodSandboxResponse(items=items)

    def _list_containers(self, req, ctx):
        self.calls.append("ListContainers")
        f = req.filter
        out = []
        with self.lock:
            for cid, c in self.containers.items():
                if f.pod_sandbox_id and c["pod"] != f.pod_sandbox_id:
                    continue
                state = self.pb.CONTAINER_RUNNING if c["state"] == "running" else self.pb.CONTAINER_EXITED
                if f.HasField("state") and f.state.state != state:
                    continue
                out.append(self.pb.Container(id=cid, pod_sandbox_id=c["pod"], state=state, created_at=c["created_at"],
                                             metadata=self.pb.ContainerMetadata(name=c["name"])))
        return self.pb.ListContainersResponse(containers=out)

    def _stop(self, req, ctx):
        self.calls.append("StopContainer")
        with self.lock:
            c = self.containers.get(req.container_id)
            if c is None:
                import grpc
                ctx.abort(grpc.StatusCode.NOT_FOUND, f"container {req.container_id} not found")
            self.stops.append(req.container_id)
            c["state"] = "exited"
            pod = self.pods[c["pod"]]
        if pod["back"]:
            threading.Timer(self.restart_delay, self._restart, [c["pod"], c["name"]]).start()
        return self.pb.StopContainerResponse()

    def _restart(self, pod_id, name):
        pod = self.pods[pod_id]
        if pod["on_start"]:
            pod["on_start"]()
        with self.lock:
            self.containers[uuid.uuid4().hex] = dict(pod=pod_id, name=name, created_at=time.time_ns(), state="running")
