// unbounded-nvidia-consumers: started (queued, not waited for) by setup and its refresh when what our
// specs offer changed; restarts the GPU consumers' containers through the runtime's CRI (follow.hpp).
#include "bounded_parse.hpp"
#include "config.hpp"
#include "context.hpp"
#include "follow.hpp"
#include "fs.hpp"
#include "log.hpp"
#include "main_guard.hpp"
#include "version.hpp"

#include <getopt.h>
#include <unistd.h>

#include <cstdio>

namespace unbounded {
namespace {

// Every CRI call but the stops: a runtime that does not answer in this time is taken as down.
constexpr Millis CALL_TIMEOUT{10'000};

void print_help()
{
	std::printf("Usage: unbounded-nvidia-consumers [--root DIR] [--config FILE]\n\n"
		    "Restarts, through the container runtime's CRI, the containers of the Kubernetes GPU consumers\n"
		    "(consumers.selectors in %s) that started before the current driver root\n"
		    "generation, once, and waits for them to run again (consumers.wait). Started by setup and\n"
		    "its refresh after a driver or GPU change; nothing to do otherwise.\n\n"
		    "Options:\n"
		    "  --root DIR      a machine tree to act on instead of / (the runtime's socket in it)\n"
		    "  --config FILE   the configuration file (default %s under the root)\n"
		    "  -h, --help      show this help\n"
		    "  --version       show the release and the commit it was built from\n\n"
		    "Exit status: 0 every consumer is back or nothing to do, 1 one is not, 2 usage or configuration error.\n\n"
		    "See unbounded-nvidia-consumers(8).\n",
		    std::string(DEFAULT_CONFIG_PATH).c_str(), std::string(DEFAULT_CONFIG_PATH).c_str());
}

int run(int argc, char **argv)
{
	log::init("unbounded-nvidia-consumers", /*allow_journal=*/true);
	static const option opts[] = {{"root", required_argument, nullptr, 'r'},
				      {"config", required_argument, nullptr, 'c'},
				      {"help", no_argument, nullptr, 'h'},
				      {"version", no_argument, nullptr, 'V'},
				      {nullptr, 0, nullptr, 0}};
	std::string root, config;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "h", opts, nullptr)) >= 0;) {
		switch (c) {
		case 'r': root = optarg; break;
		case 'c': config = optarg; break;
		case 'h': print_help(); return EXIT_READY;
		case 'V': print_version("unbounded-nvidia-consumers"); return EXIT_READY;
		default:
			log::error("unknown or incomplete option '" + printable(argv[optind - 1]) + "' (see --help)");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		log::error("unexpected argument '" + printable(argv[optind]) + "' (see --help)");
		return EXIT_USAGE;
	}
	Context ctx;
	ctx.root = effective_root(root);
	log::set_machine_root(ctx.root);
	auto cfg = load_config(config.empty() ? ctx.real(DEFAULT_CONFIG_PATH) : config, !config.empty());
	if (!cfg) {
		log::error(cfg.error().message);
		return EXIT_USAGE;
	}
	ctx.config = std::move(*cfg);
	if (!ctx.config.consumers.enabled) {
		log::notice("consumers.enabled is off in " + ctx.config.origin("consumers") + ": not restarting any GPU consumer.");
		return EXIT_READY;
	}
	auto run_dir = fs::open_private_dir(ctx.real(RUN_DIR), RUN_DIR);
	if (!run_dir) {
		log::error(run_dir.error().message);
		return EXIT_NOT_READY;
	}
	const std::string socket = runtime_socket(ctx);
	std::unique_ptr<Runtime> runtime;
	std::string unreachable;
	if (socket.empty())
		unreachable = "no container runtime socket (/run/containerd/containerd.sock, /run/crio/crio.sock; consumers.runtime_endpoint)";
	else {
		runtime = connect_cri(ctx.real(socket), CALL_TIMEOUT);
		if (auto v = runtime->version(); !v) {
			unreachable = v.error().message;
			runtime.reset();
		} else
			log::debug("Asking " + *v + " at " + socket);
	}
	const FollowSeams seams{[](Millis d) { ::usleep(static_cast<useconds_t>(d.count() * 1000)); }};
	return follow_consumers(ctx, run_dir->get(), runtime.get(), socket, unreachable, seams);
}

}  // namespace
}  // namespace unbounded

int main(int argc, char **argv)
{
	return unbounded::guarded_main("unbounded-nvidia-consumers", [&] { return unbounded::run(argc, argv); });
}
