"""The CRI from Python: the containerd tier's kubelet (a client over containerd's socket) and the
message classes of the consumers tests' fake runtime (fake_cri.py).

Debian ships no crictl, but trixie's golang-github-kubernetes-cri-api-dev ships the CRI's api.proto
(consumers/fetch-cri-api.sh downloads it into .cache/cri-api, where make's build fetched it for the
consumers helper). protoc (protobuf-compiler) makes the message classes of it at test time, into the
build directory; nothing generated is checked in. The gogoproto options are stripped first
(they only steer Go's generator, and their import is not in any Python package). The RPC stubs are made
here from the service descriptor protoc wrote, with grpc's generic unary calls: bookworm's
python3-grpc-tools (1.14) is far older than its python3-grpcio (1.51), and a stub per method is just
the method's path and its two message types.

The client runs on the test host (bookworm's python3-grpcio), not in the machine: the socket's
directory is a host directory bound at /run/containerd, so the machine image needs no Python, and the
test drives containerd as kubelet would while it reads the machine's files directly."""

import importlib
import os
import subprocess
import sys

SOURCE = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def generate(build_dir):
    """Fetches api.proto (once per source tree) and returns the api_pb2 module generated from it."""
    src = os.path.join(SOURCE, ".cache", "cri-api")
    r = subprocess.run([os.path.join(SOURCE, "consumers", "fetch-cri-api.sh"), src], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"Failed to fetch the CRI api.proto ({r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    out = os.path.join(build_dir, "cri-client")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src, "api.proto")) as f:
        text = "".join(line for line in f if "gogoproto" not in line)
    with open(os.path.join(out, "api.proto"), "w") as f:
        f.write(text)
    r = subprocess.run(["protoc", f"-I{out}", f"--python_out={out}", os.path.join(out, "api.proto")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"protoc failed on {out}/api.proto ({r.returncode}):\n{r.stderr}")
    if out not in sys.path:
        sys.path.insert(0, out)
    return importlib.import_module("api_pb2")


class CRI:
    """RuntimeService and ImageService of the CRI v1 API, one method per RPC: cri.RunPodSandbox(req)."""

    def __init__(self, pb, socket, timeout=60):
        import grpc  # python3-grpcio
        self.pb = pb
        self.grpc = grpc
        self.channel = grpc.insecure_channel(f"unix://{socket}")
        self.timeout = timeout
        self._calls = {}
        for service in pb.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                if m.client_streaming or m.server_streaming:
                    continue
                self._calls[m.name] = self.channel.unary_unary(
                    f"/{service.full_name}/{m.name}",
                    request_serializer=getattr(pb, m.input_type.name).SerializeToString,
                    response_deserializer=getattr(pb, m.output_type.name).FromString)

    def __getattr__(self, name):
        calls = self.__dict__.get("_calls", {})
        if name not in calls:
            raise AttributeError(name)
        return lambda request, timeout=None: calls[name](request, timeout=timeout or self.timeout)

    def close(self):
        self.channel.close()
