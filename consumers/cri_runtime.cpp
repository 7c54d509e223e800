// Runtime over the CRI's gRPC API (runtime.v1.RuntimeService), the client generated at build time from
// the CRI's published api.proto. Each call has a deadline: a runtime that hangs costs a bounded wait,
// never a stuck refresh.
#include "runtime.hpp"

#include "bounded_parse.hpp"

#include "api.grpc.pb.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

namespace unbounded {
namespace {

namespace cri = runtime::v1;

class CriRuntime final : public Runtime {
public:
	CriRuntime(const std::string &socket, Millis call_timeout)
		: socket_(socket), timeout_(call_timeout),
		  stub_(cri::RuntimeService::NewStub(grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials())))
	{
	}

	Result<std::string> version() override
	{
		cri::VersionRequest req;
		req.set_version("v1");
		cri::VersionResponse resp;
		grpc::ClientContext ctx;
		deadline(ctx);
		if (auto s = stub_->Version(&ctx, req, &resp); !s.ok())
			return fail(status_error("ask the container runtime its version", s));
		return printable(resp.runtime_name()) + " " + printable(resp.runtime_version());
	}

	Result<std::vector<PodInfo>> ready_pods(const std::map<std::string, std::string> &labels) override
	{
		cri::ListPodSandboxRequest req;
		auto *filter = req.mutable_filter();
		filter->mutable_state()->set_state(cri::SANDBOX_READY);
		for (const auto &[k, v] : labels)
			(*filter->mutable_label_selector())[k] = v;
		cri::ListPodSandboxResponse resp;
		grpc::ClientContext ctx;
		deadline(ctx);
		if (auto s = stub_->ListPodSandbox(&ctx, req, &resp); !s.ok())
			return fail(status_error("list the pods", s));
		std::vector<PodInfo> pods;
		for (const auto &p : resp.items()) {
			// The filter is the runtime's: checked again, a runtime that ignores a label must not
			// make us restart what was not asked for.
			bool all = p.state() == cri::SANDBOX_READY;
			for (const auto &[k, v] : labels) {
				auto it = p.labels().find(k);
				all = all && it != p.labels().end() && it->second == v;
			}
			if (all)
				pods.push_back({p.id(), p.metadata().uid(), p.metadata().name(), p.metadata().namespace_()});
		}
		return pods;
	}

	Result<std::vector<ContainerInfo>> running_containers(const std::string &pod_id) override
	{
		cri::ListContainersRequest req;
		auto *filter = req.mutable_filter();
		filter->set_pod_sandbox_id(pod_id);
		filter->mutable_state()->set_state(cri::CONTAINER_RUNNING);
		cri::ListContainersResponse resp;
		grpc::ClientContext ctx;
		deadline(ctx);
		if (auto s = stub_->ListContainers(&ctx, req, &resp); !s.ok())
			return fail(status_error("list the containers of pod " + printable(pod_id), s));
		std::vector<ContainerInfo> out;
		for (const auto &c : resp.containers())
			if (c.pod_sandbox_id() == pod_id && c.state() == cri::CONTAINER_RUNNING)
				out.push_back({c.id(), c.metadata().name(), c.pod_sandbox_id(), c.created_at()});
		return out;
	}

	Result<void> stop(const std::string &container_id, Millis grace) override
	{
		cri::StopContainerRequest req;
		req.set_container_id(container_id);
		req.set_timeout(std::chrono::duration_cast<std::chrono::seconds>(grace).count());
		cri::StopContainerResponse resp;
		grpc::ClientContext ctx;
		// The runtime waits out the grace period before it answers.
		ctx.set_deadline(std::chrono::system_clock::now() + grace + timeout_);
		if (auto s = stub_->StopContainer(&ctx, req, &resp); !s.ok())
			return fail(status_error("stop container " + printable(container_id), s));
		return {};
	}

private:
	void deadline(grpc::ClientContext &ctx) const { ctx.set_deadline(std::chrono::system_clock::now() + timeout_); }

	Error status_error(const std::string &what, const grpc::Status &s) const
	{
		const int errnum = s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? ETIMEDOUT
				   : s.error_code() == grpc::StatusCode::UNAVAILABLE     ? ECONNREFUSED
											 : EIO;
		return make_error("Failed to " + what + " through the CRI at " + socket_ + ": " + printable(s.error_message()) +
					  " (gRPC status " + std::to_string(static_cast<int>(s.error_code())) + ")",
				  EXIT_NOT_READY, errnum);
	}

	std::string socket_;
	Millis timeout_;
	std::unique_ptr<cri::RuntimeService::Stub> stub_;
};

}  // namespace

std::unique_ptr<Runtime> connect_cri(const std::string &socket, Millis call_timeout)
{
	return std::make_unique<CriRuntime>(socket, call_timeout);
}

}  // namespace unbounded
